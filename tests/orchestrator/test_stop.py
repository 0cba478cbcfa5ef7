"""Stop criteria: any key reaching its value stops; nested keys; NaN never stops; unknown keys named."""

from __future__ import annotations

import math

import pytest

from rltune.errors import ConfigError
from rltune.orchestrator._stop import StopCriteria, lookup


def result(**overrides):
    base = {
        "episode_reward_mean": 20.0,
        "timesteps_total": 1000,
        "training_iteration": 1,
        "info": {"learner": {"default_policy": {"kl": 0.02, "cur_lr": 1e-3}}},
        "custom_metrics": {"my.metric_mean": 3.0},
    }
    base.update(overrides)
    return base


def test_stops_when_any_key_reaches_its_value():
    stop = StopCriteria({"episode_reward_mean": 475, "timesteps_total": 200_000})
    assert stop.check(result()) is None
    reason = stop.check(result(timesteps_total=200_000))
    assert reason is not None and reason.key == "timesteps_total" and reason.value == 200_000
    reason = stop.check(result(episode_reward_mean=475.5))
    assert reason is not None and reason.key == "episode_reward_mean"
    assert str(reason) == "episode_reward_mean = 475.5 >= 475"


def test_value_equal_to_threshold_stops_and_below_does_not():
    stop = StopCriteria({"training_iteration": 3})
    assert stop.check(result(training_iteration=2)) is None
    assert stop.check(result(training_iteration=3)) is not None


@pytest.mark.parametrize("key", ["info/learner/default_policy/kl", "info.learner.default_policy.kl"])
def test_nested_keys_with_slash_or_dot(key):
    stop = StopCriteria({key: 0.05})
    assert stop.check(result()) is None
    assert stop.check(result(info={"learner": {"default_policy": {"kl": 0.06}}})) is not None


def test_nested_key_whose_name_contains_a_dot():
    assert lookup(result(), "custom_metrics/my.metric_mean") == 3.0
    assert lookup(result(), "custom_metrics.my.metric_mean") == 3.0
    assert StopCriteria({"custom_metrics/my.metric_mean": 3}).check(result()) is not None


@pytest.mark.parametrize("missing_value", [math.nan, None])
def test_nan_and_none_never_satisfy(missing_value):
    stop = StopCriteria({"episode_reward_mean": -1e300})
    assert stop.check(result(episode_reward_mean=missing_value)) is None
    assert stop.check(result(episode_reward_mean=-1e299)) is not None


def test_no_criteria_never_stops():
    stop = StopCriteria(None)
    assert not stop
    assert stop.check(result(timesteps_total=10**12)) is None


def test_unknown_key_names_it_and_the_closest_result_key():
    stop = StopCriteria({"episode_reward_meen": 475}, where="--stop")
    with pytest.raises(ConfigError) as info:
        stop.check(result())
    assert str(info.value) == (
        "invalid --stop: 'episode_reward_meen' is not a key of the training results; "
        "did you mean 'episode_reward_mean'?"
    )


@pytest.mark.parametrize(
    "key, suggestion",
    [
        ("info/learner/default_policy/kll", "info/learner/default_policy/kl"),
        ("info.learner.default_policy.kll", "info.learner.default_policy.kl"),
    ],
)
def test_unknown_nested_key_suggests_in_the_users_notation(key, suggestion):
    with pytest.raises(ConfigError, match=f"did you mean {suggestion!r}"):
        StopCriteria({key: 1}).check(result())


def test_keys_are_checked_on_the_first_result_only():
    stop = StopCriteria({"custom_metrics/my.metric_mean": 5})
    stop.check(result())
    assert stop.check(result(custom_metrics={})) is None  # went missing later: not satisfied, no error


def test_a_group_of_results_is_not_a_number():
    with pytest.raises(ConfigError, match="'info/learner' is a group of results, not a number; pick one of its keys: default_policy"):
        StopCriteria({"info/learner": 1}).check(result())


def test_values_must_be_numbers_but_numeric_strings_are_read():
    assert StopCriteria({"timesteps_total": "2e5"}).criteria == {"timesteps_total": 200000.0}
    with pytest.raises(ConfigError) as info:
        StopCriteria({"timesteps_total": "lots", "training_iteration": True}, where="--stop")
    message = str(info.value)
    assert "invalid --stop (2 problems)" in message
    assert "timesteps_total: the value must be a number, but got 'lots'" in message
    assert "training_iteration: the value must be a number, but got True" in message


def test_criteria_must_be_a_mapping():
    with pytest.raises(ConfigError, match=r"invalid --stop: must be a mapping of result keys to values"):
        StopCriteria([475], where="--stop")  # type: ignore[arg-type]


def test_a_per_policy_key_is_not_missing_before_its_policy_has_an_episode():
    stop = StopCriteria({"policy_reward_mean/main": 1.0, "timesteps_total": 10_000})
    assert stop.check(result(policy_reward_mean={})) is None  # the first result: no episode of main has ended
    reason = stop.check(result(policy_reward_mean={"main": 1.5}))
    assert reason is not None and reason.key == "policy_reward_mean/main" and reason.value == 1.5
    with pytest.raises(ConfigError, match="'policy_reward_mean/main' is not a key of the training results"):
        StopCriteria({"policy_reward_mean/main": 1.0}).check(result())  # no per-policy rewards at all


@pytest.mark.parametrize("key, value", [("time_total_s", -5), ("training_iteration", 0), ("timesteps_total", -1),
                                        ("episodes_total", "-3"), ("env_runners/num_env_steps_sampled_lifetime", 0)])
def test_a_counter_must_be_given_a_positive_value(key, value):
    with pytest.raises(ConfigError) as info:
        StopCriteria({key: value}, where="stop")
    assert str(info.value).startswith(f"invalid stop: {key}: must be > 0, but got {value!r} ({key} counts up from 0, "
                                      "so a trial would stop at its first result")


def test_other_keys_may_be_zero_or_negative():
    stop = StopCriteria({"episode_reward_mean": -150, "custom_metrics/time_total_s": -1, "training_iteration": 0.5})
    assert stop.criteria == {"episode_reward_mean": -150.0, "custom_metrics/time_total_s": -1.0, "training_iteration": 0.5}
