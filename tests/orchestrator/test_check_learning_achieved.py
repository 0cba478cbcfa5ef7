"""RLlib's test helper check_learning_achieved (rltune.utils.test_utils), over tune.run's analysis or result dicts."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from rltune.errors import StudyFailedError
from rltune.utils.test_utils import check_learning_achieved


def _analysis(*results):
    return SimpleNamespace(trials=[SimpleNamespace(last_result=r) for r in results])


def test_passes_when_some_trials_last_metric_reached_the_value():
    check_learning_achieved(_analysis({"episode_reward_mean": 10.0}, {"episode_reward_mean": 150.0}), 150.0)
    check_learning_achieved([{"evaluation": {"episode_reward_mean": 20}}], 15, evaluation=True)
    check_learning_achieved([{"env_runners": {"episode_return_mean": 3}}], 2, metric="env_runners/episode_return_mean")
    check_learning_achieved([SimpleNamespace(metrics={"score": 1.0})], 1.0, metric="score")  # a Tuner's results


def test_raises_naming_the_metric_and_the_best_value_otherwise():
    analysis = _analysis({"episode_reward_mean": 10.0}, {}, None)
    with pytest.raises(StudyFailedError, match=r"`episode_reward_mean` of 150.0 not reached \(best: 10.0, over 3"):
        check_learning_achieved(analysis, 150.0)
    with pytest.raises(StudyFailedError, match="best: None"):
        check_learning_achieved([{"episode_reward_mean": 500}], 1, evaluation=True)
