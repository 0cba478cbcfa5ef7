"""The ``rltune`` CLI: train writes a trial directory, rollout evaluates it, bad input exits 2 with one message."""

from __future__ import annotations

import json
import logging
import math
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from rltune.orchestrator.cli import main
from rltune.trainers import register_env

RLTUNE = Path(sys.executable).parent / "rltune"
TINY = {
    "train_batch_size": 200,
    "rollout_fragment_length": 50,
    "sgd_minibatch_size": 100,
    "num_sgd_iter": 2,
    "model": {"fcnet_hiddens": [16]},
    "seed": 0,
}
TINY_JSON = json.dumps(TINY)


class ConstantEnv(gym.Env):
    """CartPole's spaces; every episode is one step with reward ``env_config['reward']`` (default 7)."""

    def __init__(self, ctx=None):
        self.reward = float((ctx or {}).get("reward", 7.0))
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
        self.action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(4, np.float32), {}

    def step(self, action):
        return np.zeros(4, np.float32), self.reward, True, False, {}


class BadObsEnv(ConstantEnv):
    """Breaks the gymnasium API: reset returns an observation of the wrong shape."""

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(3, np.float32), {}


register_env("rltune-test-constant", lambda ctx: ConstantEnv(ctx))
register_env("rltune-test-bad-obs", lambda ctx: BadObsEnv(ctx))


@pytest.fixture(autouse=True)
def _restore_log_levels():
    """main() configures logging (as a CLI does); keep other tests' log levels as they were."""
    levels = {name: logging.getLogger(name).level for name in ("", "rltune")}
    yield
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def train_argv(results: Path, *extra: str, config: str = TINY_JSON) -> list[str]:
    return ["train", "--run", "PPO", "--env", "CartPole-v1", "--config", config, "--results-dir", str(results), *extra]


def read_results(trial_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (trial_dir / "result.json").read_text().splitlines()]


# -- train -------------------------------------------------------------------------------
def test_train_writes_params_results_and_checkpoints(tmp_path, capsys):
    code, out, err = run(
        capsys, *train_argv(tmp_path, "--name", "t1", "--stop", '{"training_iteration": 2}', "--checkpoint-freq", "1")
    )
    assert code == 0, err
    trial = tmp_path / "t1"
    params = json.loads((trial / "params.json").read_text())
    assert params["env"] == "CartPole-v1"
    assert params["train_batch_size"] == 200 and params["model"]["fcnet_hiddens"] == [16]
    assert params["gamma"] == 0.99 and params["lambda"] == 1.0  # the full resolved config, defaults included
    results = read_results(trial)
    assert [r["training_iteration"] for r in results] == [1, 2]
    assert [r["timesteps_total"] for r in results] == [200, 400]
    assert "kl" in results[-1]["info"]["learner"]["default_policy"]
    for n in (1, 2):
        assert (trial / f"checkpoint_{n:06d}" / "rltune_checkpoint.json").exists()
    iter_lines = [line for line in out.splitlines() if line.startswith("iter ")]
    assert len(iter_lines) == 2
    assert re.match(r"iter +2 +timesteps +400 +reward_mean +[\d.]+ +len_mean +[\d.]+ +time +[\d.]+s +[\d,]+ steps/s", iter_lines[1])
    assert "stopped: training_iteration = 2 >= 2" in out
    assert f"checkpoint: {trial / 'checkpoint_000002'}\n" in out
    assert f"trial dir:  {trial} " in out


def test_train_stops_on_an_evaluation_key_and_shows_the_evaluations(tmp_path, capsys):
    config = json.dumps({**TINY, "evaluation_interval": 2, "evaluation_duration": 2})
    code, out, err = run(
        capsys, *train_argv(tmp_path, "--name", "ev", "--stop", '{"training_iteration": 3, "evaluation/episode_reward_mean": 1e9}', config=config)
    )
    assert code == 0, err
    assert [r["evaluation"]["episodes_this_iter"] for r in read_results(tmp_path / "ev")] == [2, 2, 0]
    iter_lines = [line for line in out.splitlines() if line.startswith("iter ")]
    assert all(re.search(r"eval_reward_mean [\d.]+$", line) for line in iter_lines[:2])
    assert "eval_reward_mean" not in iter_lines[2]
    assert "stopped: training_iteration = 3 >= 3" in out


