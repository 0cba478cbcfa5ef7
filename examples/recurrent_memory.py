"""Recurrent policies: a GRU in PPO remembers what it saw; the default MLP cannot.

Each step the env shows one of two symbols (one-hot); the reward is 1 when
the action names the symbol shown three steps before (20 rewarded steps per
episode after the first three). The current observation says nothing
about that symbol: a stateless policy is right half the time. A GRU policy
carries a state from step to step and gets it right.

The GRU plugs in as RLlib's custom models do here: a ``PPOPolicy``
subclass whose ``make_model`` returns a module with the recurrent model
contract (``get_initial_state()`` and ``forward(obs [B, T, ...], state,
seq_lens) -> (dist_inputs, values, state_out)``; see docs/recurrent.md),
and a ``PPO`` subclass that uses it. Run it (about 10 s)::

    python examples/recurrent_memory.py
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rltune.trainers import PPO, PPOPolicy

DELAY = 3
REWARDED_STEPS = 20


class RepeatThreeBack(gym.Env):
    """Shows a random symbol (one of two, one-hot) each step; reward 1 for naming the one shown ``DELAY`` steps before."""

    def __init__(self, env_config: dict[str, Any] | None = None) -> None:
        self.observation_space = gym.spaces.Box(0.0, 1.0, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.shown: list[int] = []

    def _show(self) -> np.ndarray:
        self.shown.append(int(self.np_random.integers(2)))
        return np.eye(2, dtype=np.float32)[self.shown[-1]]

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.shown = []
        return self._show(), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        t = len(self.shown) - 1
        reward = float(t >= DELAY and action == self.shown[t - DELAY])
        obs = self._show()
        return obs, reward, False, t + 1 >= REWARDED_STEPS + DELAY, {}


class GRUModel(nn.Module):
    """An encoder, a GRU and policy and value heads over its outputs."""

    def __init__(self, obs_size: int, num_outputs: int, hidden: int = 32) -> None:
        super().__init__()
        self.hidden = hidden
        self.encoder = nn.Linear(obs_size, hidden)
        self.gru = nn.GRU(hidden, hidden, batch_first=True)
        self.pi = nn.Linear(hidden, num_outputs)
        self.vf = nn.Linear(hidden, 1)

    def get_initial_state(self) -> list[torch.Tensor]:
        """One env's state at an episode's start (no batch dimension)."""
        return [torch.zeros(self.hidden)]

    def forward(
        self, obs: torch.Tensor, state: list[torch.Tensor], seq_lens: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]]:
        """``obs [B, T, size]`` from ``state [B, hidden]``: logits ``[B, T, n]``, values ``[B, T]``, the state after."""
        features, h = self.gru(torch.tanh(self.encoder(obs)), state[0][None])
        return self.pi(features), self.vf(features).squeeze(-1), [h[0]]


class GRUPolicy(PPOPolicy):
    def make_model(self) -> nn.Module:
        return GRUModel(self.preprocessor.size, int(self.action_space.n))


class GRUPPO(PPO):
    """PPO with the GRU policy."""

    policy_class = GRUPolicy


CONFIG = {
    "env": RepeatThreeBack,
    "num_envs_per_worker": 4,
    "rollout_fragment_length": 50,
    "train_batch_size": 400,
    "sgd_minibatch_size": 100,
    "num_sgd_iter": 8,
    "lr": 0.005,
    "gamma": 0.0,  # actions do not change what comes next: each reward is the action's own
    "model": {"fcnet_hiddens": [32], "max_seq_len": 20},
}


def greedy_reward_per_step(trainer: PPO, episodes: int = 20) -> float:
    """The mean reward per rewarded step of greedy actions on fresh episodes, a recurrent policy's state carried by hand."""
    env, total = RepeatThreeBack(), 0.0
    for episode in range(episodes):
        obs, _ = env.reset(seed=10_000 + episode)
        state = trainer.get_policy().get_initial_state()
        done = False
        while not done:
            if state:
                action, state, _ = trainer.compute_single_action(obs, state)
            else:
                action = trainer.compute_single_action(obs)
            obs, reward, _, done, _ = env.step(action)
            total += reward
    return total / (episodes * REWARDED_STEPS)


def train(trainer_cls: type[PPO], iterations: int = 15, seed: int = 0, *, results_dir: str | None = None) -> dict[str, Any]:
    """Train ``trainer_cls`` on the memory task; its last result, greedy reward per step and time."""
    start = time.perf_counter()
    with trainer_cls(config={**CONFIG, "seed": seed}, results_dir=results_dir or "/tmp/rltune_examples") as trainer:
        for _ in range(iterations):
            result = trainer.train()
        reward = greedy_reward_per_step(trainer)
    return {"result": result, "reward_per_step": reward, "seconds": time.perf_counter() - start}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--iterations", type=int, default=15)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    for name, cls in (("GRU", GRUPPO), ("MLP", PPO)):
        run = train(cls, args.iterations, args.seed)
        print(f"{name}: greedy reward per step {run['reward_per_step']:.2f} (chance 0.50) in {run['seconds']:.1f} s")
