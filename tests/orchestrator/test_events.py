"""The study loop tells its observers what happens: the seam of the display and of MLflow tracking."""

from __future__ import annotations

from rltune.orchestrator._events import Observer
from rltune.orchestrator._runner import StudyRunner
from rltune.orchestrator._spec import make_plan

from .trainables import counter


class Recorder(Observer):
    def __init__(self) -> None:
        self.events: list[tuple] = []

    def trial_started(self, a):
        self.events.append(("started", a.number))

    def result_received(self, a, result):
        self.events.append(("result", a.number, result["training_iteration"]))

    def trial_result(self, a):
        self.events.append(("answered", a.number, a.outcome))

    def checkpoint_saved(self, a):
        self.events.append(("checkpoint", a.number, a.checkpoint_iteration))

    def trial_ended(self, a, state, value):
        self.events.append(("ended", a.number, state, value, a.reason))


def test_observers_see_a_trial_from_start_to_end(tmp_path):
    plan = make_plan({"run": counter, "config": {"x": 2.0, "steps": 3}, "metric": "score", "n_trials": 1,
                      "checkpoint_freq": 2, "stop": {"score": 4}, "results_dir": str(tmp_path), "name": "seen",
                      "tracking": False})
    recorder = Recorder()
    runner = StudyRunner(plan)
    runner.observers.append(recorder)
    runner.open_study()
    try:
        runner.run()
    finally:
        runner.close()
    assert recorder.events == [
        ("started", 0),
        ("result", 0, 1), ("answered", 0, None),
        ("result", 0, 2), ("answered", 0, "complete"),  # score 4 meets stop: checkpoint_at_end is off
        ("checkpoint", 0, 2),  # checkpoint_freq 2
        ("ended", 0, "COMPLETE", 4.0, "score = 4 >= 4"),
    ]


def test_the_tracking_yields_to_the_trials_while_any_runs_and_its_lag_is_told():
    from types import SimpleNamespace

    from rltune.orchestrator._events import TrackingObserver, TrackingStatus
    from rltune.tracking._process import Lag

    class Tracker:
        def __init__(self):
            self.calls = []
            self.behind = 0.0

        def poll(self):
            pass

        def yield_to_trials(self, trials_running):
            self.calls.append(trials_running)

        def lag(self):
            return Lag(self.behind, 7 if self.behind else 0, {"result": 7} if self.behind else {})

    tracker, events = Tracker(), []
    observer = TrackingObserver(tracker, None)
    for active, behind in (([], 0.0), (["a trial"], 1.0), (["a trial"], 12.0), ([], 0.0)):
        tracker.behind = behind
        observer.refresh(SimpleNamespace(active=active, _emit=lambda *event: events.append(event)))
    assert tracker.calls == [False, True, True, False]
    assert events == [("tracking_status", TrackingStatus(12.0, 7, True)), ("tracking_status", TrackingStatus(0.0, 0, False))]
    assert "12 s behind" in events[0][1].text() and "7 call(s) queued" in events[0][1].text()