"""Envs whose task (difficulty, level, map...) a curriculum can read and change."""

from __future__ import annotations

from typing import Any

import gymnasium as gym


class TaskSettableEnv(gym.Env):
    """An env with a task (difficulty, level, map...) that the curriculum can read and change.

    ``task_space`` (optional) declares the tasks an automatic curriculum
    (``curriculum: {type: learning_progress | plr}``) draws from: a list of
    tasks, a ``Discrete`` or ``MultiDiscrete`` space, or a 1-D ``Box`` (with
    the block's ``bins``). None: the curriculum block lists its ``tasks``.
    """

    task_space: Any = None

    def get_task(self) -> Any:
        """The env's current task (JSON-able values survive checkpoints)."""
        raise NotImplementedError

    def set_task(self, task: Any) -> None:
        """Switch to ``task``; takes effect from the next reset (or at once, the env's choice)."""
        raise NotImplementedError


class VectorTasks:
    """The task of a ``SyncVectorEnv`` whose sub-envs are task-settable: one task, set on every sub-env."""

    def __init__(self, targets: list[Any]) -> None:
        self.targets = targets

    def get_task(self) -> Any:
        """The sub-envs' task (a list of them, by sub-env, if they differ)."""
        tasks = [target.get_task() for target in self.targets]
        return tasks[0] if all(task == tasks[0] for task in tasks) else tasks

    def set_task(self, task: Any) -> None:
        """Give every sub-env ``task``."""
        for target in self.targets:
            target.set_task(task)


def task_env(env: Any) -> Any:
    """The object holding ``get_task``/``set_task``: the env itself or, under gymnasium wrappers, the unwrapped env; None if neither.

    A ``SyncVectorEnv`` of task-settable sub-envs has a :class:`VectorTasks`
    (other vector envs' sub-envs are not reached: None).
    """
    if isinstance(env, gym.vector.VectorEnv):
        targets = [task_env(sub) for sub in getattr(env, "envs", None) or ()]
        return VectorTasks(targets) if targets and all(t is not None for t in targets) else None
    for candidate in (env, getattr(env, "unwrapped", None)):
        if callable(getattr(candidate, "get_task", None)) and callable(getattr(candidate, "set_task", None)):
            return candidate
    return None