def test_checkpoint_at_end_only_and_a_second_run_gets_its_own_dir(tmp_path, capsys):
    argv = train_argv(tmp_path, "--name", "same", "--stop", '{"timesteps_total": 300}', "--checkpoint-at-end")
    assert run(capsys, *argv)[0] == 0
    assert run(capsys, *argv)[0] == 0
    for trial in (tmp_path / "same", tmp_path / "same_1"):
        assert sorted(p.name for p in trial.glob("checkpoint_*")) == ["checkpoint_000002"]
        assert len(read_results(trial)) == 2


def test_default_results_dir_and_trial_name_nan_results_and_a_checkpoint_at_the_end(tmp_path, capsys, monkeypatch):
    # MountainCar episodes last 200 steps: with 50-step iterations no episode ends, so the
    # reward mean is NaN; NaN never satisfies a stop criterion and is written as NaN.
    monkeypatch.setenv("RLTUNE_RESULTS_DIR", str(tmp_path))
    config = json.dumps({**TINY, "train_batch_size": 50, "sgd_minibatch_size": 50})
    code, out, err = run(
        capsys, "train", "--run", "ppo", "--env", "MountainCar-v0", "--config", config,
        "--stop", '{"episode_reward_mean": -1000, "training_iteration": 2}',
    )  # fmt: skip
    assert code == 0, err
    (trial,) = tmp_path.iterdir()
    assert re.fullmatch(r"PPO_MountainCar-v0_\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d", trial.name)
    results = read_results(trial)
    assert len(results) == 2 and all(math.isnan(r["episode_reward_mean"]) for r in results)
    assert "NaN" in (trial / "result.json").read_text()
    assert "stopped: training_iteration = 2 >= 2" in out
    assert "reward_mean       nan" in out
    # checkpoint_at_end is on by default, as in study files: the trial can be rolled out or resumed
    assert [p.name for p in trial.glob("checkpoint_*")] == ["checkpoint_000002"]
    assert f"checkpoint: {trial / 'checkpoint_000002'}" in out


def test_no_checkpoint_at_end_saves_none_and_says_how_to_get_one(tmp_path, capsys):
    code, out, err = run(capsys, *train_argv(tmp_path, "--name", "none", "--stop", '{"training_iteration": 1}',
                                             "--no-checkpoint-at-end"))
    assert code == 0, err
    assert not list((tmp_path / "none").glob("checkpoint_*"))
    assert "checkpoint: none saved (--checkpoint-at-end saves one when training stops" in out


def test_train_file_with_flags_overriding_it(tmp_path, capsys):
    path = tmp_path / "study.yaml"
    path.write_text(
        f"name: from-file\nrun: PPO\nstop: {{training_iteration: 3}}\nresults_dir: {tmp_path / 'r'}\n"
        "checkpoint_at_end: true\n"
        "config:\n  env: CartPole-v1\n  train_batch_size: 200\n  rollout_fragment_length: 50\n"
        "  sgd_minibatch_size: 100\n  num_sgd_iter: 2\n  seed: 0\n  model: {fcnet_hiddens: [16], fcnet_activation: relu}\n"
    )
    code, out, err = run(
        capsys, "train", "-f", str(path), "--stop", '{"training_iteration": 1}', "--no-checkpoint-at-end",
        "--config", '{"seed": 3, "model": {"fcnet_hiddens": [8]}}', "--log-level", "info",
    )  # fmt: skip
    assert code == 0, err
    trial = tmp_path / "r" / "from-file"
    assert len(read_results(trial)) == 1  # --stop replaced the file's stop
    assert not list(trial.glob("checkpoint_*"))  # --no-checkpoint-at-end beat the file
    params = json.loads((trial / "params.json").read_text())
    assert params["env"] == "CartPole-v1"  # config.env is accepted
    assert params["seed"] == 3 and params["train_batch_size"] == 200  # --config merged into the file's config
    assert params["model"]["fcnet_hiddens"] == [8] and params["model"]["fcnet_activation"] == "relu"
    assert params["log_level"] == "INFO"
    assert logging.getLogger().level == logging.INFO


