"""Ray Tune's schedulers by name drive real studies: ASHA and the median rule prune, max_t stops, FIFO runs all."""

from __future__ import annotations

import optuna
import pytest

from rltune import tune
from rltune.errors import ConfigError

from .trainables import counter


def _run(tmp_path, scheduler, xs, steps=8, **fields):
    return tune.run(counter, config={"x": tune.grid_search(xs), "steps": steps}, scheduler=scheduler,
                    results_dir=str(tmp_path), name="s", verbose=0, **{"metric": "score", **fields})


def _by_x(analysis):
    return {t.config["x"]: (t.state, t.training_iteration) for t in analysis.trials}


def test_asha_prunes_the_bad_curve_and_stops_the_rest_at_max_t(tmp_path):
    analysis = _run(tmp_path, tune.ASHAScheduler(max_t=4, grace_period=1, reduction_factor=2), [3, 2, 1, 0.1])
    states = _by_x(analysis)
    assert states[0.1] == ("PRUNED", 1)  # the worst at the first rung (grace_period 1)
    assert states[3] == ("COMPLETE", 4)  # the best runs to max_t, not to its 8 steps
    assert isinstance(analysis.study.pruner, optuna.pruners.SuccessiveHalvingPruner)


def test_asha_without_stop_last_trials_runs_to_the_trials_own_end(tmp_path):
    analysis = _run(tmp_path, tune.AsyncHyperBandScheduler(max_t=2, stop_last_trials=False), [3], steps=5)
    assert _by_x(analysis) == {3: ("COMPLETE", 5)}


def test_a_scheduler_max_t_and_the_study_stop_keep_the_lower(tmp_path):
    analysis = _run(tmp_path, tune.ASHAScheduler(max_t=6), [1], stop={"training_iteration": 3})
    assert _by_x(analysis) == {1: ("COMPLETE", 3)}


def test_median_stopping_rule_in_iterations_prunes_the_bad_trial(tmp_path):
    rule = tune.MedianStoppingRule(time_attr="training_iteration", grace_period=2, min_samples_required=2)
    states = _by_x(_run(tmp_path, rule, [3, 3.5, 4, 0.1], steps=4))
    assert states[0.1] == ("PRUNED", 2)  # not before its grace period
    assert {states[x][0] for x in (3, 3.5, 4)} == {"COMPLETE"}


def test_median_stopping_rule_default_grace_is_seconds_since_the_trial_started(tmp_path):
    # Ray's default: time_attr time_total_s, grace 60 s; these trials end long before, so none is pruned
    analysis = _run(tmp_path, tune.MedianStoppingRule(min_samples_required=1), [3, 0.1], steps=3)
    assert _by_x(analysis) == {3: ("COMPLETE", 3), 0.1: ("COMPLETE", 3)}
    rule = tune.MedianStoppingRule(min_samples_required=1, grace_period=0.0)
    analysis = _run(tmp_path / "nograce", rule, [3, 0.1], steps=3)
    assert _by_x(analysis)[0.1] == ("PRUNED", 1)


def test_hyperband_is_optunas_with_max_t_as_its_max_resource_and_stop(tmp_path):
    analysis = _run(tmp_path, tune.HyperBandScheduler(max_t=3, reduction_factor=3), [1, 2], steps=6)
    assert isinstance(analysis.study.pruner, optuna.pruners.HyperbandPruner)
    assert all(t.training_iteration <= 3 for t in analysis.trials)
    assert max(t.training_iteration for t in analysis.trials) == 3


def test_fifo_prunes_nothing(tmp_path):
    states = _by_x(_run(tmp_path, tune.FIFOScheduler(), [3, 0.1], steps=3))
    assert states == {3: ("COMPLETE", 3), 0.1: ("COMPLETE", 3)}


def test_metric_and_mode_of_the_scheduler_become_the_studys(tmp_path):
    analysis = _run(tmp_path, tune.ASHAScheduler(metric="score", mode="min", max_t=2), [3, 1], metric=None)
    assert analysis.study.direction == optuna.study.StudyDirection.MINIMIZE
    assert analysis.best_config["x"] == 1


def test_a_metric_given_twice_differently_names_both(tmp_path):
    with pytest.raises(ConfigError, match=r"metric: tune.run gives 'score' but ASHAScheduler gives 'loss'"):
        _run(tmp_path, tune.ASHAScheduler(metric="loss"), [1])
    with pytest.raises(ConfigError, match=r"mode: OptunaSearch gives 'min' but MedianStoppingRule gives 'max'"):
        _run(tmp_path, tune.MedianStoppingRule(mode="max"), [1], search_alg=tune.OptunaSearch(mode="min"))


def test_a_searcher_given_as_scheduler_says_where_it_goes(tmp_path):
    with pytest.raises(ConfigError, match="scheduler: OptunaSearch is not a scheduler .* pass it as search_alg"):
        _run(tmp_path, tune.OptunaSearch(), [1])
