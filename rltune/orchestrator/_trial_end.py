"""How a trial's end is recorded: told to Optuna, or left RUNNING to resume; the runner's active list.

:class:`TrialEnding` is a collaborator of :class:`rltune.orchestrator._runner.StudyRunner`
working on the shared :class:`~rltune.orchestrator._study_state.StudyState`:
the trainable returned or was stopped (:meth:`~TrialEnding.done`, after
:func:`._decision.final_state`), met its stop before an interruption
(:meth:`~TrialEnding.complete_if_stopped`), failed for good (``tell_fail``),
was interrupted (``finish_interrupted``: it stays RUNNING, resumable from its
latest checkpoint), or was taken over by another worker (``taken_over``).
Each end drops the trial from the active list (``retire``) and tells the
observers ``trial_ended`` (``trial_lost``).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from rltune._disk import NO_SPACE, disk_error
from rltune._trial_files import last_result
from rltune.errors import ConfigError, DiskError
from rltune.orchestrator import _trial_host as host
from rltune.orchestrator._constraints import record_constraints, violations
from rltune.orchestrator._decision import Outcome, final_state
from rltune.orchestrator._events import ERROR_FILE
from rltune.orchestrator._intermediate import backfill
from rltune.orchestrator._objectives import objective_values
from rltune.orchestrator._reporter import json_safe, latest_checkpoint
from rltune.orchestrator._pbt import enqueue_replacement
from rltune.orchestrator._retry import FAILURE_KIND
from rltune.orchestrator._study_state import StudyState
from rltune.orchestrator._trial_host import ActiveTrial, TrialEnd

logger = logging.getLogger(__name__)


class TrialEnding:
    """Ends the trials of a :class:`~rltune.orchestrator._runner.StudyRunner`, in Optuna and on its ``state``."""

    def __init__(self, state: StudyState) -> None:
        self.state = state

    def done(self, a: ActiveTrial) -> None:
        """The trainable returned (or stopped when told to): record the trial's end."""
        host.reap(a)
        if a.outcome is Outcome.INTERRUPTED:
            self.finish_interrupted(a)
            return
        end = final_state(a.outcome, a.reason, a.last_result, self.state.spec.metric)
        if a.outcome is not Outcome.ERROR:
            self.record_progress(a)
        if end.state == "FAIL":
            self.tell_fail(a, end.error)
            return
        if end.state == "COMPLETE":
            a.reason = a.reason or "returned"
            if not self.record_constraints(a):
                return
        self.tell(a, end.state, end.value)

    def end_as_decided(self, a: ActiveTrial) -> bool:
        """End a trial whose process died after its end was decided (pruned, or its stop met); True if ended.

        A trial pruned is PRUNED. One that met its stop is COMPLETE with the
        result that met it (with ``checkpoint_at_end``, only once that
        iteration's checkpoint is saved: else it is restarted from its latest
        checkpoint and meets its stop again), never trained past it.
        """
        if a.outcome is Outcome.PRUNED:
            self.record_progress(a)
            self.tell(a, "PRUNED", None)
            return True
        return self.complete_if_stopped(a, when="before its process died")

    def complete_if_stopped(self, a: ActiveTrial, when: str = "before the study was interrupted") -> bool:
        """A resumed trial whose last recorded result met ``stop`` is COMPLETE with it, not trained once more.

        The orchestrator died after the trial reported that result (and saved
        its checkpoint) but before it told Optuna; or (``when``) the trial's
        process did. With ``checkpoint_at_end``
        the trial must have its checkpoint at that iteration; without it, it
        trains to it again. True if the trial was completed here.
        """
        last = last_result(a.trial_dir)
        if last is None or not a.stop:
            return False
        try:
            reason = a.stop.check(last)
        except ConfigError:  # a stop key the results lack: the trial's run reports it
            return False
        value = objective_values(last, self.state.spec.metric)
        step = last.get("training_iteration")
        if reason is None or value is None or not isinstance(step, int):
            return False
        found = latest_checkpoint(a.trial_dir)
        if self.state.spec.checkpoint_at_end and (found is None or found[0] != step):
            return False
        if found is not None:
            a.checkpoint_iteration, a.checkpoint = found
        backfill(a, self.state.spec.metric, upto=step)
        a.last_result, a.iteration = last, step
        self.state.results[a.number] = last
        a.reason = f"{reason}, met {when}"
        self.record_progress(a)
        if not self.record_constraints(a):
            return True
        self.tell(a, "COMPLETE", value)
        return True

    def record_constraints(self, a: ActiveTrial) -> bool:
        """Give Optuna the constraints' violations in the trial's last result; False (the trial FAILed) if one has none."""
        values, problem = violations(a.last_result, self.state.plan.constraints)
        if problem is not None:
            self.tell_fail(a, problem)
            return False
        record_constraints(a.trial, values)
        return True

    def record_progress(self, a: ActiveTrial) -> None:
        if a.last_result is not None:
            a.trial.set_user_attr("last_result", _storable(a.last_result))
        if a.checkpoint:
            a.trial.set_user_attr("checkpoint", a.checkpoint)

    def tell(self, a: ActiveTrial, state: str, value: float | list[float] | None) -> None:
        from optuna.trial import TrialState

        import optuna

        self.retire(a)
        try:
            if state == "COMPLETE":
                frozen = self.state.study.tell(a.trial, value)
            else:
                frozen = self.state.study.tell(a.trial, state=getattr(TrialState, state))
            if frozen.datetime_complete is not None:  # the MLflow run's end_time too
                a.ended_ms = int(frozen.datetime_complete.timestamp() * 1000)
        except optuna.exceptions.UpdateFinishedTrialError:
            self.taken_over(a)  # shared storage: failed as stale by another worker, retried there
            return
        self.state.ended.append(TrialEnd(a.number, state, value, a.reason))
        self.state.observers.trial_ended(a, state, value)
        if state == "FAIL" and self.state.shared:  # pbt: this worker alone recorded the failure, so it replaces it
            enqueue_replacement(self.state, a.number)

    def tell_fail(self, a: ActiveTrial, error: str) -> None:
        self.record_progress(a)
        a.trial.set_user_attr("error", error[-8000:])
        a.reason = error.strip().splitlines()[-1] if error.strip() else "failed"
        self.tell(a, "FAIL", None)

    def append_error(self, a: ActiveTrial, error: str) -> None:
        """Append a failed attempt's traceback to the trial's error.txt (a full disk: it is in storage only)."""
        try:
            with open(a.trial_dir / ERROR_FILE, "a") as f:
                f.write(f"--- trial {a.number}, attempt {a.failures}, {time.strftime('%Y-%m-%d %H:%M:%S')} ---\n"
                        f"{error.rstrip()}\n")
        except OSError as exc:
            logger.warning("trial %d: %s (its error is recorded in the study's storage)", a.number,
                           disk_error(exc, a.trial_dir / ERROR_FILE, "the error file"))

    def setup_failed(self, a: ActiveTrial, error: DiskError) -> None:
        """The trial's directory or files cannot be written: it FAILs before it starts."""
        a.trial.set_user_attr(FAILURE_KIND, error.kind or "error")
        if error.kind == NO_SPACE:
            self.out_of_space(a.number, str(error))
        self.tell_fail(a, str(error))

    def out_of_space(self, number: int, error: str) -> None:
        """Trial ``number`` found the disk full: start no new trial; the study says how to go on."""
        if self.state.no_space is not None:
            return
        last = error.strip().splitlines()[-1] if error.strip() else "no space left on device"
        self.state.no_space = f"trial {number}: {last}"
        self.state.observers.message(f"no space left on device ({self.state.no_space}): no new trial starts; free space, then "
                               "continue the study with --resume (tune.run(..., resume=True)): it retries the trials "
                               "that failed for lack of space from their last checkpoints")

    def finish_interrupted(self, a: ActiveTrial) -> None:
        """Leave the trial RUNNING in storage, resumable from its latest checkpoint."""
        host.reap(a)
        self.record_progress(a)
        a.trial.set_user_attr("interrupted", True)
        a.ended_ms = int(time.time() * 1000)
        self.retire(a)
        self.state.ended.append(TrialEnd(a.number, "INTERRUPTED", None, a.reason))
        self.state.observers.trial_ended(a, "INTERRUPTED", None)

    def release(self, a: ActiveTrial) -> None:
        """A trial asked but never started stays RUNNING; mark it so that resume takes it."""
        try:
            a.trial.set_user_attr("interrupted", True)
            a.trial.set_user_attr("owner", None)
        except Exception:  # storage errors at shutdown must not hide the original one
            logger.debug("could not release trial %d", a.number, exc_info=True)

    def retire(self, a: ActiveTrial) -> None:
        a.finished = True
        if a in self.state.active:
            self.state.active.remove(a)
        host.close_conn(a)


    def taken_over(self, a: ActiveTrial) -> None:
        """Another worker failed ``a`` as stale (this worker's heartbeat lapsed) and retries it: let it go here."""
        if a.proc is not None and a.proc.poll() is None:
            host.kill(a)
            host.reap(a)
        self.retire(a)
        message = (f"trial {a.number} was failed as stale by another worker (this worker's heartbeat lapsed) and "
                   "is retried there; what it did here after that is not recorded")
        logger.warning("%s", message)
        self.state.observers.message(message)
        self.state.ended.append(TrialEnd(a.number, "FAIL", None, "stale: retried by another worker"))
        self.state.observers.trial_lost(a)


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