def test_show_config_prints_every_default(capsys):
    code, out, err = run(capsys, "train", "--run", "ppo", "--show-config")
    assert code == 0, err
    assert out.startswith("# PPO default config")
    for line in ("num_sgd_iter: 30  #", "lambda: 1.0  # GAE lambda.", "env_config: {}  #", "  fcnet_hiddens: [256, 256]  #"):
        assert line in out


def test_help_lists_the_subcommands(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert re.search(r"^\s+train\s", out, re.M) and re.search(r"^\s+rollout\s", out, re.M)


def test_importing_the_cli_does_not_load_torch():
    """``rltune --help`` must stay fast: the trainers (and torch) load only when a command runs."""
    code = "import sys, rltune.orchestrator, rltune.orchestrator.cli; print(sorted({'torch', 'rltune.trainers'} & set(sys.modules)))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == "[]", proc.stderr


# -- rollout -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """A trial directory with a CartPole checkpoint after 2 iterations."""
    results = tmp_path_factory.mktemp("results")
    code = main(train_argv(results, "--name", "r", "--stop", '{"training_iteration": 2}', "--checkpoint-at-end"))
    assert code == 0
    return results / "r"


def test_rollout_prints_the_mean_return(trained, capsys):
    code, out, err = run(capsys, "rollout", str(trained / "checkpoint_000002"), "--episodes", "3")
    assert code == 0, err
    match = re.search(r"episode_reward_mean: ([\d.]+) over 3 deterministic episodes", out)
    assert match and 8.0 <= float(match.group(1)) <= 500.0
    assert "(iteration 2, 400 timesteps)" in out


def test_rollout_steps_runs_whole_episodes_until_that_many_steps(trained, capsys):
    code, out, err = run(capsys, "rollout", str(trained), "--steps", "150")  # a trial dir: its latest checkpoint
    assert code == 0, err
    assert f"checkpoint {trained / 'checkpoint_000002'}" in out
    steps = int(re.search(r"([\d,]+) steps\)", out).group(1).replace(",", ""))
    assert steps >= 150


def test_rollout_env_override(trained, capsys):
    code, out, err = run(capsys, "rollout", str(trained), "--episodes", "4", "--env", "rltune-test-constant")
    assert code == 0, err
    assert "episode_reward_mean: 7.000 over 4 deterministic episodes" in out


def test_rollout_of_a_checkpoint_whose_env_is_unknown_here_points_to_env(tmp_path, capsys, monkeypatch):
    from rltune.env import _registry

    name = "rltune-test-constant-2"
    register_env(name, lambda ctx: ConstantEnv(ctx))
    code, _, err = run(capsys, "train", "--run", "PPO", "--env", name, "--config", TINY_JSON, "--results-dir",
                       str(tmp_path), "--name", "c", "--stop", '{"training_iteration": 1}', "--checkpoint-at-end")  # fmt: skip
    assert code == 0, err
    monkeypatch.delitem(_registry._ENV_REGISTRY, name)  # as in a new process that never registered it
    code, out, err = run(capsys, "rollout", str(tmp_path / "c"))
    assert code == 2
    assert f"env {name!r} is not a gymnasium id" in err and "--env and --config override it" in err
    code, out, err = run(capsys, "rollout", str(tmp_path / "c"), "--episodes", "2", "--env", "rltune-test-constant")
    assert code == 0 and "episode_reward_mean: 7.000 over 2" in out


# -- RLlib's flags: train --steps / --local-dir, rollout --run / --out ---------------------------------
def test_train_steps_stops_after_that_many_timesteps_in_local_dir(tmp_path, capsys):
    code, out, err = run(capsys, "train", "--run", "PPO", "--env", "CartPole-v1", "--config", TINY_JSON,
                         "--local-dir", str(tmp_path), "--name", "steps", "--steps", "300")  # fmt: skip
    assert code == 0, err
    assert [r["timesteps_total"] for r in read_results(tmp_path / "steps")] == [200, 400]
    assert "stopped: timesteps_total = 400 >= 300" in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--steps", "0"], "invalid --steps: must be >= 1, but got 0"),
        (["--steps", "100", "--stop", '{"timesteps_total": 50}'],
         "invalid --steps: the stop criteria have timesteps_total: 50 already; give it once"),
    ],
)
def test_bad_train_steps_exits_2(tmp_path, capsys, argv, message):
    code, out, err = run(capsys, *train_argv(tmp_path, *argv))
    assert code == 2 and message in err and not list(tmp_path.iterdir())


