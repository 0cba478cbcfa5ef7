"""Ray Tune's other search-space functions: qloguniform, lograndint, qrandint, randn and sample_from."""

from __future__ import annotations

import math
import random

import optuna
import pytest

from rltune import tune
from rltune.errors import ConfigError
from rltune.orchestrator._search_space import decode_params, parse_space, resolve_config, suggest

from .trainables import counter


def _draws(config, n=60):
    space, problems = parse_space(config)
    assert problems == []
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    out = []
    for _ in range(n):
        trial = study.ask()
        values = suggest(trial, space)
        assert decode_params(space, trial.params) == values  # a stored trial reads back the same values
        out.append(values)
    return out


def test_quantized_and_log_ints_take_rays_values():
    draws = _draws({"q": tune.qloguniform(1e-4, 1e-1, 5e-5), "l": tune.lograndint(1, 1000),
                    "r": tune.qrandint(-21, 12, 3)})
    for d in draws:
        assert 1e-4 <= d["q"] <= 1e-1 and math.isclose(round(d["q"] / 5e-5) * 5e-5, d["q"])
        assert isinstance(d["l"], int) and 1 <= d["l"] < 1000
        assert isinstance(d["r"], int) and -21 <= d["r"] <= 12 and d["r"] % 3 == 0
    assert sum(d["l"] < 32 for d in draws) > len(draws) / 3  # log-uniform: as many below sqrt(1000) as above
    assert {d["r"] for d in draws} >= {-21, 12}  # both ends included


def test_randn_is_normal():
    values = [d["n"] for d in _draws({"n": tune.randn(5.0, 2.0)}, n=400)]
    mean = sum(values) / len(values)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
    assert abs(mean - 5.0) < 0.4 and abs(sd - 2.0) < 0.4


def test_yaml_forms_and_their_problems():
    space, problems = parse_space({"a": {"qrandint": [0, 12, 3]}, "b": {"randn": [0, 1]},
                                   "c": {"lograndint": [0, 5]}, "d": {"qrandint": [0, 10, 3]}})
    assert [p.describe() for p in space.params] == ["qrandint(0, 12, 3)", "randn(0, 1)"]
    assert problems == ["config.c.lograndint: needs [low, high] of ints with 0 < low < high (high excluded), but got [0, 5]",
                        "config.d.qrandint: needs [low, high, q] of ints with low < high, q >= 1 and high - low a "
                        "multiple of q, but got [0, 10, 3]"]


def test_sample_from_resolves_from_the_trials_config(tmp_path):
    config = {"x": tune.uniform(0, 1), "steps": 2,
              "noise": tune.sample_from(lambda spec: spec.config.x * 10),
              "nested": {"double": tune.sample_from(lambda spec: spec["config"]["noise"] * 2)}}
    analysis = tune.run(counter, config=config, metric="score", num_samples=3, results_dir=str(tmp_path),
                        name="s", verbose=0)
    for t in analysis.trials:
        assert t.config["noise"] == t.config["x"] * 10
        assert t.config["nested"]["double"] == t.config["noise"] * 2
        assert t.last_result["score"] == pytest.approx(t.config["x"] * 2 + t.config["noise"])


def test_a_trial_continued_keeps_its_sample_from_values():
    config = {"x": tune.uniform(0, 1), "r": tune.sample_from(lambda spec: random.random())}
    space, _ = parse_space(config)
    first = resolve_config(config, space, {"x": 0.5})
    assert resolve_config(config, space, {"x": 0.5}, drawn=first) == first
    assert resolve_config(config, space, {"x": 0.5})["r"] != first["r"]


def test_a_sample_from_that_raises_or_loops_is_named_before_any_trial(tmp_path):
    def run(config):
        tune.run(counter, config=config, metric="score", results_dir=str(tmp_path), name="bad", verbose=0)

    with pytest.raises(ConfigError, match=r"config.y: tune.sample_from's function raised AttributeError: z"):
        run({"x": tune.uniform(0, 1), "y": tune.sample_from(lambda spec: spec.config.z)})
    with pytest.raises(ConfigError, match=r"config.a, config.b: tune.sample_from values that read each other"):
        run({"a": tune.sample_from(lambda s: s.config.b), "b": tune.sample_from(lambda s: s.config.a)})
    assert not (tmp_path / "bad").exists()


def test_a_resumed_study_shows_the_sample_from_values_its_trials_ran_with(tmp_path):
    config = {"x": 0.0, "steps": 1, "noise": tune.sample_from(lambda spec: random.random())}  # score = noise

    def run(n_trials, resume):
        return tune.run(counter, config=config, metric="score", n_trials=n_trials, name="kept",
                        results_dir=str(tmp_path), verbose=0, resume=resume)

    run(2, False)
    analysis = run(3, True)
    assert len(analysis.trials) == 3
    for t in analysis.trials:
        assert t.config["noise"] == t.last_result["score"]
