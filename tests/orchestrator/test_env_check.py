"""A trainer study's env is built and checked once before its first trial: a broken one is exit 2 (ConfigError /
EnvError in Python), with the message a trial would have hit, and no trial runs."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rltune import tune
from rltune.errors import ConfigError, EnvError
from rltune.orchestrator._env_check import env_candidates
from rltune.orchestrator._spec import make_plan
from rltune.orchestrator.cli import main

TINY = "{train_batch_size: 32, rollout_fragment_length: 32, sgd_minibatch_size: 32, num_sgd_iter: 1}"


def _study(tmp_path, env: str) -> str:
    path = tmp_path / "study.yaml"
    path.write_text(f"name: envs\nrun: PPO\nmetric: episode_reward_mean\nstop: {{training_iteration: 1}}\n"
                    f"env: {env}\nconfig: {TINY}\n")
    return str(path)


CASES = {
    "unknown id": ("CartPol-v1", "invalid env: env 'CartPol-v1' is not a gymnasium id nor a name given to "
                                 "register_env(); did you mean 'CartPole-v1'?"),
    "missing module": ("rltune_no_such_module:Env", "cannot import 'rltune_no_such_module:Env' "
                                                    "(ModuleNotFoundError: No module named 'rltune_no_such_module')"),
    "module failing on import": ("rltune_env_mod_bug:Env", "cannot import 'rltune_env_mod_bug:Env' "
                                                           "(RuntimeError: a bug in the env module)"),
    "a grid with one bad id": ("{grid_search: [CartPole-v1, NoSuchEnv-v0]}",
                                 "env 'NoSuchEnv-v0' is not a gymnasium id nor a name given to register_env()"),
}


@pytest.mark.parametrize("env, message", CASES.values(), ids=CASES.keys())
def test_a_broken_env_exits_2_before_any_trial(tmp_path, capsys, monkeypatch, env, message):
    (tmp_path / "rltune_env_mod_bug.py").write_text("raise RuntimeError('a bug in the env module')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    code = main(["tune", _study(tmp_path, env), "--results-dir", str(tmp_path / "r"), "--quiet"])
    out, err = capsys.readouterr()
    assert code == 2, out + err
    assert err.startswith("rltune tune: error: ") and message in err, err
    assert "Traceback" not in err
    assert not list((tmp_path / "r" / "envs").glob("trial_*"))  # no trial ran
    assert not (tmp_path / "r" / "envs" / "study.journal").exists()  # nor was the study stored


class _NoReset(gym.Env):
    """Breaks the gymnasium API: reset returns the observation alone."""

    observation_space = gym.spaces.Box(-1, 1, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, env_config=None):
        pass

    def reset(self, *, seed=None, options=None):
        return np.zeros(2, np.float32)

    def step(self, action):
        return np.zeros(2, np.float32), 0.0, True, False, {}


def test_an_env_class_breaking_the_gymnasium_api_is_an_env_error_in_python(tmp_path):
    with pytest.raises(EnvError, match="breaks the gymnasium API"):
        tune.run("PPO", config={"env": _NoReset, "train_batch_size": 32, "sgd_minibatch_size": 32},
                 stop={"training_iteration": 1}, results_dir=str(tmp_path), name="api", verbose=0)
    assert not list((tmp_path / "api").glob("trial_*"))


def test_an_env_config_entry_of_the_search_space_is_checked_with_each_value(tmp_path):
    from rltune.trainers import register_env

    def creator(ctx):
        if ctx["size"] > 3:
            raise ValueError(f"size {ctx['size']} is too big")
        return gym.make("CartPole-v1")

    register_env("rltune-test-sized", creator)
    plan = make_plan({"run": "PPO", "metric": "episode_reward_mean",
                      "config": {"env": "rltune-test-sized", "env_config": {"size": tune.grid_search([2, 5])},
                                 "lr": tune.uniform(0.001, 0.01)}})
    assert [(c["env_config"], c["when"]) for c in env_candidates(plan)] == [
        ({"size": 2}, ""), ({"size": 5}, "config.env_config.size = 5")]  # lr's values build no other env
    with pytest.raises(EnvError, match=r"could not be created: ValueError: size 5 is too big \(when "
                                       r"config.env_config.size = 5\)"):
        tune.run("PPO", config=plan.config, metric="episode_reward_mean", results_dir=str(tmp_path),
                 verbose=0)


def test_a_function_trainable_has_no_env_to_check(tmp_path):
    from .trainables import counter

    analysis = tune.run(counter, config={"env": "NoSuchEnv-v0", "steps": 1}, metric="score",
                        results_dir=str(tmp_path), verbose=0)
    assert [t.state for t in analysis.trials] == ["COMPLETE"]
    with pytest.raises(ConfigError):  # and a trainer's config is still validated as before
        tune.run("PPO", config={"env": "CartPole-v1", "no_such_key": 1}, results_dir=str(tmp_path), verbose=0)