def test_rollout_out_writes_every_step_as_json_lines(trained, tmp_path, capsys):
    path = tmp_path / "rollouts.jsonl"
    code, out, err = run(capsys, "rollout", str(trained), "--run", "PPO", "--env", "CartPole-v1", "--episodes", "3",
                         "--out", str(path), "--save-info", "--no-render")  # fmt: skip
    assert code == 0, err
    steps = [json.loads(line) for line in path.read_text().splitlines()]
    assert sorted({s["episode"] for s in steps}) == [0, 1, 2]
    assert set(steps[0]) == {"episode", "t", "obs", "action", "reward", "next_obs", "terminated", "truncated", "info"}
    returns = []
    for episode in range(3):
        mine = [s for s in steps if s["episode"] == episode]
        assert [s["t"] for s in mine] == list(range(len(mine)))
        assert all(a["next_obs"] == b["obs"] for a, b in zip(mine, mine[1:]))  # consecutive steps chain
        assert (mine[-1]["terminated"] or mine[-1]["truncated"]) and not any(s["terminated"] for s in mine[:-1])
        assert len(mine[0]["obs"]) == 4 and mine[0]["action"] in (0, 1)
        returns.append(sum(s["reward"] for s in mine))
    assert f"episode_reward_mean: {sum(returns) / 3:.3f} over 3 deterministic episodes" in out
    assert f"steps written to {path}" in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--run", "DQN"], "invalid --run: is 'DQN', but {ckpt!r} is a checkpoint of 'PPO'; give --run PPO"),
        (["--run", "PPX"], "invalid --run: unknown algorithm 'PPX'; did you mean 'PPO'?"),
        (["--out", "{tmp}/missing/r.jsonl"], "invalid --out: the directory of '{tmp}/missing/r.jsonl' does not exist"),
        (["--out", "{tmp}"], "invalid --out: '{tmp}' is a directory"),
        (["--save-info"], "invalid --save-info: writes the steps' info dicts into the --out file: give --out FILE too"),
    ],
)
def test_bad_rollout_flags_exit_2_before_running_episodes(trained, tmp_path, capsys, monkeypatch, argv, message):
    from rltune.trainers import Trainer

    def no_trainer(*args, **kwargs):
        raise AssertionError("a trainer was built for bad flags")

    monkeypatch.setattr(Trainer, "from_checkpoint", no_trainer)
    argv = [a.format(tmp=tmp_path) for a in argv]
    code, out, err = run(capsys, "rollout", str(trained), *argv)
    assert code == 2
    assert message.format(ckpt=str(trained / "checkpoint_000002"), tmp=tmp_path) in err


# -- rollout of a checkpoint runs no code it names (but envs and callbacks of the expected kinds) --------
def touch_marker(*args, **kwargs):
    """Neither an env class, callbacks nor a task function: creates ``$RLTUNE_TEST_MARKER`` when called."""
    Path(os.environ["RLTUNE_TEST_MARKER"]).write_text("called")


def _crafted(trained: Path, dst: Path, **config) -> Path:
    """A copy of the trained checkpoint whose saved config has ``config`` set, its checksum made consistent."""
    from rltune.trainers.checkpoints import _checkpoint as ckpt

    src = trained / "checkpoint_000002"
    dst.mkdir()
    for name in os.listdir(src):
        (dst / name).write_bytes((src / name).read_bytes())
    metadata = json.loads((dst / ckpt.METADATA_FILE).read_text())
    metadata["config"].update(config)
    metadata[ckpt.METADATA_CHECKSUM] = ckpt.metadata_checksum(metadata)
    (dst / ckpt.METADATA_FILE).write_text(json.dumps(metadata))
    return dst


MARKER_FN = f"{__name__}:touch_marker"


