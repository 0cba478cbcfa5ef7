"""How a trial's end is recorded: told to Optuna, or left RUNNING to resume; the runner's active list.

:class:`TrialEnding` is a part of :class:`rltune.orchestrator._runner.StudyRunner`
(its state lives there): the trainable returned or was stopped
(:meth:`~TrialEnding._done`, after :func:`._decision.final_state`), failed for
good (``_tell_fail``), or was interrupted (``_finish_interrupted``: it stays
RUNNING, resumable from its latest checkpoint). Each end drops the trial from
the active list (``_retire``) and tells the observers ``trial_ended``.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from rltune._disk import NO_SPACE, disk_error
from rltune.errors import DiskError
from rltune.orchestrator import _trial_host as host
from rltune.orchestrator._decision import Outcome, final_state
from rltune.orchestrator._events import ERROR_FILE
from rltune.orchestrator._reporter import json_safe
from rltune.orchestrator._retry import FAILURE_KIND
from rltune.orchestrator._trial_host import ActiveTrial, TrialEnd

logger = logging.getLogger(__name__)


class TrialEnding:
    """Ending trials for :class:`~rltune.orchestrator._runner.StudyRunner` (a part of it: its attributes are the runner's)."""

    def _done(self, a: ActiveTrial) -> None:
        """The trainable returned (or stopped when told to): record the trial's end."""
        host.reap(a)
        if a.outcome is Outcome.INTERRUPTED:
            self._finish_interrupted(a)
            return
        end = final_state(a.outcome, a.reason, a.last_result, self.spec.metric)
        if a.outcome is not Outcome.ERROR:
            self._record_progress(a)
        if end.state == "FAIL":
            self._tell_fail(a, end.error)
            return
        if end.state == "COMPLETE":
            a.reason = a.reason or "returned"
        self._tell(a, end.state, end.value)

    def _end_as_decided(self, a: ActiveTrial) -> bool:
        """End a trial whose process died after its end was decided (pruned, or its stop met); True if ended.

        A trial pruned is PRUNED. One that met its stop is COMPLETE with the
        result that met it (with ``checkpoint_at_end``, only once that
        iteration's checkpoint is saved: else it is restarted from its latest
        checkpoint and meets its stop again), never trained past it.
        """
        if a.outcome is Outcome.PRUNED:
            self._record_progress(a)
            self._tell(a, "PRUNED", None)
            return True
        return self._complete_if_stopped(a, when="before its process died")

    def _record_progress(self, a: ActiveTrial) -> None:
        if a.last_result is not None:
            a.trial.set_user_attr("last_result", _storable(a.last_result))
        if a.checkpoint:
            a.trial.set_user_attr("checkpoint", a.checkpoint)

    def _tell(self, a: ActiveTrial, state: str, value: float | None) -> None:
        from optuna.trial import TrialState

        import optuna

        self._retire(a)
        try:
            if state == "COMPLETE":
                frozen = self.study.tell(a.trial, value)
            else:
                frozen = self.study.tell(a.trial, state=getattr(TrialState, state))
            if frozen.datetime_complete is not None:  # the MLflow run's end_time too
                a.ended_ms = int(frozen.datetime_complete.timestamp() * 1000)
        except optuna.exceptions.UpdateFinishedTrialError:
            self._taken_over(a)  # shared storage: failed as stale by another worker, retried there
            return
        self.ended.append(TrialEnd(a.number, state, value, a.reason))
        self.observers.trial_ended(a, state, value)

    def _tell_fail(self, a: ActiveTrial, error: str) -> None:
        self._record_progress(a)
        a.trial.set_user_attr("error", error[-8000:])
        a.reason = error.strip().splitlines()[-1] if error.strip() else "failed"
        self._tell(a, "FAIL", None)

    def _append_error(self, a: ActiveTrial, error: str) -> None:
        """Append a failed attempt's traceback to the trial's error.txt (a full disk: it is in storage only)."""
        try:
            with open(a.trial_dir / ERROR_FILE, "a") as f:
                f.write(f"--- trial {a.number}, attempt {a.failures}, {time.strftime('%Y-%m-%d %H:%M:%S')} ---\n"
                        f"{error.rstrip()}\n")
        except OSError as exc:
            logger.warning("trial %d: %s (its error is recorded in the study's storage)", a.number,
                           disk_error(exc, a.trial_dir / ERROR_FILE, "the error file"))

    def _setup_failed(self, a: ActiveTrial, error: DiskError) -> None:
        """The trial's directory or files cannot be written: it FAILs before it starts."""
        a.trial.set_user_attr(FAILURE_KIND, error.kind or "error")
        if error.kind == NO_SPACE:
            self._out_of_space(a.number, str(error))
        self._tell_fail(a, str(error))

    def _out_of_space(self, number: int, error: str) -> None:
        """Trial ``number`` found the disk full: start no new trial; the study says how to go on."""
        if self.no_space is not None:
            return
        last = error.strip().splitlines()[-1] if error.strip() else "no space left on device"
        self.no_space = f"trial {number}: {last}"
        self.observers.message(f"no space left on device ({self.no_space}): no new trial starts; free space, then "
                               "continue the study with --resume (tune.run(..., resume=True)): it retries the trials "
                               "that failed for lack of space from their last checkpoints")

    def _finish_interrupted(self, a: ActiveTrial) -> None:
        """Leave the trial RUNNING in storage, resumable from its latest checkpoint."""
        host.reap(a)
        self._record_progress(a)
        a.trial.set_user_attr("interrupted", True)
        a.ended_ms = int(time.time() * 1000)
        self._retire(a)
        self.ended.append(TrialEnd(a.number, "INTERRUPTED", None, a.reason))
        self.observers.trial_ended(a, "INTERRUPTED", None)

    def _release(self, a: ActiveTrial) -> None:
        """A trial asked but never started stays RUNNING; mark it so that resume takes it."""
        try:
            a.trial.set_user_attr("interrupted", True)
            a.trial.set_user_attr("owner", None)
        except Exception:  # storage errors at shutdown must not hide the original one
            logger.debug("could not release trial %d", a.number, exc_info=True)

    def _retire(self, a: ActiveTrial) -> None:
        a.finished = True
        if a in self.active:
            self.active.remove(a)
        host.close_conn(a)


def _storable(result: dict[str, Any]) -> dict[str, Any]:
    """A result as a trial user attr: JSON-safe, without the per-episode lists (hist_stats)."""
    slim = {k: v for k, v in result.items() if k != "hist_stats"}
    return _nan_to_none(json_safe(slim))


def _nan_to_none(value: Any) -> Any:
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, dict):
        return {k: _nan_to_none(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_nan_to_none(v) for v in value]
    return value
