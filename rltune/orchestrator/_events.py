"""What a study's loop tells its observers (the live display, MLflow tracking), and the tracking observer.

The runner tells each event to every observer in order, by calling the
event's method on :class:`Observers` (a typo is an AttributeError where it is
written, never a silent no-op); an observer implements the events it cares
about (the others are no-ops in :class:`Observer`). An observer that does not
subclass :class:`Observer` must have every event's method: it is checked when
it is registered.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Iterable, Iterator

from rltune._contracts import require_methods
from rltune.orchestrator._front import best_trial_or_none
from rltune.orchestrator._objectives import as_list
from rltune.orchestrator._trial import PARAMS_FILE, RESULT_FILE

ERROR_FILE = "error.txt"
BEHIND_S = 5.0  # the tracking is "behind" (and the display says so) when its oldest unrecorded call is older
STATUS_EVERY_S = 2.0  # while it is behind, its lag is told this often


@dataclass(frozen=True)
class TrackingStatus:
    """How far MLflow tracking is behind the study: the oldest unrecorded call's age and the calls queued.

    ``behind``: over ``BEHIND_S`` (told when it starts, every
    ``STATUS_EVERY_S`` while it lasts, and once when it caught up).
    """

    lag_s: float
    queued: int
    behind: bool

    def text(self) -> str:
        """One line for the user."""
        if not self.behind:
            return "MLflow tracking caught up with the study"
        return (f"MLflow tracking is {self.lag_s:.0f} s behind the study ({self.queued} call(s) queued); "
                "the study goes on, and MLflow shows its results as it catches up")


class Observer:
    """The events of a study's loop; each is a no-op unless overridden."""

    def message(self, text: str) -> None:
        """A line for the user."""

    def trial_opened(self, a: Any) -> None:
        """An ActiveTrial was set up (new, resumed or a retry), before its process starts."""

    def trial_started(self, a: Any) -> None:
        """Its process was started (or restarted after a failure)."""

    def result_received(self, a: Any, result: dict[str, Any]) -> None:
        """A result arrived, before it is judged."""

    def trial_result(self, a: Any) -> None:
        """A result was answered ("continue" or "stop"); not for a result that showed the study invalid."""

    def checkpoint_saved(self, a: Any) -> None:
        """The trial saved ``a.checkpoint``."""

    def trial_ended(self, a: Any, state: str, value: float | None) -> None:
        """The trial is COMPLETE, PRUNED, FAIL or INTERRUPTED (left RUNNING to resume)."""

    def trial_lost(self, a: Any) -> None:
        """Another worker failed the trial as stale (this worker's heartbeat lapsed) and retries it."""

    def refresh(self, runner: Any) -> None:
        """Once per turn of the loop."""

    def tracking_status(self, status: TrackingStatus) -> None:
        """MLflow tracking fell behind the study by over ``BEHIND_S`` (or caught up again)."""


class Observers(Observer):
    """The study's observers (tracking first, the display last): each event is told to every one, in order."""

    def __init__(self, observers: Iterable[Observer] = ()) -> None:
        self._observers: list[Observer] = []
        for observer in observers:
            self.append(observer)

    def append(self, observer: Observer) -> None:
        """Register ``observer`` last; a TypeError if it lacks an event's method."""
        self._observers.append(require_methods(observer, Observer, "a study observer"))

    def insert(self, index: int, observer: Observer) -> None:
        """Register ``observer`` at ``index``; a TypeError if it lacks an event's method."""
        self._observers.insert(index, require_methods(observer, Observer, "a study observer"))

    def remove(self, observer: Observer) -> None:
        """Stop telling ``observer`` the events."""
        self._observers.remove(observer)

    def __iter__(self) -> Iterator[Observer]:
        return iter(self._observers)

    def __len__(self) -> int:
        return len(self._observers)

    def message(self, text: str) -> None:
        for observer in self._observers:
            observer.message(text)

    def trial_opened(self, a: Any) -> None:
        for observer in self._observers:
            observer.trial_opened(a)

    def trial_started(self, a: Any) -> None:
        for observer in self._observers:
            observer.trial_started(a)

    def result_received(self, a: Any, result: dict[str, Any]) -> None:
        for observer in self._observers:
            observer.result_received(a, result)

    def trial_result(self, a: Any) -> None:
        for observer in self._observers:
            observer.trial_result(a)

    def checkpoint_saved(self, a: Any) -> None:
        for observer in self._observers:
            observer.checkpoint_saved(a)

    def trial_ended(self, a: Any, state: str, value: float | None) -> None:
        for observer in self._observers:
            observer.trial_ended(a, state, value)

    def trial_lost(self, a: Any) -> None:
        for observer in self._observers:
            observer.trial_lost(a)

    def refresh(self, runner: Any) -> None:
        for observer in self._observers:
            observer.refresh(runner)

    def tracking_status(self, status: TrackingStatus) -> None:
        for observer in self._observers:
            observer.tracking_status(status)


