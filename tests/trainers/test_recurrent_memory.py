"""Acceptance: a GRU policy plugged into PPO from this file alone solves a memory task where the default MLP stays at chance.

The env shows a random symbol each step (one-hot); the reward is 1 when the
action names the symbol shown ``DELAY`` steps before. The current
observation says nothing about that symbol: a stateless policy is right
half the time with two symbols, a recurrent one can be right always.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rltune.trainers import PPO, PPOPolicy

DELAY = 3
SYMBOLS = 2
EPISODE_LEN = 20


class RepeatPastEnv(gym.Env):
    """Each step shows one of ``SYMBOLS`` symbols; reward 1 for naming the one shown ``DELAY`` steps before."""

    def __init__(self, config: dict | None = None) -> None:
        self.observation_space = gym.spaces.Box(0.0, 1.0, (SYMBOLS,), np.float32)
        self.action_space = gym.spaces.Discrete(SYMBOLS)
        self.shown: list[int] = []

    def _show(self) -> np.ndarray:
        symbol = int(self.np_random.integers(SYMBOLS))
        self.shown.append(symbol)
        return np.eye(SYMBOLS, dtype=np.float32)[symbol]

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.shown = []
        return self._show(), {}

    def step(self, action):
        t = len(self.shown) - 1
        reward = float(t >= DELAY and int(action) == self.shown[t - DELAY])
        obs = self._show()
        return obs, reward, False, len(self.shown) > EPISODE_LEN, {}


class GRUActorCritic(nn.Module):
    """A GRU over the observations with policy and value heads: the recurrent model contract of docs/recurrent.md."""

    def __init__(self, obs_size: int, num_outputs: int, hidden: int = 32) -> None:
        super().__init__()
        self.hidden = hidden
        self.encoder = nn.Linear(obs_size, hidden)
        self.gru = nn.GRU(hidden, hidden, batch_first=True)
        self.pi = nn.Linear(hidden, num_outputs)
        self.vf = nn.Linear(hidden, 1)

    def get_initial_state(self) -> list[torch.Tensor]:
        return [torch.zeros(self.hidden)]

    def forward(self, obs: torch.Tensor, state: list[torch.Tensor], seq_lens: torch.Tensor | None):
        features, h = self.gru(torch.tanh(self.encoder(obs)), state[0][None])
        return self.pi(features), self.vf(features).squeeze(-1), [h[0]]


class GRUPolicy(PPOPolicy):
    def make_model(self) -> nn.Module:
        return GRUActorCritic(self.preprocessor.size, int(self.action_space.n))


class GRUPPO(PPO):
    policy_class = GRUPolicy


CONFIG = {"num_workers": 0, "num_envs_per_worker": 4, "rollout_fragment_length": 50, "train_batch_size": 400,
          "sgd_minibatch_size": 100, "num_sgd_iter": 8, "lr": 0.005, "gamma": 0.0, "seed": 0, "entropy_coeff": 0.0,
          "model": {"fcnet_hiddens": [32], "max_seq_len": 20}}


def mean_reward_per_step(trainer: PPO, episodes: int = 20) -> float:
    """Greedy actions on fresh episodes, the state carried by hand (``compute_single_action`` with ``state``)."""
    policy = trainer.get_policy()
    env = RepeatPastEnv()
    total = steps = 0
    for episode in range(episodes):
        obs, _ = env.reset(seed=1000 + episode)
        state = policy.get_initial_state()
        done = False
        while not done:
            if state:
                action, state, _ = policy.compute_single_action(obs, state)
            else:
                action = policy.compute_single_action(obs)
            obs, reward, _, done, _ = env.step(action)
            if len(env.shown) - 2 >= DELAY:
                total, steps = total + reward, steps + 1
    return total / steps


def train(trainer_cls: type[PPO], iterations: int) -> float:
    trainer = trainer_cls(config=CONFIG, env=RepeatPastEnv)
    try:
        for _ in range(iterations):
            trainer.train()
        return mean_reward_per_step(trainer)
    finally:
        trainer.stop()


def test_a_gru_policy_remembers_what_the_mlp_cannot():
    gru = train(GRUPPO, 15)
    mlp = train(PPO, 15)
    assert gru > 0.8, f"GRU policy: {gru:.2f} reward per step"
    assert mlp < 0.6, f"MLP policy: {mlp:.2f} reward per step"
