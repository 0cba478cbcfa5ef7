"""One number coercion for results: stop criteria, the study's objective and MLflow agree on what a number is."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from rltune._metrics import MISSING, as_number, finite, lookup
from rltune.orchestrator._stop import StopCriteria
from rltune.tracking import flatten_metrics


@pytest.mark.parametrize("value, number", [
    (3, 3.0), (2.5, 2.5), (np.float32(0.5), 0.5), (np.int64(7), 7.0), (np.array(1.5), 1.5),
    (torch.tensor(2.0), 2.0), (float("inf"), math.inf),
])
def test_numbers(value, number):
    assert as_number(value) == number


@pytest.mark.parametrize("value", [True, False, np.bool_(True), np.array(True), torch.tensor(True), "3", b"3", None,
                                   MISSING, [1.0], np.array([1.0]), {"a": 1}, object()])
def test_bools_text_and_containers_are_not_numbers(value):
    assert as_number(value) is None and finite(value) is None


def test_finite_refuses_nan_and_infinities():
    assert finite(float("nan")) is None and finite(-math.inf) is None and finite(np.float64("nan")) is None
    assert as_number(float("nan")) != as_number(float("nan"))  # kept as NaN: the stop criteria never meet it


@pytest.mark.parametrize("flag", [True, np.bool_(True)])
def test_a_bool_result_is_not_a_metric_for_mlflow_nor_the_stop_criteria_nor_the_objective(flag):
    result = {"training_iteration": 1, "solved": flag}
    assert "solved" not in flatten_metrics(result)  # was 1.0 in MLflow
    assert finite(lookup(result, "solved")) is None  # the objective: the trial fails with "not a number"
    stop = StopCriteria({"solved": 1})
    with pytest.raises(Exception, match="'solved' is not a number in the results"):
        stop.check(result)  # was met by numpy's bool_ (float(np.bool_(True)) >= 1)


def test_text_results_are_not_numbers_anywhere():
    result = {"training_iteration": 1, "score": "500"}
    assert "score" not in flatten_metrics(result)
    assert finite(lookup(result, "score")) is None  # was 500.0 for Optuna
    with pytest.raises(Exception, match="'score' is not a number in the results"):
        StopCriteria({"score": 100}).check(result)  # was met
    assert StopCriteria({"score": "1e2"}).criteria == {"score": 100.0}  # a YAML stop value is still read


def test_lookup_by_path():
    result = {"info": {"learner": {"default_policy": {"kl": 0.1}}}, "custom_metrics": {"my.metric": 2}}
    assert lookup(result, "info/learner/default_policy/kl") == 0.1 == lookup(result, "info.learner.default_policy.kl")
    assert lookup(result, "custom_metrics/my.metric") == 2
    assert lookup(result, "nope") is MISSING


def test_rllibs_classic_learner_stats_path_reads_rltunes():
    """RLlib's classic stack: info/learner/<policy>/learner_stats/<stat>; rltune's results drop that level."""
    result = {"info": {"learner": {"default_policy": {"policy_loss": 0.25}}},
              "evaluation": {"env_runners": {"episode_return_mean": 9.0}}}
    assert lookup(result, "info/learner/default_policy/learner_stats/policy_loss") == 0.25
    assert lookup(result, "info/learner/default_policy/policy_loss") == 0.25
    assert lookup(result, "evaluation_results/env_runner_results/episode_return_mean") == 9.0
    assert lookup(result, "info/learner/default_policy/learner_stats/vf_loss") is MISSING
