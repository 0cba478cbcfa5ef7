"""Ray Tune 2.x's function-trainable API inside a trial: ``report``, ``get_checkpoint``, ``get_context``.

::

    from rltune import train
    from rltune.train import Checkpoint

    def fn(config):                                   # one argument: the 2.x style
        start = 0
        checkpoint = train.get_checkpoint()           # on a resume or retry: the last one reported
        if checkpoint:
            with checkpoint.as_directory() as d:
                start = json.load(open(os.path.join(d, "state.json")))["step"]
        for step in range(start, 10):
            with tempfile.TemporaryDirectory() as d:
                json.dump({"step": step + 1}, open(os.path.join(d, "state.json"), "w"))
                train.report({"score": step}, checkpoint=Checkpoint.from_directory(d))

The same functions are ``tune.report`` (Ray 2.7+'s ``tune.report(metrics, checkpoint=...)``
and the 1.x ``tune.report(**metrics)``) and ``session.report`` (``ray.air.session``
of Ray 2.0-2.6). They run on the trial's :class:`~rltune.orchestrator._reporter.Reporter`:
one result per call, the checkpoint copied into the trial directory before
the orchestrator decides, :class:`~rltune.orchestrator._reporter.TrialStopped`
raised when the trial ends.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rltune.errors import ConfigError
from rltune.orchestrator import _reporter
from rltune.orchestrator._checkpoint import Checkpoint


def _reporter_or_raise(name: str) -> _reporter.Reporter:
    if _reporter._current is None:
        raise RuntimeError(f"{name}() is only available inside a trial started by tune.run or Tuner.fit")
    return _reporter._current


def report(metrics: dict[str, Any] | None = None, *, checkpoint: Checkpoint | None = None, **kwargs: Any) -> None:
    """Report one result (``metrics``, or keyword metrics: the 1.x form) and optionally its ``checkpoint``.

    Returns to go on; raises :class:`~rltune.orchestrator._reporter.TrialStopped`
    (let it propagate) when the orchestrator ends the trial.
    """
    reporter = _reporter_or_raise("report")
    if metrics is not None and not isinstance(metrics, dict):
        raise ConfigError(f"must be a dict of metrics, but got {type(metrics).__name__}", where="report metrics")
    if metrics is not None and kwargs:
        raise ConfigError("give the metrics once: a dict or keywords, not both", where="report")
    result = dict(metrics) if metrics is not None else dict(kwargs)
    if checkpoint is None:
        reporter(**result)
        return
    if not isinstance(checkpoint, Checkpoint):
        raise ConfigError(f"must be a rltune Checkpoint (Checkpoint.from_directory(path)), but got "
                          f"{type(checkpoint).__name__}", where="report checkpoint")
    with checkpoint.as_directory() as directory:
        reporter.report_checkpoint(result, directory)


def get_checkpoint() -> Checkpoint | None:
    """The checkpoint this trial continues from (a resume, a retry, a restart after a failure), else None."""
    restored = _reporter_or_raise("get_checkpoint").restored_checkpoint
    return Checkpoint(restored) if restored else None


@dataclass(frozen=True)
class TrialContext:
    """What a trial knows about itself (Ray's ``train.get_context()``): its name, id, directory, study."""

    trial_name: str
    trial_id: str
    trial_dir: str
    experiment_name: str

    def get_trial_name(self) -> str:
        """The trial's name: its directory's (``trial_00003``)."""
        return self.trial_name

    def get_trial_id(self) -> str:
        """The trial's id, unique in its results directory (``<study>_00003``)."""
        return self.trial_id

    def get_trial_dir(self) -> str:
        """The trial's directory (its results, checkpoints and output)."""
        return self.trial_dir

    def get_experiment_name(self) -> str:
        """The study's name."""
        return self.experiment_name

    def get_world_size(self) -> int:
        """1: a trial is one process (rollout workers are the trainer's own)."""
        return 1

    def get_world_rank(self) -> int:
        """0 (see :meth:`get_world_size`)."""
        return 0

    def get_local_rank(self) -> int:
        """0 (see :meth:`get_world_size`)."""
        return 0


def get_context() -> TrialContext:
    """The running trial's :class:`TrialContext`."""
    reporter = _reporter_or_raise("get_context")
    trial_dir = Path(reporter.trial_dir)
    study = trial_dir.parent.name
    number = reporter.trial_number if reporter.trial_number is not None else 0
    return TrialContext(trial_dir.name, f"{study}_{number:05d}", str(trial_dir), study)


# Ray 2.0-2.6's ``ray.air.session`` names
def get_trial_name() -> str:
    """The running trial's name (``session.get_trial_name()``)."""
    return get_context().trial_name


def get_trial_id() -> str:
    """The running trial's id (``session.get_trial_id()``)."""
    return get_context().trial_id


def get_trial_dir() -> str:
    """The running trial's directory (``session.get_trial_dir()``)."""
    return get_context().trial_dir


def get_experiment_name() -> str:
    """The study's name (``session.get_experiment_name()``)."""
    return get_context().experiment_name
