"""A round of sampling counts a vector env's sub-envs on remote workers too (PPO sizes its rounds by it)."""

from __future__ import annotations

import gymnasium as gym
from gymnasium.vector import SyncVectorEnv

from rltune.trainers import PPO


class FourCartPoles(SyncVectorEnv):
    """Four CartPoles stepped as one vector env (a class: each worker builds its own)."""

    def __init__(self, config=None) -> None:
        super().__init__([lambda: gym.make("CartPole-v1")] * 4)


CONFIG = {"env": FourCartPoles, "seed": 0, "rollout_fragment_length": 25, "train_batch_size": 200,
          "sgd_minibatch_size": 100, "num_sgd_iter": 1, "model": {"fcnet_hiddens": [8]}}


def test_a_remote_workers_round_counts_its_vector_envs_sub_envs(tmp_path) -> None:
    with PPO({**CONFIG, "num_workers": 2}, results_dir=tmp_path) as trainer:
        assert trainer.workers.steps_per_round() == 2 * 4 * 25
        result = trainer.train()
        assert result["timesteps_this_iter"] == 200  # one round of 2 workers x 4 sub-envs x 25 steps, not four


def test_a_local_workers_round_counts_them_as_well(tmp_path) -> None:
    with PPO({**CONFIG, "num_workers": 0}, results_dir=tmp_path) as trainer:
        assert trainer.workers.steps_per_round() == 4 * 25
