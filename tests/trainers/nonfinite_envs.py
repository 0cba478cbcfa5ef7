"""Envs that emit a NaN or infinite reward or observation at a chosen step of chosen episodes (nan_policy tests).

Both envs read the same ``env_config`` keys:

- ``bad``: what goes wrong: ``"reward"``, ``"obs"`` (an observation during
  the episode), ``"final_obs"`` (the observation of the episode's last step)
  or ``"reset_obs"`` (the first one).
- ``value`` (default ``nan``): the number put there (``"inf"``, ``-1e39``...).
- ``at_step`` (default 3): the step of the episode that returns it (1 = the
  first ``step()``); ignored by ``final_obs`` and ``reset_obs``.
- ``every`` (default 1): every how-many-th episode of an env goes wrong (2:
  the first is fine, the second not, ...).
- ``episode_len`` (default 8): steps per episode (terminated after them).
- ``vector_index``: only the env of this vector index goes wrong (default: every env).

``num_bad`` counts the episodes that went wrong so far; ``num_steps`` the steps.
The observation is ``[t / episode_len, 1, 0.5]`` (entry 1 carries ``value``).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from rltune.env import MultiAgentEnv


class _Schedule:
    """When an env following the ``env_config`` keys above goes wrong."""

    def __init__(self, config: Any) -> None:
        self.bad = config.get("bad", "reward")
        self.value = float(config.get("value", "nan"))
        self.at_step = int(config.get("at_step", 3))
        self.every = int(config.get("every", 1))
        self.episode_len = int(config.get("episode_len", 8))
        only = config.get("vector_index")
        self.active = only is None or only == getattr(config, "vector_index", 0)
        self.episode = 0  # episodes started
        self.t = 0
        self.num_bad = 0
        self.num_steps = 0

    def start(self) -> bool:
        """A new episode; whether its first observation is bad."""
        self.episode += 1
        self.t = 0
        self._counted = False
        return self._now("reset_obs")

    def _wrong_episode(self) -> bool:
        return self.active and self.episode % self.every == 0

    def _now(self, what: str) -> bool:
        hit = self.bad == what and self._wrong_episode()
        if hit and not self._counted:
            self.num_bad += 1
            self._counted = True
        return hit

    def step(self) -> tuple[bool, bool, bool]:
        """One step: (done, bad reward, bad obs)."""
        self.t += 1
        self.num_steps += 1
        done = self.t >= self.episode_len
        at = self.t == self.at_step
        reward = at and self._now("reward")
        obs = (at and self._now("obs")) or (done and self._now("final_obs"))
        return done, reward, obs

    def obs(self, bad: bool) -> np.ndarray:
        obs = np.array([self.t / self.episode_len, 1.0, 0.5], dtype=np.float32)
        if bad:
            obs[1] = self.value
        return obs


class _GoesWrong:
    """The spaces and schedule of both envs."""

    def __init__(self, config: Any = None) -> None:
        self.schedule = _Schedule(config or {})
        self.observation_space = gym.spaces.Box(-10.0, 10.0, (3,), np.float32)
        self.action_space = gym.spaces.Discrete(2)

    @property
    def num_bad(self) -> int:
        return self.schedule.num_bad


class NonFiniteEnv(_GoesWrong, gym.Env):
    """A single-agent env that goes wrong as its ``env_config`` says (module docstring); reward 1 per step."""

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        return self.schedule.obs(self.schedule.start()), {}

    def step(self, action: Any):
        done, bad_reward, bad_obs = self.schedule.step()
        reward = self.schedule.value if bad_reward else 1.0
        return self.schedule.obs(bad_obs), reward, done, False, {}


class NonFiniteAgents(_GoesWrong, MultiAgentEnv):
    """Agents "a" and "b" act together; "b" goes wrong as the ``env_config`` says; reward 1 per step each."""

    possible_agents = ["a", "b"]

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        bad = self.schedule.start()
        return {"a": self.schedule.obs(False), "b": self.schedule.obs(bad)}, {}

    def step(self, action_dict: dict) -> tuple[dict, dict, dict, dict, dict]:
        assert set(action_dict) == {"a", "b"}, action_dict
        done, bad_reward, bad_obs = self.schedule.step()
        obs = {"a": self.schedule.obs(False), "b": self.schedule.obs(bad_obs)}
        rewards = {"a": 1.0, "b": self.schedule.value if bad_reward else 1.0}
        return obs, rewards, {"__all__": done}, {"__all__": False}, {}


def to_policy_p(agent_id: Any, *args: Any, **kwargs: Any) -> str:
    """A policy mapping function: every agent to policy "p"."""
    return "p"
