"""The study loop tells its observers what happens: the seam of the display and of MLflow tracking."""

from __future__ import annotations

import inspect

import pytest

from rltune._contracts import methods_of
from rltune.orchestrator._decision import Outcome
from rltune.orchestrator._events import Observer, Observers
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
        ("result", 0, 2), ("answered", 0, Outcome.COMPLETE),  # score 4 meets stop: checkpoint_at_end is off
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

    class Told(Observer):
        def tracking_status(self, status):
            events.append(status)

    tracker, events = Tracker(), []
    observer = TrackingObserver(tracker, None)
    for active, behind in (([], 0.0), (["a trial"], 1.0), (["a trial"], 12.0), ([], 0.0)):
        tracker.behind = behind
        observer.refresh(SimpleNamespace(active=active, observers=Observers([Told()])))
    assert tracker.calls == [False, True, True, False]
    assert events == [TrackingStatus(12.0, 7, True), TrackingStatus(0.0, 0, False)]
    assert "12 s behind" in events[0].text() and "7 call(s) queued" in events[0].text()

def test_an_observer_lacking_an_event_is_refused_when_registered_naming_the_event():
    """Events are method calls: an observer that cannot take one fails at registration, not mid-study."""
    class NoTrackingStatus:  # every event but tracking_status (told only when MLflow falls behind)
        def __getattr__(self, name):
            if name == "tracking_status":
                raise AttributeError(name)
            return lambda *args: None

    runner = StudyRunner(make_plan({"run": counter, "config": {"x": 1.0}, "metric": "score", "n_trials": 1,
                                    "tracking": False}))
    with pytest.raises(TypeError, match=r"NoTrackingStatus cannot be a study observer: it lacks tracking_status"):
        runner.observers.append(NoTrackingStatus())
    with pytest.raises(TypeError, match="it lacks message, trial_opened, trial_started"):
        runner.display = object()
    assert list(runner.observers) == []


def test_the_observers_tell_every_event_by_name_to_each_observer_in_order():
    """Observers implements each event of Observer itself (a new event cannot be a silent no-op there)."""
    events = methods_of(Observer)
    assert "trial_started" in events and "tracking_status" in events
    assert all(name in vars(Observers) for name in events)
    calls: list[tuple] = []

    class Each(Observer):
        def __init__(self, tag):
            self.tag = tag

    for name in events:
        setattr(Each, name, lambda self, *args, _name=name: calls.append((self.tag, _name, args)))
    args = {name: tuple(f"{name}:{p}" for p in list(inspect.signature(getattr(Observer, name)).parameters)[1:])
            for name in events}
    observers = Observers([Each("first"), Each("second")])
    for name in events:
        getattr(observers, name)(*args[name])
    assert calls == [(tag, name, args[name]) for name in events for tag in ("first", "second")]


def test_the_runner_calls_each_event_itself():
    """No event travels as a string: a misspelt event is an AttributeError where it is written."""
    assert not hasattr(StudyRunner, "_emit")
    with pytest.raises(AttributeError):
        Observers().trial_startd(None)  # type: ignore[attr-defined]