@pytest.mark.parametrize(
    "key, config",
    [
        # Built as Popen(EnvContext(env_config)), Popen would run the dict's keys: touch <marker>.
        ("env", lambda marker: {"env": "subprocess:Popen", "env_config": {"touch": 1, str(marker): 2}}),
        ("env", lambda marker: {"env": MARKER_FN}),
        ("callbacks", lambda marker: {"callbacks": MARKER_FN}),
        ("env_task_fn", lambda marker: {"env_task_fn": "os:system"}),
    ],
    ids=["env Popen", "env function", "callbacks function", "env_task_fn"],
)
def test_rollout_of_a_checkpoint_naming_code_exits_2_and_runs_nothing(trained, tmp_path, capsys, monkeypatch, key, config):
    marker = tmp_path / "marker"
    monkeypatch.setenv("RLTUNE_TEST_MARKER", str(marker))
    path = _crafted(trained, tmp_path / "ckpt", **config(marker))
    code, out, err = run(capsys, "rollout", str(path), "--episodes", "1")
    assert code == 2
    assert err.startswith(f"rltune rollout: error: checkpoint {str(path)!r}: config key {key!r}")
    assert len(err.splitlines()) == 1 and "Traceback" not in err and out == ""
    assert not marker.exists(), "rollout ran code the checkpoint names"


def test_rollout_overrides_what_a_checkpoint_may_not_name(trained, tmp_path, capsys, monkeypatch):
    marker = tmp_path / "marker"
    monkeypatch.setenv("RLTUNE_TEST_MARKER", str(marker))
    path = _crafted(trained, tmp_path / "ckpt", env=MARKER_FN, callbacks=MARKER_FN, env_task_fn=MARKER_FN)
    overrides = json.dumps({"callbacks": None, "env_task_fn": None})
    code, out, err = run(capsys, "rollout", str(path), "--episodes", "2", "--env", "rltune-test-constant", "--config", overrides)
    assert code == 0, err
    assert "episode_reward_mean: 7.000 over 2" in out
    assert not marker.exists()


def test_rollout_of_a_checkpoint_whose_env_is_an_env_class_by_import_string(trained, tmp_path, capsys):
    path = _crafted(trained, tmp_path / "ckpt", env=f"{ConstantEnv.__module__}:ConstantEnv", env_config={"reward": 3})
    code, out, err = run(capsys, "rollout", str(path), "--episodes", "2")
    assert code == 0, err
    assert "episode_reward_mean: 3.000 over 2" in out


# -- bad input: exit 2, one message on stderr, no traceback ----------------------------------
BAD_TRAIN = {
    "unknown algorithm": (
        ["--run", "PPOO", "--env", "CartPole-v1"],
        "invalid config: unknown algorithm 'PPOO'; did you mean 'PPO'?",
    ),
    "unknown config key": (
        ["--run", "PPO", "--env", "CartPole-v1", "--config", '{"lr_": 0.1}'],
        "invalid PPO config: lr_: unknown key; did you mean 'lr'?",
    ),
    "unknown nested config key": (
        ["--run", "PPO", "--env", "CartPole-v1", "--config", '{"model": {"fcnet_hidden": [16]}}'],
        "invalid PPO config: model.fcnet_hidden: unknown key; did you mean 'fcnet_hiddens'?",
    ),
    "malformed --config": (
        ["--run", "PPO", "--env", "CartPole-v1", "--config", '{"lr": 0.1,}'],
        "invalid --config: not valid JSON: Expecting property name enclosed in double quotes: line 1 column 12 (char 11)",
    ),
    "--config not an object": (
        ["--run", "PPO", "--env", "CartPole-v1", "--config", "[0.1]"],
        "invalid --config: must be a JSON object",
    ),
    "malformed --stop": (
        ["--run", "PPO", "--env", "CartPole-v1", "--stop", "{episode_reward_mean: 1}"],
        "invalid --stop: not valid JSON: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
    ),
    "--stop value not a number": (
        ["--run", "PPO", "--env", "CartPole-v1", "--stop", '{"timesteps_total": "lots"}'],
        "invalid --stop: timesteps_total: the value must be a number, but got 'lots'",
    ),
    "unknown env": (
        ["--run", "PPO", "--env", "CartPol-v1"],
        "env 'CartPol-v1' is not a gymnasium id nor a name given to register_env(); did you mean 'CartPole-v1'?",
    ),
    "env cannot be created": (
        ["--run", "PPO", "--env", "CartPole-v1", "--config", '{"env_config": {"bogus": 1}}'],
        "env 'CartPole-v1' (worker 0, env 0) could not be created: TypeError:",
    ),
    "env breaks the gymnasium API": (
        ["--run", "PPO", "--env", "rltune-test-bad-obs"],
        "env 'rltune-test-bad-obs' (worker 0, env 0) breaks the gymnasium API",
    ),
    "no algorithm": (["--env", "CartPole-v1"], "no algorithm given: use --run ALGO"),
    "no env": (["--run", "PPO"], "no env given: use --env ENV"),
    "negative checkpoint freq": (
        ["--run", "PPO", "--env", "CartPole-v1", "--checkpoint-freq", "-1"],
        "invalid --checkpoint-freq: must be >= 0, but got -1",
    ),
    "negative seed": (
        ["--run", "PPO", "--env", "CartPole-v1", "--config", '{"seed": -1}'],
        "invalid PPO config: seed: Input should be greater than or equal to 0",
    ),
    "bad log_level in config": (
        ["--run", "PPO", "--env", "CartPole-v1", "--config", '{"log_level": "LOUD"}'],
        "invalid PPO config: log_level: Input should be 'DEBUG', 'INFO', 'WARN', 'WARNING' or 'ERROR'",
    ),
}


