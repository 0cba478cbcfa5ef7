"""Envs whose task (difficulty, level, map...) a curriculum can read and change."""

from __future__ import annotations

from typing import Any

import gymnasium as gym


class TaskSettableEnv(gym.Env):
    """An env with a task (difficulty, level, map...) that the curriculum can read and change."""

    def get_task(self) -> Any:
        """The env's current task (JSON-able values survive checkpoints)."""
        raise NotImplementedError

    def set_task(self, task: Any) -> None:
        """Switch to ``task``; takes effect from the next reset (or at once, the env's choice)."""
        raise NotImplementedError


def task_env(env: Any) -> Any:
    """The object holding ``get_task``/``set_task``: the env itself or, under gymnasium wrappers, the unwrapped env; None if neither."""
    for candidate in (env, getattr(env, "unwrapped", None)):
        if callable(getattr(candidate, "get_task", None)) and callable(getattr(candidate, "set_task", None)):
            return candidate
    return None
