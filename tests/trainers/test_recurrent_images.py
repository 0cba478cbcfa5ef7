"""A recurrent model gets float observations in its updates too when the env's images travel as uint8."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rltune.trainers import PPO, PPOPolicy


class TinyImages(gym.Env):
    """4x4x1 uint8 images; reward 1 for action 1 when the top-left pixel is bright."""

    def __init__(self, config: dict | None = None) -> None:
        self.observation_space = gym.spaces.Box(0, 255, (4, 4, 1), np.uint8)
        self.action_space = gym.spaces.Discrete(2)
        self.obs = np.zeros((4, 4, 1), np.uint8)
        self.t = 0

    def _draw(self) -> np.ndarray:
        self.obs = self.np_random.integers(0, 256, (4, 4, 1), dtype=np.uint8)
        return self.obs

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.t = 0
        return self._draw(), {}

    def step(self, action):
        reward = float(int(action) == int(self.obs[0, 0, 0] > 127))
        self.t += 1
        return self._draw(), reward, False, self.t >= 10, {}


class FloatOnlyGRU(nn.Module):
    """A GRU that refuses anything but float observations (what a torch layer needs)."""

    def __init__(self, obs_size: int, num_outputs: int, hidden: int = 8) -> None:
        super().__init__()
        self.hidden = hidden
        self.gru = nn.GRU(obs_size, hidden, batch_first=True)
        self.pi = nn.Linear(hidden, num_outputs)
        self.vf = nn.Linear(hidden, 1)
        self.dtypes: set[torch.dtype] = set()

    def get_initial_state(self) -> list[torch.Tensor]:
        return [torch.zeros(self.hidden)]

    def forward(self, obs: torch.Tensor, state: list[torch.Tensor], seq_lens: torch.Tensor | None):
        self.dtypes.add(obs.dtype)
        features, h = self.gru(obs.flatten(2) / 255.0, state[0][None])
        return self.pi(features), self.vf(features).squeeze(-1), [h[0]]


class ImageGRUPolicy(PPOPolicy):
    def make_model(self) -> nn.Module:
        return FloatOnlyGRU(self.preprocessor.size, int(self.action_space.n))


class ImageGRUPPO(PPO):
    policy_class = ImageGRUPolicy


def test_a_recurrent_model_learns_from_uint8_images_as_floats(tmp_path) -> None:
    config = {"num_workers": 0, "rollout_fragment_length": 20, "train_batch_size": 40, "sgd_minibatch_size": 20,
              "num_sgd_iter": 2, "seed": 0, "model": {"max_seq_len": 5}}
    with ImageGRUPPO(config=config, env=TinyImages, results_dir=tmp_path) as trainer:
        result = trainer.train()
        assert np.isfinite(result["info"]["learner"]["default_policy"]["total_loss"])
        assert trainer.get_policy().model.dtypes == {torch.float32}
