"""One trial of a trainer: its directory, its results, its stop criteria and checkpoints.

A trial directory holds::

    params.json            the trainer's full resolved config (JSON-safe)
    result.json            one JSON line per iteration: the whole result dict (NaN written as NaN)
    checkpoint_000010/     checkpoints (``checkpoint_freq``, ``checkpoint_at_end``, Ctrl-C)

:func:`run_trial` prints nothing; it reports each result to ``on_result``
and returns a :class:`TrialOutcome`.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

from rltune._trial_files import DEFAULT_RESULTS_DIR, default_results_dir  # noqa: F401 - imported from here too
from rltune.orchestrator._stop import StopCriteria, StopReason

PARAMS_FILE = "params.json"
RESULT_FILE = "result.json"


@dataclass
class TrialOutcome:
    """How a trial ended: its directory, last result, latest checkpoint, and why it stopped."""

    trial_dir: Path
    last_result: dict[str, Any] | None = None
    checkpoint: str | None = None
    stop_reason: StopReason | None = None
    interrupted: bool = False


def make_trial_dir(results_dir: str | os.PathLike[str] | None, name: str) -> Path:
    """Create ``<results_dir>/<name>``; if it exists, ``<name>_1``, ``<name>_2``... (never reuse a trial's dir)."""
    root = Path(os.path.expanduser(str(results_dir))) if results_dir else default_results_dir()
    root.mkdir(parents=True, exist_ok=True)
    candidate, n = root / name, 0
    while True:
        try:
            candidate.mkdir()
            return candidate
        except FileExistsError:
            n += 1
            candidate = root / f"{name}_{n}"


def default_trial_name(algorithm: str, env_name: str) -> str:
    """``RUN_ENV_timestamp``, with ``/`` and ``:`` of the env name made path-safe."""
    stamp = datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
    return f"{algorithm}_{env_name.replace('/', '_').replace(':', '_')}_{stamp}"


def run_trial(
    trainer: Any,
    trial_dir: Path,
    *,
    stop: StopCriteria,
    checkpoint_freq: int = 0,
    checkpoint_at_end: bool = False,
    on_result: Callable[[dict[str, Any]], None] | None = None,
) -> TrialOutcome:
    """Train ``trainer`` in ``trial_dir`` until a stop criterion is met (or forever without one).

    On KeyboardInterrupt: save a checkpoint (if an iteration completed) and
    return with ``interrupted=True``. The trainer is stopped in every case;
    errors (an unknown stop key after the first iteration, an env failing)
    propagate after that.
    """
    from rltune.trainers._checkpoint import json_safe

    trainer.logdir = trial_dir
    (trial_dir / PARAMS_FILE).write_text(json.dumps(json_safe(trainer.config), indent=2, sort_keys=True) + "\n")
    outcome = TrialOutcome(trial_dir)
    saved_at = -1

    def save() -> None:
        nonlocal saved_at
        if trainer.iteration > 0 and trainer.iteration != saved_at:
            outcome.checkpoint = trainer.save()
            saved_at = trainer.iteration

    try:
        with open(trial_dir / RESULT_FILE, "a") as results:
            try:
                while outcome.stop_reason is None:
                    result = trainer.train()
                    outcome.last_result = result
                    results.write(json.dumps(json_safe(result)) + "\n")
                    results.flush()
                    if on_result is not None:
                        on_result(result)
                    outcome.stop_reason = stop.check(result)
                    if checkpoint_freq and trainer.iteration % checkpoint_freq == 0:
                        save()
                if checkpoint_at_end:
                    save()
            except KeyboardInterrupt:
                outcome.interrupted = True
                save()
    finally:
        trainer.stop()
    return outcome