def _ms(when: Any) -> int | None:
    """An Optuna trial's ``datetime`` in ms since the epoch (MLflow's unit); None stays None."""
    return None if when is None else int(when.timestamp() * 1000)


class TrackingObserver(Observer):
    """Records the study's trials in MLflow through its tracking process (``tracker``)."""

    def __init__(self, tracker: Any, runner: Any) -> None:
        self.tracker = tracker
        self.runner = runner
        self._behind = False
        self._told = 0.0

    def trial_opened(self, a: Any) -> None:
        spec = self.runner.spec
        a.tracking = self.tracker.open_trial(
            a.number, {**a.config, "seed": a.seed}, a.values, start_time_ms=_ms(a.trial.datetime_start),
            keep_checkpoints_num=spec.keep_checkpoints_num, metric=as_list(spec.metric)[0],
            mode=as_list(spec.mode)[0],
            **({"retry_of": a.retry_of} if a.retry_of is not None else {}),
        )

    def result_received(self, a: Any, result: dict[str, Any]) -> None:
        a.tracking.log_result(result, replace=True)  # what the trial ran last is its history (a re-run replaces)

    def checkpoint_saved(self, a: Any) -> None:
        a.tracking.log_checkpoint(a.checkpoint)

    def trial_ended(self, a: Any, state: str, value: float | None) -> None:
        """Files, learning curve, policy model (trainers) and the run's end state, in the trial's MLflow run."""
        if state == "INTERRUPTED":
            self.tracker.end_trial(a.tracking, "INTERRUPTED", reason=a.reason, end_time_ms=a.ended_ms)
            return
        a.tracking.log_files(a.trial_dir / PARAMS_FILE, a.trial_dir / RESULT_FILE, a.trial_dir / ERROR_FILE)
        a.tracking.log_learning_curve()
        if state != "FAIL" and a.checkpoint and self.runner.plan.trainable.kind == "trainer":
            a.tracking.log_policy_model(a.checkpoint)
        error = a.trial.user_attrs.get("error") if state == "FAIL" else None
        self.tracker.end_trial(a.tracking, state, reason=a.reason, error=error, end_time_ms=a.ended_ms)
        study = self.runner.study
        if state == "COMPLETE" and len(study.directions) == 1:  # a multi-objective study's best is its front (plots)
            best = best_trial_or_none(study)  # none feasible yet: no best
            if best is not None:
                self.tracker.update_best(best.number, best.value, best.params)
        self.tracker.refresh_study_plots(study, final=False)

    def trial_lost(self, a: Any) -> None:
        self.tracker.end_trial(a.tracking, "FAIL", reason="stale: its worker's heartbeat lapsed; retried by another "
                                                          "worker")

    def refresh(self, runner: Any) -> None:
        """Read the tracking's replies, set its priority, and tell the observers when it falls behind."""
        self.tracker.poll()
        self.tracker.yield_to_trials(bool(runner.active))
        lag = self.tracker.lag()
        behind, now = lag.seconds > BEHIND_S, time.monotonic()
        if behind != self._behind or (behind and now - self._told >= STATUS_EVERY_S):
            self._behind, self._told = behind, now
            runner.observers.tracking_status(TrackingStatus(lag.seconds, lag.queued, behind))
