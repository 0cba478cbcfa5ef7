"""``rltune train``'s trial: its directory, and a study trial's loop run in this process.

A trial directory holds::

    params.json            the trainer's full resolved config (JSON-safe)
    result.json            one JSON line per iteration: the whole result dict (NaN written as NaN)
    events.out.tfevents.*  the results as TensorBoard scalars and histograms (unless turned off)
    checkpoint_000010/     checkpoints (``checkpoint_freq``, ``checkpoint_at_end``, Ctrl-C)

:func:`run_local` runs :func:`rltune.orchestrator._trial_process.train_loop`,
the loop of every trainer trial of a study, with a
:class:`~rltune.orchestrator._reporter.Reporter` that asks a
:class:`LocalDecider` (the study's :func:`~rltune.orchestrator._decision.decide`
on the stop criteria and Ctrl-C) instead of an orchestrator over a socket. So
result.json, checkpoint_freq, checkpoint_at_end and Ctrl-C behave as in a
study's trial. It prints nothing; it reports each result to ``on_result``
and returns a :class:`TrialOutcome`.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

from rltune._disk import disk_kind, ensure_dir, writing
from rltune._ipc import Exploit
from rltune._results_dir import default_results_dir
from rltune._trial_files import CHECKPOINT_PREFIX, PARAMS_FILE, RESULT_FILE, json_safe  # noqa: F401 - others import them from here
from rltune.errors import DiskError, RLTuneError
from rltune.orchestrator._decision import CONTINUE_DECISION, Decision, Outcome, decide, read_result
from rltune.orchestrator._reporter import Reporter, TrialStopped, latest_checkpoint
from rltune.orchestrator._stop import StopCriteria


@dataclass
class TrialOutcome:
    """How a trial ended: its directory, last result, latest checkpoint, and why it stopped."""

    trial_dir: Path
    last_result: dict[str, Any] | None = None
    checkpoint: str | None = None
    stop_reason: str | None = None  # the stop criterion met, e.g. "training_iteration = 2 >= 2"
    interrupted: bool = False


class LocalDecider:
    """The answer to each result of a trial that no orchestrator runs: :func:`decide`, in the trial's process.

    ``stopping`` (set by Ctrl-C) stops the trial at its next result with a
    checkpoint, as a study stops its trials. A stop key the first result lacks
    raises its :class:`~rltune.errors.ConfigError` (the result is written by then).
    """

    def __init__(self, stop: StopCriteria, *, checkpoint_at_end: bool = False,
                 on_result: Callable[[dict[str, Any]], None] | None = None, schedule: Any = None,
                 trial_dir: Path | None = None) -> None:
        self.stop = stop
        self.schedule = schedule  # a ScheduleReplay (._replay): its next config is applied as PBT's exploit is
        self.trial_dir = trial_dir
        self.checkpoint_at_end = checkpoint_at_end
        self.on_result = on_result
        self.stopping = False
        self.last_result: dict[str, Any] | None = None
        self.decision: Decision = CONTINUE_DECISION  # the last one

    def __call__(self, result: dict[str, Any]) -> Any:
        """The message the orchestrator would send for ``result``: ``decision.message()``."""
        self.last_result = result
        if self.on_result is not None:
            self.on_result(result)
        reading = read_result(result, None, self.stop)
        if reading.error is not None:
            raise reading.error
        self.decision = decide(reading, iteration=int(result.get("training_iteration") or 0),
                               stopping=self.stopping, checkpoint_at_end=self.checkpoint_at_end, should_prune=None)
        config = self.schedule.due(result) if self.schedule is not None and self.decision.outcome is None else None
        if config is not None and self.trial_dir is not None:  # restore this iteration's own checkpoint under it
            return Exploit(str(self.trial_dir / f"{CHECKPOINT_PREFIX}{int(result['training_iteration']):06d}"), config)
        return self.decision.message()


def make_trial_dir(results_dir: str | os.PathLike[str] | None, name: str) -> Path:
    """Create ``<results_dir>/<name>``; if it exists, ``<name>_1``, ``<name>_2``... (never reuse a trial's dir)."""
    root = Path(os.path.expanduser(str(results_dir))) if results_dir else default_results_dir()
    ensure_dir(root, "the results directory")
    candidate, n = root / name, 0
    while True:
        try:
            with writing(candidate, "the trial directory"):
                candidate.mkdir()
            return candidate
        except DiskError as exc:
            if not isinstance(exc.__cause__, FileExistsError):
                raise
            n += 1
            candidate = root / f"{name}_{n}"


def default_trial_name(algorithm: str, env_name: str) -> str:
    """``RUN_ENV_timestamp``, with ``/`` and ``:`` of the env name made path-safe."""
    stamp = datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
    return f"{algorithm}_{env_name.replace('/', '_').replace(':', '_')}_{stamp}"


def run_local(
    trainer: Any,
    trial_dir: Path,
    *,
    stop: StopCriteria,
    checkpoint_freq: int = 0,
    checkpoint_at_end: bool = False,
    on_result: Callable[[dict[str, Any]], None] | None = None,
    on_interrupt: Callable[[], None] | None = None,
    tensorboard: bool = True,
    schedule: Any = None,
) -> TrialOutcome:
    """Train ``trainer`` in ``trial_dir`` until a stop criterion is met (or forever without one).

    Ctrl-C (SIGINT, when called in the main thread): the current iteration
    ends, is checkpointed, and the trial stops, as a study's trials do;
    ``on_interrupt`` is called from the signal handler (keep it to one
    unbuffered write). A second Ctrl-C stops at once, keeping the checkpoints
    saved so far. Either way the outcome is ``interrupted``. The trainer is
    stopped in every case; errors (an unknown stop key after the first
    iteration, an env failing) propagate after that. ``tensorboard``: also
    write the results as TensorBoard event files in ``trial_dir``. ``schedule``: a
    :class:`~rltune.orchestrator._replay.ScheduleReplay` whose configs apply when due.
    """
    from rltune.orchestrator._tensorboard import open_trial_writer
    from rltune.orchestrator._trial_process import train_loop

    decider = LocalDecider(stop, checkpoint_at_end=checkpoint_at_end, on_result=on_result, schedule=schedule,
                           trial_dir=trial_dir)
    outcome = TrialOutcome(trial_dir)
    reporter: Reporter | None = None
    previous = _on_ctrl_c(decider, on_interrupt)
    try:
        with writing(trial_dir / PARAMS_FILE, "the trial's config"):
            (trial_dir / PARAMS_FILE).write_text(json.dumps(json_safe(trainer.config), indent=2, sort_keys=True) + "\n")
        reporter = Reporter(None, trial_dir=trial_dir, trial_number=None, checkpoint_freq=checkpoint_freq,
                            decide=decider, observers=[open_trial_writer(trial_dir)] if tensorboard else [],
                            config=trainer.config)
        train_loop(trainer, reporter)  # stops the trainer
    except (RLTuneError, OSError) as exc:
        if disk_kind(exc) is None:
            raise
        found = latest_checkpoint(trial_dir)  # a full disk: which checkpoint is still good
        kept = f"; the last checkpoint saved is {found[1]!r}" if found else "; no checkpoint was saved"
        raise DiskError(f"{exc}{kept}", path=trial_dir, kind=disk_kind(exc)) from exc
    except TrialStopped:
        outcome.interrupted = decider.decision.outcome is Outcome.INTERRUPTED
        outcome.stop_reason = None if outcome.interrupted else decider.decision.note
    except KeyboardInterrupt:  # the second Ctrl-C
        outcome.interrupted = True
    finally:
        if previous is not _NOT_INSTALLED:
            signal.signal(signal.SIGINT, previous if previous is not None else signal.SIG_DFL)
        if reporter is not None:
            reporter.close()
        else:  # train_loop did not start
            trainer.stop()
    outcome.last_result = decider.last_result
    found = latest_checkpoint(trial_dir)
    outcome.checkpoint = found[1] if found else None
    return outcome


_NOT_INSTALLED = object()


def _on_ctrl_c(decider: LocalDecider, on_interrupt: Callable[[], None] | None) -> Any:
    """Make SIGINT stop the trial after its iteration (a second one: at once); the handler it replaced."""
    if threading.current_thread() is not threading.main_thread():
        return _NOT_INSTALLED

    def handler(signum: int, frame: Any) -> None:
        if decider.stopping:
            raise KeyboardInterrupt
        decider.stopping = True
        if on_interrupt is not None:
            on_interrupt()

    return signal.signal(signal.SIGINT, handler)
