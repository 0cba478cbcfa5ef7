"""The study runner's parts on their own: each works on a StudyState, none needs a StudyRunner.

StudyRunner was a class with three mixins (study setup, trial setup, trial
ending) sharing its ~40 attributes; now each part is a collaborator with an
explicit interface, driven here with an in-memory Optuna study and no trial
process.
"""

from __future__ import annotations

import json
import time

import optuna
import pytest

from rltune.errors import StudyLockedError
from rltune.orchestrator._decision import Outcome
from rltune.orchestrator._events import Observer, Observers
from rltune.orchestrator._intermediate import backfill, report
from rltune.orchestrator._runner import StudyRunner
from rltune.orchestrator._spec import make_plan
from rltune.orchestrator._study_setup import StudyOpener, study_dir_of
from rltune.orchestrator._study_state import StudyState
from rltune.orchestrator._trial_end import TrialEnding
from rltune.orchestrator._trial_setup import TrialSetup

from .trainables import counter


class Told(Observer):
    def __init__(self) -> None:
        self.events: list[tuple] = []

    def message(self, text):
        self.events.append(("message", text))

    def trial_opened(self, a):
        self.events.append(("opened", a.number))

    def trial_ended(self, a, state, value):
        self.events.append(("ended", a.number, state, value))


def make_state(tmp_path, **fields) -> tuple[StudyState, Told]:
    plan = make_plan({"run": counter, "config": {"x": {"grid_search": [1.0, 2.0]}}, "metric": "score", "mode": "max",
                      "results_dir": str(tmp_path), "name": "parts", "tracking": False, **fields})
    told = Told()
    state = StudyState(plan, Observers([told]), "run-id", study_dir_of(str(tmp_path), plan.name))
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    state.study = optuna.create_study(direction="maximize")
    return state, told


def make_setup(state: StudyState, **kw) -> TrialSetup:
    options = {"resumable": [], "retries": [], "started_total": 0, "start_time": time.monotonic(), **kw}
    return TrialSetup(state, TrialEnding(state), **options)


def test_the_runner_has_no_mixins_only_collaborators():
    assert StudyRunner.__mro__ == (StudyRunner, object)
    for part in (StudyOpener, TrialSetup, TrialEnding):
        assert part.__mro__ == (part, object)


def test_trial_setup_draws_the_trials_of_the_budget_then_none(tmp_path):
    state, told = make_state(tmp_path, n_trials=2)
    setup = make_setup(state)
    first, second = setup.next_trial(), setup.next_trial()
    assert setup.next_trial() is None  # the budget (2 trials) is spent
    assert (first.number, second.number) == (0, 1)
    assert {first.config["x"], second.config["x"]} <= {1.0, 2.0}
    assert first.seed == 0 and second.seed == 1  # base seed 0 plus the trial's number
    assert json.loads((first.trial_dir / "params.json").read_text())["seed"] == 0
    assert state.configs[1] == second.config
    assert told.events == [("opened", 0), ("opened", 1)]


def test_trial_setup_starts_nothing_once_the_disk_is_full_or_the_timeout_passed(tmp_path):
    state, _ = make_state(tmp_path, n_trials=4, timeout_s=60)
    state.no_space = "trial 0: no space left on device"
    assert make_setup(state).next_trial() is None
    state.no_space = None
    assert make_setup(state, start_time=time.monotonic() - 120).next_trial() is None
    assert make_setup(state).next_trial() is not None


def test_trial_ending_tells_optuna_retires_the_trial_and_tells_the_observers(tmp_path):
    state, told = make_state(tmp_path, n_trials=2)
    setup = make_setup(state)
    a, b = setup.next_trial(), setup.next_trial()
    state.active.extend([a, b])
    ending = TrialEnding(state)
    a.outcome, a.reason, a.last_result = Outcome.COMPLETE, "score = 3 >= 3", {"score": 3.0, "training_iteration": 1}
    ending.done(a)
    ending.finish_interrupted(b)
    assert state.active == [] and a.finished and b.finished
    trials = {t.number: t for t in state.study.get_trials()}
    assert trials[0].state.name == "COMPLETE" and trials[0].value == 3.0
    assert trials[1].state.name == "RUNNING" and trials[1].user_attrs["interrupted"] is True
    assert [(e.number, e.state) for e in state.ended] == [(0, "COMPLETE"), (1, "INTERRUPTED")]
    assert told.events[-2:] == [("ended", 0, "COMPLETE", 3.0), ("ended", 1, "INTERRUPTED", None)]


def test_trial_ending_says_a_full_disk_once(tmp_path):
    state, told = make_state(tmp_path)
    ending = TrialEnding(state)
    ending.out_of_space(3, "Traceback...\nOSError: no space left on device")
    ending.out_of_space(4, "again")
    assert state.no_space == "trial 3: OSError: no space left on device"
    assert len([e for e in told.events if e[0] == "message"]) == 1


def test_intermediate_values_are_reported_once_and_replaced_by_a_rerun(tmp_path):
    state, _ = make_state(tmp_path)
    a = make_setup(state).next_trial()
    (a.trial_dir / "result.json").write_text("\n".join(json.dumps({"training_iteration": i, "score": float(i)})
                                                       for i in (1, 2, 3)) + "\n")
    a.checkpoint_iteration = 2
    backfill(a, "score")
    assert a.reported == {1: 1.0, 2: 2.0} and a.last_result["training_iteration"] == 2
    report(a, 2, 5.0)  # the step run again after a restore
    assert a.reported[2] == 5.0
    assert state.study.trials[0].intermediate_values == {1: 1.0, 2: 5.0}


def test_the_study_opener_fills_the_state_and_holds_the_study_directory(tmp_path):
    state, told = make_state(tmp_path)
    state.study = None
    opener = StudyOpener(state)
    try:
        study = opener.open_study()
        assert state.study is study and study.study_name == "parts"
        assert (state.study_dir / "study.json").is_file() and not state.shared
        assert opener.resumable == [] and opener.retries == [] and opener.started_total == 0
        with pytest.raises(StudyLockedError):  # one orchestrator per study directory
            StudyOpener(StudyState(state.plan, Observers(), "other", state.study_dir)).open_study()
    finally:
        opener.close()
    assert len(study.get_trials()) == 2  # the grid's points, enqueued once
