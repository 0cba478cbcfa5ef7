"""RLlib's old names carry over: PPOTrainer/DQNTrainer, DEFAULT_CONFIG, pretty_print, save_checkpoint/load_checkpoint."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import yaml

import rltune.trainers.dqn as dqn
import rltune.trainers.ppo as ppo
from rltune import tune
from rltune.errors import CheckpointError
from rltune.trainers import DQN, PPO, DQNTrainer, PPOConfig, PPOTrainer, pretty_print

TINY = {"train_batch_size": 64, "sgd_minibatch_size": 64, "num_sgd_iter": 1, "rollout_fragment_length": 32,
        "model": {"fcnet_hiddens": [8]}, "seed": 0}


def test_old_trainer_names_are_the_trainers():
    assert PPOTrainer is PPO is ppo.PPOTrainer is ppo.PPO
    assert DQNTrainer is DQN is dqn.DQNTrainer is dqn.DQN
    assert ppo.PPOConfig is PPOConfig


def test_default_config_is_each_trainers_full_default_config_and_used_as_rllib_users_did():
    assert ppo.DEFAULT_CONFIG == PPO.get_default_config() and dqn.DEFAULT_CONFIG == DQN.get_default_config()
    assert ppo.DEFAULT_CONFIG["num_sgd_iter"] == 30 and "target_network_update_freq" in dqn.DEFAULT_CONFIG
    config = copy.deepcopy(ppo.DEFAULT_CONFIG)  # RLlib 1.x: config = ppo.DEFAULT_CONFIG.copy(); config[...] = ...
    config.update(TINY)
    trainer = ppo.PPOTrainer(config=config, env="CartPole-v1")
    try:
        assert trainer.train()["timesteps_total"] == 64
    finally:
        trainer.stop()
    assert ppo.DEFAULT_CONFIG == PPO.get_default_config()  # untouched
    assert PPOConfig.from_dict(ppo.DEFAULT_CONFIG).to_dict() == ppo.DEFAULT_CONFIG


def test_pretty_print_is_yaml_of_the_result_without_config_and_hist_stats():
    result = {
        "episode_reward_mean": np.float32(21.5),
        "timesteps_total": np.int64(4000),
        "info": {"learner": {"default_policy": {"kl": 0.01, "grad_gnorm": math.nan}}},
        "hist_stats": {"episode_reward": [1.0, 2.0]},
        "config": {"lr": 0.1},
        "custom_metrics": {},
        "evaluation": None,
        "sampled": np.array([1, 2]),
    }
    text = pretty_print(result)
    assert tune.pretty_print is pretty_print  # where RLlib users found it (ray.tune.logger)
    assert "hist_stats" not in text and "config" not in text and "evaluation" not in text
    assert "info:\n  learner:\n    default_policy:\n" in text  # nested blocks, indented
    parsed = yaml.safe_load(text)
    assert parsed["episode_reward_mean"] == 21.5 and parsed["timesteps_total"] == 4000
    assert parsed["sampled"] == [1, 2] and math.isnan(parsed["info"]["learner"]["default_policy"]["grad_gnorm"])
    assert "episode_reward_mean" not in yaml.safe_load(pretty_print(result, exclude=["episode_reward_mean"]))


def test_save_checkpoint_and_load_checkpoint_are_save_and_restore(tmp_path):
    trainer = PPO(config=TINY, env="CartPole-v1")
    other = PPO(config={**TINY, "seed": 1}, env="CartPole-v1")
    try:
        trainer.train()
        (tmp_path / "ckpt").mkdir()  # Tune made the directory; the checkpoint goes in it
        path = trainer.save_checkpoint(str(tmp_path / "ckpt"))
        assert path == str((tmp_path / "ckpt").resolve())
        other.load_checkpoint(path)
        assert other.iteration == 1 and other.timesteps_total == 64
        for name, weight in trainer.get_policy().get_weights().items():
            np.testing.assert_array_equal(weight, other.get_policy().get_weights()[name])
        (tmp_path / "full").mkdir()
        (tmp_path / "full" / "notes.txt").write_text("mine")
        with pytest.raises(CheckpointError, match="choose a new or empty directory"):
            trainer.save_checkpoint(str(tmp_path / "full"))
    finally:
        trainer.stop()
        other.stop()
