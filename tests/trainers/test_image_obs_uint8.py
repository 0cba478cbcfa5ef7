"""uint8 ``H x W x C`` images stay uint8 in the sampler's buffers, fragments, worker messages and batches.

They become float32 (the same numbers) only where a tensor for the model is
built, so training on them is the float path's, bit for bit.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces

from rltune.trainers import DQN, PPO
from rltune.trainers.sampling._sample_batch import NEW_OBS, OBS


class LightOrDark(gym.Env):
    """A 4x4x1 image, all dark (0) or all light (200): action 1 on light, 0 on dark pays 1; 8 steps an episode.

    ``env_config`` ``dtype``: the image's dtype (``uint8`` by default; ``float32`` holds the same numbers).
    """

    def __init__(self, config: Any) -> None:
        self.dtype = np.dtype(config.get("dtype", "uint8"))
        self.observation_space = spaces.Box(0, 255, (4, 4, 1), self.dtype)
        self.action_space = spaces.Discrete(2)
        self.t, self.light = 0, False

    def _obs(self) -> np.ndarray:
        return np.full((4, 4, 1), 200 if self.light else 0, dtype=self.dtype)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.t, self.light = 0, bool(self.np_random.integers(2))
        return self._obs(), {}

    def step(self, action):
        reward = float(int(action) == int(self.light))
        self.t += 1
        self.light = bool(self.np_random.integers(2))
        return self._obs(), reward, False, self.t >= 8, {}


def config(dtype: str = "uint8", **extra) -> dict:
    return {"env": LightOrDark, "env_config": {"dtype": dtype}, "seed": 1, "num_envs_per_worker": 2,
            "rollout_fragment_length": 32, "train_batch_size": 64, "sgd_minibatch_size": 32, "num_sgd_iter": 4,
            "lr": 3e-3, "model": {"fcnet_hiddens": [16]}, **extra}


@pytest.mark.parametrize("num_workers", [0, 1])
def test_images_stay_uint8_in_fragments_and_batches(num_workers):
    with PPO(config=config(num_workers=num_workers)) as trainer:
        result = trainer.workers.sample(64)  # through a worker message, with a remote worker
        (fragment,) = result.fragments[:1]
        assert fragment.columns[OBS].dtype == np.uint8 and fragment.columns[NEW_OBS].dtype == np.uint8
        assert set(np.unique(fragment.columns[OBS]).tolist()) <= {0, 200}
        batch = trainer.algorithm.postprocess(result)["default_policy"]
        assert batch[OBS].dtype == np.uint8


def test_ppo_on_uint8_images_is_the_float_path_bit_for_bit():
    weights, rewards = [], []
    for dtype in ("uint8", "float32"):
        with PPO(config=config(dtype)) as trainer:
            rewards.append([trainer.train()["episode_reward_mean"] for _ in range(3)])
            weights.append(trainer.get_policy().get_weights())
    assert rewards[0] == rewards[1]
    for name, value in weights[0].items():
        assert np.array_equal(value, weights[1][name]), name


def test_ppo_learns_on_uint8_images():
    with PPO(config=config(train_batch_size=256, rollout_fragment_length=128)) as trainer:
        for _ in range(15):
            result = trainer.train()
            if result["episode_reward_mean"] >= 7:
                break
    assert result["episode_reward_mean"] >= 7  # of 8; chance is 4


def test_dqn_replays_uint8_images():
    dqn = {"env": LightOrDark, "env_config": {}, "seed": 1, "learning_starts": 32, "train_batch_size": 32,
           "rollout_fragment_length": 16, "model": {"fcnet_hiddens": [16]}}
    with DQN(config=dqn) as trainer:
        for _ in range(3):
            trainer.train()
        replayed = trainer.algorithm.buffers["default_policy"].sample(8, np.random.default_rng(0))
        assert replayed[OBS].dtype == np.uint8 and replayed[NEW_OBS].dtype == np.uint8
        assert trainer.compute_single_action(np.full((4, 4, 1), 200, dtype=np.uint8)) in (0, 1)


def test_a_filter_keeps_float_rows():
    with PPO(config=config(observation_filter="MeanStdFilter")) as trainer:
        result = trainer.workers.local_worker.sample()
        assert result.fragments[0].columns[OBS].dtype == np.float32
        trainer.train()


def test_the_model_sees_floats():
    with PPO(config=config()) as trainer:
        policy = trainer.get_policy()
        rows = np.full((3, 16), 200, dtype=np.uint8)
        tensor = policy.obs_tensor(rows)
        assert tensor.dtype == torch.float32 and torch.equal(tensor, torch.full((3, 16), 200.0))
