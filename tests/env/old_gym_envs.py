"""Envs on the old gym API (reset() -> obs, step() -> (obs, reward, done, info)), as RLlib's older docs wrote them."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


class OldCorridor(gym.Env):
    """Walk right (action 1) ``length`` cells to the goal (reward 1, done); old-API reset/step and seed()."""

    def __init__(self, config: Any = None) -> None:
        self.length = int((config or {}).get("length", 5))
        self.observation_space = gym.spaces.Box(0.0, float(self.length), (1,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.pos = 0
        self.seeds: list[int] = []

    def seed(self, seed: int | None = None) -> list[int | None]:
        self.seeds.append(seed)
        return [seed]

    def reset(self):
        self.pos = 0
        return np.array([self.pos], dtype=np.float32)

    def step(self, action):
        self.pos = max(0, self.pos + (1 if action == 1 else -1))
        done = self.pos >= self.length
        return np.array([self.pos], dtype=np.float32), float(done), done, {}


class OldTimeLimited(OldCorridor):
    """Ends every episode after 3 steps, marked as old gym's TimeLimit did (``info["TimeLimit.truncated"]``)."""

    def reset(self):
        self.steps = 0
        return super().reset()

    def step(self, action):
        self.steps += 1
        obs, reward, done, info = super().step(action)
        if self.steps >= 3 and not done:
            return obs, reward, True, {"TimeLimit.truncated": True}
        return obs, reward, done, info
