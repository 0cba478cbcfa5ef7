"""Study files: each invalid one exits 2 with its specific message (path and line) and no traceback."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rltune import tune
from rltune.errors import ConfigError
from rltune.orchestrator._spec import load_study_file
from rltune.orchestrator.cli import main

REPO = Path(__file__).resolve().parents[2]
RLTUNE = Path(sys.executable).parent / "rltune"
PPO = "run: PPO\n"
ENV = PPO + "config:\n  env: CartPole-v1\n"
CONFIG_ONLY = "config:\n  env: CartPole-v1\n"

INVALID = {
    "loguniform reversed": (ENV + "  lr: {loguniform: [0.01, 0.0001]}\n",
                            "line 4: config.lr.loguniform: needs [low, high] with 0 < low < high, but got [0.01, 0.0001]"),
    "loguniform from 0": (ENV + "  lr: {loguniform: [0, 0.01]}\n", "config.lr.loguniform: needs [low, high] with 0 < low < high"),
    "uniform one bound": (ENV + "  gamma: {uniform: [0.9]}\n", "config.gamma.uniform: needs [low, high] with low < high, but got [0.9]"),
    "randint floats": (ENV + "  num_sgd_iter: {randint: [1.5, 10]}\n", "config.num_sgd_iter.randint: needs [low, high] of ints"),
    "quniform step 0": (ENV + "  lambda: {quniform: [0.9, 1.0, 0]}\n", "config.lambda.quniform: needs [low, high, q] with low < high and q > 0"),
    "quniform step too big": (ENV + "  lambda: {quniform: [0.9, 1.0, 0.5]}\n", "config.lambda.quniform: the step q=0.5 is larger than high - low"),
    "empty choice": (ENV + "  model:\n    fcnet_hiddens: {choice: []}\n",
                     "line 5: config.model.fcnet_hiddens.choice: needs a non-empty list of values"),
    "grid of a scalar": (ENV + "  lr: {grid_search: 0.1}\n", "config.lr.grid_search: needs a non-empty list of values, but got 0.1"),
    "misspelt entry": (ENV + "  lr: {loguniformm: [0.0001, 0.01]}\n", "config.lr.loguniformm: unknown search-space entry; did you mean 'loguniform'?"),
    "unknown config key": (ENV + "  gama: 0.9\n", "line 4: config.gama: unknown key; did you mean 'gamma'?"),
    "bad value among choices": (ENV + "  model:\n    fcnet_hiddens: {choice: [[64, 64], [0]]}\n",
                                "config.model.fcnet_hiddens: layer sizes must be positive"),
    "continuous range with grid": (ENV + "  lr: {uniform: [0.001, 0.1]}\nsearch_alg: grid\n",
                                   "config.lr.uniform: search_alg grid runs a finite grid and cannot search a continuous range"),
    "unknown algorithm": ("run: PPX\n" + CONFIG_ONLY, "line 1: run: unknown algorithm 'PPX'; did you mean 'PPO'?"),
    "missing run": (CONFIG_ONLY, "run: required"),
    "run not importable": ("run: no_such_module_xyz:train\n" + CONFIG_ONLY, "run: cannot import 'no_such_module_xyz:train'"),
    "unknown search_alg": (ENV + "search_alg: tpx\n", "search_alg: unknown search_alg 'tpx'; did you mean 'tpe'?"),
    "unknown sampler option": (ENV + "search_alg: {type: tpe, n_startup: 3}\n",
                               "search_alg.n_startup: not an option of tpe (Optuna's TPESampler); did you mean 'n_startup_trials'?"),
    "unknown scheduler": (ENV + "scheduler: ashaa\n", "scheduler: unknown scheduler 'ashaa'; did you mean 'asha'?"),
    "unknown pruner option": (ENV + "pruner: {type: asha, reduction: 3}\n",
                              "pruner.reduction: not an option of asha (Optuna's SuccessiveHalvingPruner); did you mean 'reduction_factor'?"),
    "bad pruner option value": (ENV + "scheduler: {type: median, n_startup_trials: -1}\n",
                                "scheduler: invalid options for median (Optuna's MedianPruner)"),
    "scheduler and pruner": (ENV + "scheduler: median\npruner: asha\n", "scheduler and pruner are the same field; give one"),
    "mode maximize": (ENV + "mode: maximize\n", "mode: Input should be 'max' or 'min'"),
    "no samples": (ENV + "num_samples: 0\n", "num_samples: Input should be greater than or equal to 1"),
    "no jobs": (ENV + "n_jobs: 0\n", "n_jobs: Input should be greater than or equal to 1"),
    "zero trial timeout": (ENV + "trial_timeout_s: 0\n", "trial_timeout_s: Input should be greater than 0"),
    "unknown field": (ENV + "colour: red\n", "colour: unknown field; the fields are name, run"),
    "misspelt field": (ENV + "serch_alg: tpe\n", "serch_alg: unknown field; did you mean 'search_alg'?"),
    "stop not a number": (ENV + "stop: {episode_reward_mean: high}\n",
                          "stop.episode_reward_mean: the value must be a number, but got 'high'"),
    "no env": (PPO + "config: {lr: 0.001}\n", "config.env: PPO needs an env (e.g. env: CartPole-v1)"),
    "env twice": (PPO + "env: Pendulum-v1\n" + CONFIG_ONLY, "env is 'Pendulum-v1' but config.env is 'CartPole-v1'; give the env once"),
    "name with a slash": (ENV + "name: a/b\n", "name: must be letters, digits, '-', '_' and '.'"),
    "not YAML": (PPO + "config: {env: [CartPole-v1\n", "not valid YAML"),
    "a list": ("- run: PPO\n", "must be a mapping of fields (name, run"),
    "empty": ("", "the file is empty"),
}


@pytest.mark.parametrize("case", list(INVALID))
def test_invalid_study_file_exits_2_with_its_message(case, tmp_path, capsys):
    text, expected = INVALID[case]
    path = tmp_path / "study.yaml"
    path.write_text(text)
    code = main(["tune", str(path), "--results-dir", str(tmp_path / "results")])
    out, err = capsys.readouterr()
    assert code == 2, out + err
    assert err.startswith(f"rltune tune: error: invalid study file '{path}'"), err
    assert expected in err, err
    assert "Traceback" not in err and not (tmp_path / "results").exists()


def test_every_problem_is_collected_in_file_order(tmp_path):
    path = tmp_path / "study.yaml"
    path.write_text(textwrap.dedent("""\
        run: PPO
        search_alg: {type: tpe, n_startup: 3}
        config:
          env: CartPole-v1
          lr: {loguniform: [0.01, 0.0001]}
          gama: 0.9
          model: {fcnet_hiddens: {choice: []}}
        """))
    with pytest.raises(ConfigError) as info:
        load_study_file(path)
    assert [p.split(":")[0] for p in info.value.problems] == ["line 2", "line 5", "line 6", "line 7"]


def test_a_missing_file_and_no_traceback_from_the_command(tmp_path):
    proc = subprocess.run([str(RLTUNE), "tune", str(tmp_path / "nope.yaml")], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"rltune tune: error: invalid study file '{tmp_path / 'nope.yaml'}': the file does not exist"


def test_tune_run_raises_the_same_messages():
    with pytest.raises(ConfigError, match=r"config.lr.loguniform: needs \[low, high\] with 0 < low < high"):
        tune.run("PPO", config={"env": "CartPole-v1", "lr": tune.loguniform(1e-2, 1e-4)}, verbose=0)
    with pytest.raises(ConfigError, match="search_alg: unknown search_alg 'bohb'"):
        tune.run(lambda config, reporter: None, search_alg="bohb", verbose=0)


@pytest.mark.parametrize("name", sorted(p.name for p in (REPO / "studies").glob("*.yaml")))
def test_the_shipped_study_files_are_valid(name, monkeypatch):
    monkeypatch.syspath_prepend(str(REPO))  # studies that import examples/ say to run them with PYTHONPATH=.
    path = REPO / "studies" / name
    if "\nrun:" not in "\n" + path.read_text() or name in ("cartpole-ppo.yaml", "curriculum-corridor.yaml"):
        pytest.skip("a train file (rltune train -f), not a study")
    plan = load_study_file(path)
    assert plan.total_trials >= 1


def test_rltune_train_on_a_study_file_says_to_use_rltune_tune(capsys):
    path = REPO / "studies" / "cartpole-ppo-grid.yaml"
    assert main(["train", "-f", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"config.lr (grid_search): search-space entries make a study of many trials; run it with 'rltune tune {path}'" in err


def test_a_storage_that_cannot_be_opened_exits_2(tmp_path, capsys):
    path = tmp_path / "study.yaml"
    path.write_text(ENV)
    code = main(["tune", str(path), "--results-dir", str(tmp_path / "r"), "--storage", "nosuchdialect://x"])
    err = capsys.readouterr().err
    assert code == 2 and "cannot open the Optuna storage 'nosuchdialect://x'" in err and "Traceback" not in err


# -- hardening: YAML bombs and default names (issue 14) -----------------------------------------
def test_a_billion_laughs_file_is_refused_at_once(tmp_path):
    import time

    lines = ["    l0: &l0 {a: 1, b: 2}"] + [f"    l{i}: &l{i} {{a: *l{i - 1}, b: *l{i - 1}, c: *l{i - 1}}}" for i in range(1, 25)]
    path = tmp_path / "bomb.yaml"
    path.write_text("run: PPO\nconfig:\n  env: CartPole-v1\n  junk:\n" + "\n".join(lines) + "\n")
    assert path.stat().st_size < 1300
    start = time.perf_counter()
    with pytest.raises(ConfigError, match="aliases .* expand it to more than 100,000 values"):
        load_study_file(path)
    assert time.perf_counter() - start < 2.0


def test_aliases_that_stay_small_and_merge_keys_still_load(tmp_path):
    import yaml

    from rltune.orchestrator._yaml_files import _Loader

    path = tmp_path / "ok.yaml"
    path.write_text("run: PPO\nconfig:\n  env: CartPole-v1\n  model: {fcnet_hiddens: &h [32, 32]}\n  lr_schedule: [[0, 0.01], [1000, 0.001]]\n")
    assert load_study_file(path).config["model"]["fcnet_hiddens"] == [32, 32]
    # a key of a merged mapping (<<) given again overrides it: not a duplicate
    merged = yaml.load("b: &b {env: x, lr: 1}\nc:\n  <<: *b\n  lr: 2\n", Loader=_Loader)  # noqa: S506
    assert merged["c"] == {"env": "x", "lr": 2}


def test_a_file_name_that_is_not_a_valid_name_gives_a_safe_default_name(tmp_path):
    path = tmp_path / "my study (v2).yaml"
    path.write_text(ENV)
    assert load_study_file(path).name == "my_study_v2_"
