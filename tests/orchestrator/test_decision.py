"""The orchestrator's decision on a trial's result, and the end state of a trial: pure, no process, no storage."""

import math

import pytest

from rltune._ipc import Continue, Stop
from rltune.errors import ConfigError
from rltune.orchestrator._decision import Final, Outcome, Proceed, decide, final_state, read_result
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
    assert decision == Proceed() and decision.message() == Continue()


@pytest.mark.parametrize("checkpoint_at_end", [True, False])
def test_a_result_that_meets_stop_completes_the_trial(checkpoint_at_end):
    _, decision = _decide({METRIC: 120.0}, {METRIC: 100}, checkpoint_at_end=checkpoint_at_end, should_prune=_never)
    assert decision.outcome is Outcome.COMPLETE and decision.note == f"{METRIC} = 120 >= 100"
    assert decision.message() == Stop(f"{METRIC} = 120 >= 100", checkpoint_at_end)


def test_the_pruner_prunes_with_a_checkpoint():
    _, decision = _decide({METRIC: 1.0}, should_prune=lambda: True, iteration=7)
    assert decision.message() == Stop("pruned", True)
    assert decision.outcome is Outcome.PRUNED and decision.note == "pruned at iteration 7"


def test_ctrl_c_checkpoints_and_stops_before_stop_criteria_and_pruner():
    _, decision = _decide({METRIC: 120.0}, {METRIC: 100}, stopping=True, should_prune=_never)
    assert decision.message() == Stop("interrupted", True) and decision.outcome is Outcome.INTERRUPTED


@pytest.mark.parametrize("value", [math.nan, math.inf, None, "text"])
def test_a_metric_that_is_not_a_finite_number_is_not_reported_nor_pruned(value):
    reading, decision = _decide({METRIC: value}, should_prune=_never)
    assert reading.value is None and reading.error is None
    assert decision.message() == Continue()


def test_a_missing_metric_stops_the_study_without_checkpoint_and_names_the_closest_key():
    reading, decision = _decide({"episode_reward_max": 3.0}, should_prune=_never)
    assert isinstance(reading.error, ConfigError) and "did you mean 'episode_reward_max'" in str(reading.error)
    assert decision.message() == Stop("invalid study", False) and decision.outcome is Outcome.ERROR


def test_a_stop_key_the_results_lack_is_a_study_error():
    reading, decision = _decide({METRIC: 1.0}, {"timesteps_totl": 10})
    assert isinstance(reading.error, ConfigError) and decision.outcome is Outcome.ERROR


def test_no_pruner_means_no_pruning():
    _, decision = _decide({METRIC: 1.0}, should_prune=None)
    assert decision.message() == Continue()


def test_final_state_of_a_finished_trial():
    assert final_state(None, None, {METRIC: 2.5}, METRIC) == final_state(Outcome.COMPLETE, "x", {METRIC: 2.5}, METRIC)
    assert final_state(None, None, {METRIC: 2.5}, METRIC).state == "COMPLETE"
    assert final_state(None, None, {METRIC: 2.5}, METRIC).value == 2.5
    assert final_state(Outcome.PRUNED, "pruned at iteration 2", {METRIC: 1.0}, METRIC).state == "PRUNED"
    assert final_state(Outcome.ERROR, "metric: bad", {METRIC: 1.0}, METRIC).error == "metric: bad"
    no_result = final_state(None, None, None, METRIC)
    assert no_result.state == "FAIL" and "without reporting a result" in no_result.error
    nan = final_state(None, None, {METRIC: math.nan}, METRIC)
    assert nan.state == "FAIL" and "not a finite number" in nan.error


# -- per-policy metrics (multi-agent): a policy has no reward until one of its episodes ends ------------
PER_POLICY = "policy_reward_mean/main"


def test_a_per_policy_metric_without_a_finished_episode_is_not_yet_reported():
    stop = StopCriteria({"policy_reward_mean/main": 1.0}, where="stop")
    reading = read_result({"policy_reward_mean": {"opponent": 1.0}, "training_iteration": 1}, PER_POLICY, stop)
    assert reading.value is None and reading.error is None and reading.stop_reason is None
    decision = decide(reading, iteration=1, stopping=False, checkpoint_at_end=True, should_prune=_never)
    assert decision.message() == Continue()
    reading = read_result({"policy_reward_mean": {"main": 2.0}}, PER_POLICY, stop)
    assert reading.value == 2.0 and str(reading.stop_reason) == "policy_reward_mean/main = 2 >= 1"


@pytest.mark.parametrize("metric", ["policy_reward_max.main", "evaluation/policy_reward_mean/main"])
def test_per_policy_metrics_under_evaluation_or_with_dots_are_read_too(metric):
    result = {"policy_reward_max": {"main": 3.0}, "evaluation": {"policy_reward_mean": {"main": 3.0}}}
    assert read_result(result, metric, StopCriteria({})).value == 3.0
    empty = {"policy_reward_max": {}, "evaluation": {"policy_reward_mean": {}}}
    assert read_result(empty, metric, StopCriteria({})).error is None


def test_a_per_policy_metric_of_a_result_without_per_policy_rewards_is_a_study_error():
    # A function trainable that never reports policy_reward_mean: not "no value yet", a wrong key.
    reading = read_result({"score": 1.0}, PER_POLICY, StopCriteria({}))
    assert isinstance(reading.error, ConfigError) and f"{PER_POLICY!r} is not a key of the trial's results" in str(reading.error)


def test_a_trial_whose_last_result_lacks_its_policy_fails_saying_why():
    end = final_state(Outcome.COMPLETE, "training_iteration = 2 >= 2", {"policy_reward_mean": {}}, PER_POLICY)
    assert end.state == "FAIL" and end.error == (
        "metric 'policy_reward_mean/main' has no value in the last result: policy_reward_mean has no entry for "
        "policy 'main' (no episode in which it acted ended in the results' window)")
    assert final_state(Outcome.COMPLETE, None, {"policy_reward_mean": {"main": -1.5}}, PER_POLICY) == Final("COMPLETE", -1.5)


def test_every_decided_outcome_is_a_member_of_outcome_and_no_string():
    """Outcomes are compared by member: a string (a typo or the old values) is never taken for one."""
    decisions = [_decide({"x": 1.0}, should_prune=_never)[1], _decide({METRIC: 1.0}, stopping=True)[1],
                 _decide({METRIC: 120.0}, {METRIC: 100})[1], _decide({METRIC: 1.0}, should_prune=lambda: True)[1]]
    assert [d.outcome for d in decisions] == [Outcome.ERROR, Outcome.INTERRUPTED, Outcome.COMPLETE, Outcome.PRUNED]
    assert all(not isinstance(member, str) and member != member.value for member in Outcome)
    assert final_state("pruned", None, {METRIC: 1.0}, METRIC) == Final("COMPLETE", 1.0)  # not PRUNED
    assert final_state(Outcome.PRUNED, None, {METRIC: 1.0}, METRIC) == Final("PRUNED")
