"""The orchestrator's decision on a trial's result, and the end state of a trial: pure, no process, no storage."""

import math

import pytest

from rltune._ipc import Continue, Stop
from rltune.errors import ConfigError
from rltune.orchestrator._decision import Decision, decide, final_state, read_result
from rltune.orchestrator._stop import StopCriteria

METRIC = "episode_reward_mean"


def _never() -> bool:
    raise AssertionError("the pruner must not be asked")


def _decide(result, stop=None, *, stopping=False, checkpoint_at_end=False, should_prune=None, iteration=3):
    reading = read_result(result, METRIC, StopCriteria(stop or {}, where="stop"))
    return reading, decide(reading, iteration=iteration, stopping=stopping, checkpoint_at_end=checkpoint_at_end,
                           should_prune=should_prune)


def test_a_plain_result_continues_and_reports_its_metric():
    reading, decision = _decide({METRIC: 10.0}, {METRIC: 100}, should_prune=lambda: False)
    assert reading.value == 10.0 and reading.error is None
    assert decision == Decision() and decision.message() == Continue()


@pytest.mark.parametrize("checkpoint_at_end", [True, False])
def test_a_result_that_meets_stop_completes_the_trial(checkpoint_at_end):
    _, decision = _decide({METRIC: 120.0}, {METRIC: 100}, checkpoint_at_end=checkpoint_at_end, should_prune=_never)
    assert decision.outcome == "complete" and decision.note == f"{METRIC} = 120 >= 100"
    assert decision.message() == Stop(f"{METRIC} = 120 >= 100", checkpoint_at_end)


def test_the_pruner_prunes_with_a_checkpoint():
    _, decision = _decide({METRIC: 1.0}, should_prune=lambda: True, iteration=7)
    assert decision.message() == Stop("pruned", True)
    assert decision.outcome == "pruned" and decision.note == "pruned at iteration 7"


def test_ctrl_c_checkpoints_and_stops_before_stop_criteria_and_pruner():
    _, decision = _decide({METRIC: 120.0}, {METRIC: 100}, stopping=True, should_prune=_never)
    assert decision.message() == Stop("interrupted", True) and decision.outcome == "interrupted"


@pytest.mark.parametrize("value", [math.nan, math.inf, None, "text"])
def test_a_metric_that_is_not_a_finite_number_is_not_reported_nor_pruned(value):
    reading, decision = _decide({METRIC: value}, should_prune=_never)
    assert reading.value is None and reading.error is None
    assert decision.message() == Continue()


def test_a_missing_metric_stops_the_study_without_checkpoint_and_names_the_closest_key():
    reading, decision = _decide({"episode_reward_max": 3.0}, should_prune=_never)
    assert isinstance(reading.error, ConfigError) and "did you mean 'episode_reward_max'" in str(reading.error)
    assert decision.message() == Stop("invalid study", False) and decision.outcome == "error"


def test_a_stop_key_the_results_lack_is_a_study_error():
    reading, decision = _decide({METRIC: 1.0}, {"timesteps_totl": 10})
    assert isinstance(reading.error, ConfigError) and decision.outcome == "error"


def test_no_pruner_means_no_pruning():
    _, decision = _decide({METRIC: 1.0}, should_prune=None)
    assert decision.message() == Continue()


def test_final_state_of_a_finished_trial():
    assert final_state(None, None, {METRIC: 2.5}, METRIC) == final_state("complete", "x", {METRIC: 2.5}, METRIC)
    assert final_state(None, None, {METRIC: 2.5}, METRIC).state == "COMPLETE"
    assert final_state(None, None, {METRIC: 2.5}, METRIC).value == 2.5
    assert final_state("pruned", "pruned at iteration 2", {METRIC: 1.0}, METRIC).state == "PRUNED"
    assert final_state("error", "metric: bad", {METRIC: 1.0}, METRIC).error == "metric: bad"
    no_result = final_state(None, None, None, METRIC)
    assert no_result.state == "FAIL" and "without reporting a result" in no_result.error
    nan = final_state(None, None, {METRIC: math.nan}, METRIC)
    assert nan.state == "FAIL" and "not a finite number" in nan.error
