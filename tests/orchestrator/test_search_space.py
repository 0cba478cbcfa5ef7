"""Search spaces: parsing (Python and YAML forms, nested), Ray's semantics, Optuna-safe categoricals."""

from __future__ import annotations

import optuna
import pytest

from rltune import tune
from rltune.orchestrator._search_space import (
    Categorical,
    decode_params,
    encode_point,
    gridify,
    parse_space,
    resolve_config,
    suggest,
)


def _draw(space, n=40, seed=0):
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed))
    draws = []
    for _ in range(n):
        trial = study.ask()
        draws.append(suggest(trial, space))
        study.tell(trial, 0.0)
    return study, draws


def test_python_and_yaml_forms_are_the_same_space():
    python = {"lr": tune.loguniform(1e-4, 1e-2), "model": {"fcnet_hiddens": tune.choice([[64, 64], [256]])},
              "gamma": tune.uniform(0.9, 0.99), "n": tune.randint(1, 4), "q": tune.quniform(0.0, 1.0, 0.25),
              "seed": tune.grid_search([1, 2])}
    yaml_form = {k: (v.to_yaml() if isinstance(v, tune.Domain) else v) for k, v in python.items()}
    yaml_form["model"] = {"fcnet_hiddens": {"choice": [[64, 64], [256]]}}
    a, problems_a = parse_space(python)
    b, problems_b = parse_space(yaml_form)
    assert problems_a == problems_b == []
    assert [(p.name, p.kind) for p in a.params] == [(p.name, p.kind) for p in b.params] == [
        ("lr", "loguniform"), ("model.fcnet_hiddens", "choice"), ("gamma", "uniform"), ("n", "randint"),
        ("q", "quniform"), ("seed", "grid_search")]


def test_drawn_values_keep_ray_semantics():
    space, _ = parse_space({"n": tune.randint(1, 3), "q": tune.quniform(0.0, 1.0, 0.25), "lr": tune.loguniform(1e-4, 1e-2),
                            "h": tune.choice([[64, 64], [256, 256], "auto"])})
    _, draws = _draw(space)
    assert {d["n"] for d in draws} == {1, 2}  # randint's upper bound is excluded
    assert {d["q"] for d in draws} <= {0.0, 0.25, 0.5, 0.75, 1.0}
    assert all(1e-4 <= d["lr"] <= 1e-2 for d in draws)
    assert {str(d["h"]) for d in draws} == {"[64, 64]", "[256, 256]", "auto"}
    assert all(isinstance(d["h"], (list, str)) for d in draws)


def test_list_choices_are_stored_as_json_text_and_decoded_back():
    space, _ = parse_space({"model": {"fcnet_hiddens": {"choice": [[64, 64], [256, 256]]}}})
    study, draws = _draw(space, n=5)
    stored = {t.params["model.fcnet_hiddens"] for t in study.trials}
    assert stored <= {"[64, 64]", "[256, 256]"}
    for t, d in zip(study.trials, draws):
        assert decode_params(space, t.params) == d
        config = resolve_config({"env": "X", "model": {"fcnet_hiddens": {"choice": [[64, 64], [256, 256]]}}}, space, d)
        assert config == {"env": "X", "model": {"fcnet_hiddens": d["model.fcnet_hiddens"]}}


def test_categorical_tells_one_from_true_and_keeps_scalars():
    assert Categorical([1, True, "1"]).encoded == [1, True, "1"]
    cat = Categorical([1, 1.0])  # equal in Python, different values to the user: stored as text
    assert cat.decode(cat.encode(1.0)) == 1.0 and isinstance(cat.decode(cat.encode(1.0)), float)
    dup = Categorical([[1], [1]])
    assert len(set(dup.encoded)) == 2


def test_grid_points_are_the_cartesian_product_and_enqueue_encoded():
    space, _ = parse_space({"a": tune.grid_search([1, 2]), "b": {"grid_search": [[1], [2], [3]]}, "c": tune.uniform(0, 1)})
    points = space.grid_points()
    assert len(points) == 6 and points[0] == {"a": 1, "b": [1]} and points[-1] == {"a": 2, "b": [3]}
    assert encode_point(space, points[-1]) == {"a": 2, "b": "[3]"}


def test_search_alg_grid_turns_discrete_entries_into_grid_entries():
    space, _ = parse_space({"n": tune.randint(1, 4), "c": tune.choice(["x", "y"]), "q": tune.quniform(0.1, 0.3, 0.1)})
    grid, problems = gridify(space)
    assert problems == []
    assert [len(p.values) for p in grid.params] == [3, 2, 3]
    assert grid.params[2].values == [0.1, 0.2, 0.3]
    _, problems = gridify(parse_space({"lr": tune.uniform(0, 1)})[0])
    assert problems and "cannot search a continuous range" in problems[0]


def test_resolve_config_does_not_mutate_and_keeps_objects():
    class Callbacks:
        pass

    config = {"callbacks": Callbacks, "lr": tune.uniform(0, 1), "env_config": {"size": tune.choice([3, 5])}}
    space, _ = parse_space(config)
    resolved = resolve_config(config, space, {"lr": 0.5, "env_config.size": 5})
    assert resolved == {"callbacks": Callbacks, "lr": 0.5, "env_config": {"size": 5}}
    assert isinstance(config["lr"], tune.Domain) and isinstance(config["env_config"]["size"], tune.Domain)


@pytest.mark.parametrize(
    "entry, message",
    [
        ({"loguniform": [1e-2, 1e-4]}, "config.x.loguniform: needs [low, high] with 0 < low < high"),
        ({"uniform": "a"}, "config.x.uniform: needs [low, high] with low < high, but got 'a'"),
        ({"randint": [3, 3]}, "config.x.randint: needs [low, high] of ints with low < high"),
        ({"quniform": [0, 1]}, "config.x.quniform: needs [low, high, q]"),
        ({"choice": "abc"}, "config.x.choice: needs a non-empty list of values, but got 'abc'"),
        ({"gridsearch": [1, 2]}, "config.x.gridsearch: unknown search-space entry; did you mean 'grid_search'?"),
    ],
)
def test_each_bad_entry_is_named_by_its_path(entry, message):
    _, problems = parse_space({"x": entry})
    assert len(problems) == 1 and problems[0].startswith(message), problems