@pytest.mark.parametrize("argv, message", BAD_TRAIN.values(), ids=BAD_TRAIN.keys())
def test_bad_train_input_exits_2_with_one_message(tmp_path, capsys, argv, message):
    code, out, err = run(capsys, "train", *argv, "--results-dir", str(tmp_path))
    assert code == 2
    assert err.startswith("rltune train: error: ")
    assert message in err
    assert err.count("error:") == 1 and "Traceback" not in err
    assert not list(tmp_path.iterdir())  # nothing written for a trial that never started


@pytest.mark.parametrize("flag, ref", [("--env", "rltune_broken_mod:Env"), ("--run", "rltune_broken_mod:Trainer")])
def test_import_string_to_a_module_that_fails_exits_2(tmp_path, capsys, monkeypatch, flag, ref):
    # A user's module with a bug: its own code raises while it is imported.
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "rltune_broken_mod.py").write_text("raise RuntimeError('a bug in the module')\n")
    monkeypatch.syspath_prepend(str(tmp_path / "code"))
    argv = {"--env": "CartPole-v1", "--run": "PPO", flag: ref}
    code, out, err = run(capsys, "train", "--run", argv["--run"], "--env", argv["--env"], "--results-dir", str(tmp_path / "r"))
    assert code == 2
    assert f"cannot import {ref!r} (RuntimeError: a bug in the module)" in err
    assert err.count("error:") == 1 and "Traceback" not in err


def test_unknown_stop_key_is_an_error_after_the_first_iteration(tmp_path, capsys):
    code, out, err = run(capsys, *train_argv(tmp_path, "--name", "s", "--stop", '{"episode_reward_meen": 100}'))
    assert code == 2
    assert err == (
        "rltune train: error: invalid --stop: 'episode_reward_meen' is not a key of the training results; "
        "did you mean 'episode_reward_mean'?\n"
    )
    assert len(read_results(tmp_path / "s")) == 1


@pytest.mark.parametrize(
    "text, message",
    [
        (None, "the file does not exist"),
        ("run: PPO\nenv: CartPole-v1\nconfig: [1, 2\n", "line 4, column 1: not valid YAML"),
        ("run: PPO\nenv: CartPole-v1\nstpo: {}\n", "line 3: stpo: unknown field; did you mean 'stop'?"),
        ("run: PPO\nenv: CartPole-v1\nconfig: {env: Pendulum-v1}\n", "env is 'CartPole-v1' but config.env is 'Pendulum-v1'"),
    ],
    ids=["missing", "malformed", "unknown field", "two envs"],
)
def test_bad_train_file_exits_2_naming_the_file(tmp_path, capsys, text, message):
    path = tmp_path / "bad.yaml"
    if text is not None:
        path.write_text(text)
    code, out, err = run(capsys, "train", "-f", str(path))
    assert code == 2
    assert err.startswith(f"rltune train: error: invalid train file {str(path)!r}: ")
    assert message in err and "Traceback" not in err


@pytest.mark.parametrize(
    "make, argv, message",
    [
        (False, ["--episodes", "2"], "checkpoint {path!r} does not exist"),
        (True, ["--episodes", "2"], "{path!r} is not an rltune checkpoint: rltune_checkpoint.json is missing"),
        (True, ["--episodes", "0"], "invalid --episodes: must be >= 1, but got 0"),
    ],
)
def test_bad_rollout_input_exits_2(tmp_path, capsys, make, argv, message):
    path = tmp_path / "checkpoint_000001"
    if make:
        path.mkdir()
    code, out, err = run(capsys, "rollout", str(path), *argv)
    assert code == 2
    assert err.startswith("rltune rollout: error: ")
    assert message.format(path=str(path)) in err and "Traceback" not in err


