"""Ray Tune's searchers by name drive real studies: the sampler used, points run first, concurrency capped."""

from __future__ import annotations

import json
from pathlib import Path

import optuna
import pytest

from rltune import tune
from rltune.errors import ConfigError
from rltune.orchestrator._points_first import PointsFirstSampler

from .ray_trainables import spans
from .trainables import counter


def _run(tmp_path, search_alg, config, name="s", **fields):
    fields = {"metric": "score", "mode": "max", **fields}
    return tune.run(counter, config={"steps": 2, **config}, search_alg=search_alg, results_dir=str(tmp_path),
                    name=name, verbose=0, **fields)


class Counting(optuna.samplers.RandomSampler):
    """A sampler that counts its draws (it runs in the orchestrator, this process)."""

    def __init__(self) -> None:
        super().__init__(seed=0)
        self.draws: list[str] = []

    def sample_independent(self, study, trial, param_name, param_distribution):
        self.draws.append(param_name)
        return super().sample_independent(study, trial, param_name, param_distribution)


def test_optuna_search_uses_the_sampler_given(tmp_path):
    sampler = Counting()
    analysis = _run(tmp_path, tune.OptunaSearch(sampler=sampler), {"x": tune.uniform(0, 1)}, num_samples=3)
    assert analysis.study.sampler is sampler
    assert sampler.draws == ["x", "x", "x"]


def test_points_to_evaluate_run_first_then_the_sampler_draws(tmp_path):
    points = [{"x": 0.25, "model": {"hidden": [8, 8]}}, {"x": 0.75}]
    searcher = tune.OptunaSearch(points_to_evaluate=points, sampler=Counting())
    config = {"x": tune.uniform(0, 1), "model": {"hidden": tune.choice([[4], [8, 8]])}}
    analysis = _run(tmp_path, searcher, config, num_samples=4)
    configs = [t.config for t in sorted(analysis.trials, key=lambda t: t.number)]
    assert configs[0]["x"] == 0.25 and configs[0]["model"]["hidden"] == [8, 8]
    assert configs[1]["x"] == 0.75 and configs[1]["model"]["hidden"] in ([4], [8, 8])  # left out: drawn
    assert {c["x"] for c in configs[2:]}.isdisjoint({0.25, 0.75})
    assert searcher.sampler().draws == ["model.hidden", "x", "model.hidden", "x", "model.hidden"]
    assert isinstance(analysis.study.sampler, PointsFirstSampler)


def test_points_are_not_run_again_on_resume(tmp_path):
    searcher = tune.BasicVariantGenerator(points_to_evaluate=[{"n/a": 5}], random_state=1)
    first = _run(tmp_path, searcher, {"n": {"a": tune.randint(0, 1000)}}, name="r", n_trials=1)
    assert first.trials[0].config["n"]["a"] == 5
    again = _run(tmp_path, searcher, {"n": {"a": tune.randint(0, 1000)}}, name="r", n_trials=4, resume=True)
    assert [t.config["n"]["a"] for t in again.trials].count(5) == 1  # trial 0 only
    assert sorted(t.number for t in again.trials) == [0, 1, 2, 3]


def test_hyperopt_search_is_a_seeded_tpe(tmp_path):
    def configs(name):
        searcher = tune.HyperOptSearch(n_initial_points=2, random_state_seed=7, gamma=0.5)
        analysis = _run(tmp_path, searcher, {"x": tune.uniform(0, 1)}, name=name, num_samples=4)
        assert isinstance(analysis.study.sampler, optuna.samplers.TPESampler)
        return [t.config["x"] for t in sorted(analysis.trials, key=lambda t: t.number)]

    assert configs("a") == configs("b")


def test_hyperopt_gamma_is_hyperopts_split():
    sampler = tune.HyperOptSearch(gamma=0.5).sampler()  # fails when Optuna removes TPE's gamma
    assert isinstance(sampler, optuna.samplers.TPESampler)
    assert [tune.HyperOptSearch(gamma=0.5).sampler()._gamma(n) for n in (1, 16, 10_000)] == [1, 2, 25]


def test_bayesopt_search_is_optunas_gp(tmp_path):
    searcher = tune.BayesOptSearch(metric="score", mode="max", random_search_steps=2, random_state=3)
    analysis = _run(tmp_path, searcher, {"x": tune.uniform(0, 1)}, num_samples=3, metric=None, mode=None)
    assert isinstance(analysis.study.sampler, optuna.samplers.GPSampler)
    assert len(analysis.trials) == 3 and {t.state for t in analysis.trials} == {"COMPLETE"}


def test_basic_variant_generator_runs_every_grid_value_and_draws_the_rest(tmp_path):
    searcher = tune.BasicVariantGenerator(random_state=2)
    analysis = _run(tmp_path, searcher, {"x": tune.grid_search([1, 2]), "noise": tune.uniform(0, 1)}, num_samples=2)
    assert sorted(t.config["x"] for t in analysis.trials) == [1, 1, 2, 2]
    assert isinstance(analysis.study.sampler, optuna.samplers.RandomSampler)


def _overlaps(analysis) -> int:
    spans_ = [json.loads((Path(t.trial_dir) / "span.json").read_text()) for t in analysis.trials]
    return max(sum(1 for s in spans_ if s[0] <= t0 < s[1]) for t0, _ in spans_)


def test_concurrency_limiter_caps_the_trials_at_once(tmp_path):
    limited = tune.ConcurrencyLimiter(tune.OptunaSearch(), max_concurrent=1)
    analysis = tune.run(spans, config={"x": tune.uniform(0, 1), "sleep": 0.2}, metric="score", num_samples=3,
                        n_jobs=2, search_alg=limited, results_dir=str(tmp_path), name="c", verbose=0)
    assert _overlaps(analysis) == 1


def test_concurrency_limiter_sets_the_trials_at_once():
    fields = {"run": counter, "config": {}, "search_alg": tune.ConcurrencyLimiter(tune.HyperOptSearch(), 3)}
    assert tune.translate_search(fields)["n_jobs"] == 3
    assert tune.translate_search({**fields, "n_jobs": 2})["n_jobs"] == 2
    capped = tune.translate_search({**fields, "max_concurrent": 8})
    assert capped["max_concurrent"] == 3 and capped.get("n_jobs") is None


def test_a_point_outside_the_space_is_named(tmp_path):
    searcher = tune.OptunaSearch(points_to_evaluate=[{"x": 2.0, "y": 1}])
    with pytest.raises(ConfigError) as error:
        _run(tmp_path, searcher, {"x": tune.uniform(0, 1)})
    assert "points_to_evaluate[0].x: 2.0 is not a value of uniform(0, 1)" in str(error.value)
    assert "points_to_evaluate[0].y: not a search-space entry of the config (entries: x)" in str(error.value)
