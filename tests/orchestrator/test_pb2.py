"""PB2: the GP-bandit explore (pure), and the scheduler that feeds it from every member's history in storage.

PB2 in Ray Tune has no unit tests (ray#29786) and breaks when a trial errors
(ray#40787); these construct the observations and check the choice.
"""

import math
import random

import numpy as np
import optuna
import pytest

from rltune import tune
from rltune.errors import ConfigError
from rltune.orchestrator._decision import ExploitTrial, Proceed
from rltune.orchestrator._pb2 import denormalize, fit_gp, normalize, ucb_choice
from rltune.orchestrator._pbt import HISTORY

from .test_pbt import population

optuna.logging.set_verbosity(optuna.logging.WARNING)
BOUNDS = {"lr": (1e-4, 1e-2), "clip_param": (0.1, 0.3)}


def test_normalize_and_denormalize_map_the_bounds_to_the_unit_cube_and_back():
    point = normalize({"lr": 1e-2, "clip_param": 0.2}, BOUNDS)
    assert point == pytest.approx([1.0, 0.5])
    assert denormalize(np.array(point), BOUNDS) == pytest.approx({"lr": 1e-2, "clip_param": 0.2})
    assert normalize({"lr": 5.0, "clip_param": -1.0}, BOUNDS) == [1.0, 0.0]  # clipped


def test_the_gp_bandit_picks_near_the_values_whose_score_improved_most():
    rng = np.random.default_rng(0)
    observations = []
    for _ in range(40):  # the score improves most at x = 0.8, falls off around it
        x = float(rng.random())
        observations.append((float(rng.random()), [x], math.exp(-((x - 0.8) / 0.15) ** 2)))
    picks = [ucb_choice(observations, 1.0, 1, random.Random(seed))[0] for seed in range(5)]
    assert all(0.6 < p < 1.0 for p in picks), picks


def test_too_few_or_broken_observations_give_a_uniform_draw_never_an_error():
    for observations in ([], [(0.5, [0.2], 1.0)], [(0.5, [0.2], math.nan), (0.6, [0.3], math.inf)],
                         [(0.5, [0.2, 0.1], 1.0), (0.6, [0.3], 2.0)]):  # a member of another shape (errored mid-write)
        point = ucb_choice(observations, 1.0, 1, random.Random(0))
        assert point.shape == (1,) and 0.0 <= point[0] <= 1.0


def _population(n):
    return population(n, scheduler={"type": "pb2", "perturbation_interval": 2, "quantile_fraction": 0.5,
                                    "hyperparam_bounds": {"lr": [1e-4, 1e-2]}})


def _at(scheduler, member, iteration, value):
    member.iteration = iteration
    return scheduler.decide(member, {}, value, Proceed())


def test_pb2_records_each_members_score_changes_and_exploits_with_values_in_the_bounds():
    scheduler, (low, high), study = _population(2)
    for iteration, (a, b) in zip((2, 4, 6), ((1.0, 2.0), (1.5, 4.0), (2.0, 7.0))):
        _at(scheduler, high, iteration, b)
        high.trial.set_user_attr("checkpoint", f"/c{iteration}")
        decision = _at(scheduler, low, iteration, a)
    assert [h["delta"] for h in study.trials[1].user_attrs[HISTORY]] == [2.0, 3.0]
    assert isinstance(decision, ExploitTrial) and decision.source == 1
    assert 1e-4 <= decision.config["lr"] <= 1e-2 and decision.changed == {"lr": decision.config["lr"]}


def test_pb2_goes_on_when_a_member_errored_and_its_history_is_partial():
    scheduler, (low, high, gone), study = _population(3)
    gone.trial.set_user_attr(HISTORY, [{"iteration": 2, "values": {"lr": "broken"}}, {"no": "values"}])
    study.tell(gone.trial, state=optuna.trial.TrialState.FAIL)
    _at(scheduler, high, 2, 5.0)
    high.trial.set_user_attr("checkpoint", "/c")
    _at(scheduler, low, 2, 1.0)
    _at(scheduler, high, 4, 6.0)
    decision = _at(scheduler, low, 4, 1.5)
    assert isinstance(decision, ExploitTrial) and 1e-4 <= decision.config["lr"] <= 1e-2


def test_tune_pb2_is_the_study_scheduler_and_bad_bounds_are_refused():
    part = tune.PB2(metric="score", mode="max", hyperparam_bounds={"lr": [1e-4, 1e-2]}).study_part()
    assert part.fields["scheduler"]["type"] == "pb2"
    with pytest.raises(ConfigError, match="hyperparam_bounds.lr: needs"):
        tune.PB2(hyperparam_bounds={"lr": [1e-2, 1e-4]})


def test_the_gp_kernel_is_fitted_a_hyperparameter_that_does_not_matter_gets_the_longer_length_scale():
    rng = np.random.default_rng(1)
    x = rng.random((60, 3))  # time, a (drives the score change), b (does not)
    y = np.exp(-((x[:, 1] - 0.3) / 0.2) ** 2) + 0.01 * rng.standard_normal(60)
    kernel = fit_gp(x, y).kernel_
    scales = kernel.k1.k2.length_scale  # ConstantKernel * RBF(time, a, b) + WhiteKernel
    assert scales[2] > 3 * scales[1], scales
    observations = [(float(t), [float(a), float(b)], float(d)) for (t, a, b), d in zip(x, y)]
    picks = [ucb_choice(observations, 1.0, 2, random.Random(seed)) for seed in range(3)]
    assert all(abs(p[0] - 0.3) < 0.12 for p in picks), picks  # near the known optimum of a, whatever b