def test_argparse_usage_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as info:
        main(["train", "--checkpoint-freq", "often"])
    assert info.value.code == 2
    assert "argument --checkpoint-freq: invalid int value: 'often'" in capsys.readouterr().err


# -- the console script, in a real process -----------------------------------------------------
needs_script = pytest.mark.skipif(not RLTUNE.exists(), reason=f"console script {RLTUNE} not installed")


@needs_script
def test_console_script_bad_input_exits_2_without_traceback(tmp_path):
    proc = subprocess.run(
        [str(RLTUNE), "train", "--run", "PPOO", "--env", "CartPole-v1", "--results-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.startswith("rltune train: error: invalid config: unknown algorithm 'PPOO'; did you mean 'PPO'?")
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1


@needs_script
def test_ctrl_c_saves_a_checkpoint_and_exits_130(tmp_path):
    """No stop criteria: trains until SIGINT; then a checkpoint, the workers stopped, a message, no traceback."""
    config = json.dumps({**TINY, "num_workers": 1})
    proc = subprocess.Popen(
        [str(RLTUNE), "train", "--run", "PPO", "--env", "CartPole-v1", "--config", config,
         "--results-dir", str(tmp_path), "--name", "forever"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        lines = []
        while not any(line.startswith("iter    2") for line in lines):
            line = proc.stdout.readline()
            assert line, f"rltune exited early: {proc.stderr.read()}"
            lines.append(line)
        assert "no stop criteria (--stop): training until Ctrl-C\n" in lines
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert re.search(r"interrupted \(Ctrl-C\) after iteration \d+", out)
    checkpoint = re.search(r"checkpoint: (\S+)", out).group(1)
    assert Path(checkpoint).parent == tmp_path / "forever"
    assert (Path(checkpoint) / "rltune_checkpoint.json").exists()
    # the TensorBoard event file was closed with every result in it
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(tmp_path / "forever"), size_guidance={"scalars": 0})
    events.Reload()
    results = [json.loads(line) for line in (tmp_path / "forever" / "result.json").read_text().splitlines()]
    assert [e.step for e in events.Scalars("training_iteration")] == [r["timesteps_total"] for r in results]


@needs_script
def test_console_script_imports_nothing_from_the_current_directory_and_says_how_to(tmp_path):
    """rltune puts no directory on the import path: a module of the current directory needs PYTHONPATH=."""
    (tmp_path / "my_envs.py").write_text(
        "import gymnasium as gym, numpy as np\n"
        "class One(gym.Env):\n"
        "    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)\n"
        "    action_space = gym.spaces.Discrete(2)\n"
        "    def __init__(self, ctx): pass\n"
        "    def reset(self, *, seed=None, options=None):\n"
        "        super().reset(seed=seed)\n"
        "        return np.zeros(2, np.float32), {}\n"
        "    def step(self, action):\n"
        "        return np.zeros(2, np.float32), 1.0, True, False, {}\n"
    )
    argv = [str(RLTUNE), "train", "--run", "PPO", "--env", "my_envs:One", "--config", TINY_JSON,
            "--stop", '{"training_iteration": 1}', "--results-dir", "results", "--name", "one"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 2, proc.stderr
    assert ("'my_envs' is not importable; my_envs.py is in the current directory, which rltune does not put on the "
            "import path: run with PYTHONPATH=. or install your package") in proc.stderr
    assert proc.stderr.count("error:") == 1 and "Traceback" not in proc.stderr
    as_module = subprocess.run([sys.executable, "-m", "rltune.orchestrator.cli", *argv[1:]], cwd=tmp_path,
                               capture_output=True, text=True, timeout=120, env=env)
    assert as_module.returncode == 2 and "my_envs.py is in the current directory" in as_module.stderr  # -m's too
    proc = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=120, env={**env, "PYTHONPATH": "."})
    assert proc.returncode == 0, proc.stderr
    assert "reward_mean     1.000" in proc.stdout
    assert (tmp_path / "results" / "one" / "result.json").exists()
