"""Which failed trials a resume retries, and how a retried configuration is counted once (in-memory studies)."""

from __future__ import annotations

import optuna
from optuna.distributions import FloatDistribution
from optuna.trial import TrialState, create_trial

from rltune.orchestrator._retry import live_trials, predecessor, retries_to_start, start_retry, superseded


def _study_with_failures() -> optuna.Study:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize")
    space = {"lr": FloatDistribution(0.0, 1.0)}
    for number, (kind, lr) in enumerate([("no_space", 0.1), ("error", 0.2), (None, 0.3)]):
        state = TrialState.COMPLETE if kind is None else TrialState.FAIL
        study.add_trial(create_trial(state=state, value=1.0 if kind is None else None, params={"lr": lr},
                                     distributions=space,
                                     user_attrs={"seed": number, **({"failure_kind": kind} if kind else {})}))
    return study


def test_resume_retries_the_trials_that_ran_out_of_space_and_retry_failed_every_failed_one():
    study = _study_with_failures()
    assert [t.number for t in retries_to_start(study.get_trials(), retry_failed=False)] == [0]
    assert [t.number for t in retries_to_start(study.get_trials(), retry_failed=True)] == [0, 1]


def test_a_retry_has_the_failed_trials_params_and_seed_and_takes_its_place():
    study = _study_with_failures()
    trial, frozen = start_retry(study, study.get_trials()[0])
    assert (trial.number, frozen.params, frozen.user_attrs) == (3, {"lr": 0.1}, {"seed": 0, "retry_of": 0})
    assert study.get_trials()[3].state == TrialState.RUNNING
    assert predecessor(study.get_trials()[3]) == 0 and superseded(study.get_trials()) == {0}
    assert [t.number for t in live_trials(study.get_trials())] == [1, 2, 3]
    assert retries_to_start(study.get_trials(), retry_failed=False) == []  # retried once
    study.tell(trial, 2.0)
    assert study.best_trial.number == 3


def test_a_retry_created_but_never_started_is_started_by_the_next_resume_not_created_again():
    study = _study_with_failures()
    failed = study.get_trials()[0]
    study.add_trial(create_trial(state=TrialState.WAITING, params=failed.params, distributions=failed.distributions,
                                 user_attrs={"retry_of": 0}))  # the orchestrator was killed right after this
    [waiting] = retries_to_start(study.get_trials(), retry_failed=False)
    assert (waiting.number, waiting.state) == (3, TrialState.WAITING)
    assert [t.number for t in live_trials(study.get_trials())] == [0, 1, 2, 3]  # the failed trial shows until it runs
    trial, _ = start_retry(study, waiting)
    assert trial.number == 3 and len(study.get_trials()) == 4
