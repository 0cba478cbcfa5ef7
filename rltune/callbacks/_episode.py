"""Episode: what episode hooks see of one running episode."""

from __future__ import annotations

import random
from typing import Any


class Episode:
    """One episode of one env, as the episode hooks see it.

    ``user_data`` is free for the hooks; ``custom_metrics`` (name -> number)
    set by ``on_episode_end`` are aggregated across workers into
    ``result["custom_metrics"]`` as ``<name>_mean``, ``_min`` and ``_max``;
    ``hist_data`` (name -> list of numbers) goes to ``result["hist_stats"]``.
    """

    __slots__ = (
        "episode_id",
        "env_index",
        "worker_index",
        "length",
        "total_reward",
        "user_data",
        "custom_metrics",
        "hist_data",
        "_last_obs",
        "_last_info",
        "_last_action",
    )

    def __init__(self, *, env_index: int, worker_index: int, observation: Any, info: dict[str, Any]) -> None:
        self.episode_id: int = random.getrandbits(63)
        self.env_index = env_index
        self.worker_index = worker_index
        self.length = 0
        self.total_reward = 0.0
        self.user_data: dict[str, Any] = {}
        self.custom_metrics: dict[str, float] = {}
        self.hist_data: dict[str, list[float]] = {}
        self._last_obs = observation
        self._last_info = info
        self._last_action: Any = None

    def add_step(self, action: Any, reward: float, observation: Any, info: dict[str, Any]) -> None:
        """Record one env step (called by the sampler before ``on_episode_step``)."""
        self.length += 1
        self.total_reward += float(reward)
        self._last_action = action
        self._last_obs = observation
        self._last_info = info

    def last_observation(self) -> Any:
        """The latest raw observation (as the env returned it)."""
        return self._last_obs

    def last_info(self) -> dict[str, Any]:
        """The latest info dict from ``reset`` or ``step``."""
        return self._last_info

    def last_action(self) -> Any:
        """The latest action sent to the env (None before the first step)."""
        return self._last_action

    def __repr__(self) -> str:
        return (
            f"Episode(id={self.episode_id}, worker={self.worker_index}, env={self.env_index}, "
            f"length={self.length}, total_reward={self.total_reward:g})"
        )
