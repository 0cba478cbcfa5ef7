"""Envs on the old gym API run through gymnasium's step-API conversion (issue 26); Atari ids point to ale-py."""

from __future__ import annotations

import importlib.util
import logging

import pytest

from rltune.env import EnvContext, OldGymApi
from rltune.env._registry import resolve_env
from rltune.errors import ConfigError, EnvError
from rltune.trainers import PPO, PPOConfig

from .old_gym_envs import OldCorridor, OldTimeLimited

TINY = {"train_batch_size": 64, "sgd_minibatch_size": 64, "num_sgd_iter": 1, "rollout_fragment_length": 64,
        "model": {"fcnet_hiddens": [8]}, "seed": 0}


def test_old_api_step_and_reset_become_gymnasiums():
    env = OldGymApi(OldTimeLimited({"length": 2}))
    obs, info = env.reset(seed=3)
    assert obs.tolist() == [0.0] and info == {} and env.unwrapped.seeds == [3]
    assert env.step(1)[2:4] == (False, False)
    _, reward, terminated, truncated, _ = env.step(1)  # the goal: done without TimeLimit.truncated
    assert (reward, terminated, truncated) == (1.0, True, False)
    env.reset()
    env.step(0), env.step(0)
    _, _, terminated, truncated, info = env.step(0)  # old TimeLimit's mark: truncated, not terminated
    assert (terminated, truncated) == (False, True) and "TimeLimit.truncated" not in info


@pytest.mark.parametrize("num_workers", [0, 1])
def test_a_trainer_detects_an_old_api_env_warns_once_and_trains_on_it(num_workers, caplog):
    with caplog.at_level(logging.WARNING):
        trainer = PPO(config={**TINY, "num_workers": num_workers, "env_config": {"length": 3}},
                      env="env.old_gym_envs:OldCorridor")
    try:
        result = trainer.train()
    finally:
        trainer.stop()
    assert result["timesteps_total"] == 64 and result["episodes_this_iter"] > 0
    notes = [r for r in caplog.records if "old gym API" in r.getMessage()]
    assert len(notes) <= 1 and (num_workers or notes), caplog.text  # remote workers log in their own process
    if notes:
        assert "rltune.env.OldGymApi" in notes[0].getMessage()


def test_auto_wrap_old_gym_envs_false_refuses_them_with_the_fix():
    with pytest.raises(EnvError, match=r"env 'env.old_gym_envs:OldCorridor' \(worker 0, env 0\) is on the old gym "
                                       r"API .* auto_wrap_old_gym_envs is false: update it"):
        PPO(config={**TINY, "auto_wrap_old_gym_envs": False}, env="env.old_gym_envs:OldCorridor")
    config = PPOConfig().environment(OldCorridor, auto_wrap_old_gym_envs=False)  # RLlib's builder keyword
    assert config.to_dict()["auto_wrap_old_gym_envs"] is False


def test_an_old_api_env_inside_a_wrapper_is_refused_naming_the_wrapper():
    import gymnasium as gym

    spec = resolve_env(lambda ctx: gym.wrappers.RecordEpisodeStatistics(OldCorridor(ctx)))
    from rltune.env._build import build_env

    with pytest.raises(EnvError, match="inside a wrapper \\(RecordEpisodeStatistics\\)"):
        build_env(spec, EnvContext({}, worker_index=0), check=False)


@pytest.mark.skipif(importlib.util.find_spec("ale_py") is not None, reason="ale-py is installed")
@pytest.mark.parametrize("env_id", ["PongNoFrameskip-v4", "ALE/Pong-v5", "BreakoutDeterministic-v4", "Pong-ram-v4"])
def test_atari_ids_point_to_ale_py(env_id):
    with pytest.raises(ConfigError, match=rf"env '{env_id}' is an Atari game.*pip install ale-py"):
        resolve_env(env_id)
    with pytest.raises(ConfigError, match="pip install ale-py"):
        PPO(config=TINY, env=env_id)


def test_ids_that_are_not_atari_keep_their_own_error():
    with pytest.raises(ConfigError, match="did you mean 'CartPole-v1'") as info:
        resolve_env("CartPol-v1")
    assert "ale-py" not in str(info.value)
