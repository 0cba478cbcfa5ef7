"""``rltune show``: the trials table rounded, with full metric and param names (or a legend), within the width."""

from __future__ import annotations

import re

import pytest
from rich.cells import cell_len

from rltune import tune
from rltune.orchestrator.cli import main

from .trainables import evaluated

METRIC = "evaluation/episode_reward_mean"
SPACE = {"x": tune.grid_search([1, 2]), "steps": 3, "lr": tune.loguniform(1e-4, 3e-3),
         "lambda": tune.uniform(0.8, 1.0), "gamma": tune.choice([0.98, 0.99, 0.995]),
         "num_sgd_iter": tune.randint(5, 31), "model": {"fcnet_hiddens": tune.choice([[32, 32], [64, 64]])}}


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    results = tmp_path_factory.mktemp("show")
    analysis = tune.run(evaluated, name="six", results_dir=str(results), config=SPACE, metric=METRIC, seed=0,
                        stop={"training_iteration": 2}, checkpoint_at_end=True, tracking=False, verbose=0)
    assert [t.state for t in analysis.trials] == ["COMPLETE", "COMPLETE"]
    return results, analysis


@pytest.mark.parametrize("columns", [200, 120, 80])
def test_show_rounds_names_in_full_and_fits_the_width(study, capsys, monkeypatch, columns):
    results, analysis = study
    monkeypatch.setenv("COLUMNS", str(columns))
    assert main(["show", "six", "--results-dir", str(results)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == f"study 'six' (max {METRIC}), 2 trials, directory {results / 'six'}"
    assert all(cell_len(line) <= columns for line in lines[1:]), out
    header = lines[1]
    assert re.match(rf"trial +state +iter +{METRIC} ", header), header  # the metric's full name
    for number in re.findall(r"\d+\.\d+", out):  # no full-precision floats: 4 significant digits
        assert len(number.replace(".", "").lstrip("0")) <= 4, number
    assert "2.123" in out and "4.123" in out  # the metric's values (x * 2 + 0.123456789), rounded
    first = analysis.trials[0]
    assert f"{first.config['lr']:.4g}" in out and f"{first.config['lambda']:.4g}" in out
    for name in ("lr", "lambda", "gamma", "num_sgd_iter", "fcnet_hiddens"):
        assert name in out, name
    assert re.search(r"\[(32,32|64,64)\]", out)
    assert lines[-1] == "params: fcnet_hiddens = model.fcnet_hiddens"
    assert "trial_00000/checkpoint_000002" in out and "trial_00001/checkpoint_000002" in out
    if columns == 200:  # one column per param
        assert re.search(rf"{METRIC} +x +lr +lambda +gamma +num_sgd_iter +fcnet_hiddens +checkpoint or error", header)
    else:  # a wrapping params column
        assert header.split()[-5:] == ["params", "/", "checkpoint", "or", "error"]
