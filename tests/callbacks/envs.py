"""Envs and callbacks shared by the callback, metric and curriculum tests.

They live in an importable module (not in the test files) so that rollout
worker processes, which get the parent's ``sys.path``, import them by module
name, and so that configs can name them by import string
(``"callbacks.envs:TaskMetrics"``) and checkpoints can save them.
"""

from __future__ import annotations

import math
import os
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from rltune.callbacks import DefaultCallbacks, TaskSettableEnv

# Where this module is imported from: "callbacks.envs" under pytest's rootdir-based imports.
MODULE = __name__


class TaskEnv(TaskSettableEnv):
    """An env with an integer task: every step pays ``task``; the task is in every info dict.

    obs = [task, t]; episodes terminate after ``episode_len`` steps (env_config,
    default 4), so an episode's return is ``task * episode_len``. A new task
    takes effect at once (the next step's reward and info carry it).

    It counts ``set_task`` calls (``set_task_calls``); ``set_phase(p)`` is the
    plain method a ``foreach_env`` curriculum calls; ``arm_crash()`` makes the
    next ``step`` raise (a rebuilt env is not armed). env_config ``task`` is the
    initial task (default 0).
    """

    def __init__(self, config: Any) -> None:
        self.ctx = config
        self.episode_len = int(config.get("episode_len", 4))
        self.task = int(config.get("task", 0))
        self.observation_space = spaces.Box(-1e6, 1e6, (2,), np.float32)
        self.action_space = spaces.Discrete(2)
        self.t = 0
        self.set_task_calls = 0
        self.crash_armed = False
        self.pid = os.getpid()

    # -- TaskSettableEnv ----------------------------------------------------------------
    def get_task(self) -> int:
        return self.task

    def set_task(self, task: Any) -> None:
        self.set_task_calls += 1
        self.task = int(task)

    # -- what tests call through foreach_env ------------------------------------------------
    def set_phase(self, phase: int) -> None:
        """A curriculum phase pushed by ``trainer.foreach_env`` (the task is the phase)."""
        self.task = int(phase)

    def arm_crash(self) -> None:
        self.crash_armed = True

    def place(self) -> tuple[int, int]:
        return (self.ctx.worker_index, self.ctx.vector_index)

    # -- gymnasium API --------------------------------------------------------------------
    def _obs(self) -> np.ndarray:
        return np.array([self.task, self.t], dtype=np.float32)

    def _info(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "worker_index": self.ctx.worker_index,
            "vector_index": self.ctx.vector_index,
            "pid": os.getpid(),
        }

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), self._info()

    def step(self, action):
        if self.crash_armed:
            raise RuntimeError(f"armed crash of env {self.place()}")
        self.t += 1
        return self._obs(), float(self.task), self.t >= self.episode_len, False, self._info()


class SpaceTaskEnv(TaskEnv):
    """A :class:`TaskEnv` that declares its tasks for an automatic curriculum: 1, 2 and 3."""

    task_space = spaces.Discrete(3, start=1)


class RandomRewardEnv(gym.Env):
    """Episodes of exactly ``episode_len`` steps (env_config, default 4) with uniform random rewards.

    Returns differ from episode to episode, so a metric that copies the
    return must match ``episode_reward_mean/min/max`` only if it summarises
    the same episodes.
    """

    def __init__(self, config: Any) -> None:
        self.episode_len = int(config.get("episode_len", 4))
        self.observation_space = spaces.Box(0.0, 1000.0, (1,), np.float32)
        self.action_space = spaces.Discrete(2)
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([0.0], dtype=np.float32), {"t": 0}

    def step(self, action):
        self.t += 1
        reward = float(self.np_random.uniform(0.0, 1.0))
        return np.array([self.t], dtype=np.float32), reward, self.t >= self.episode_len, False, {"t": self.t}


# --- callbacks --------------------------------------------------------------------------


class TaskMetrics(DefaultCallbacks):
    """Reports the task each episode ended with (read from ``last_info()``) as custom metric ``task``.

    Also ``place_ok`` (1.0 when the episode's ``worker_index``/``env_index``
    match the env's own info) and, in the trainer process, the worker
    indices passed to ``on_worker_recreated``.
    """

    def __init__(self) -> None:
        self.recreated: list[int] = []

    def on_episode_end(self, *, episode, env, env_index, worker=None, **kwargs) -> None:
        info = episode.last_info()
        episode.custom_metrics["task"] = info["task"]
        episode.custom_metrics["place_ok"] = float(
            info["worker_index"] == episode.worker_index and info["vector_index"] == episode.env_index == env_index
        )

    def on_worker_recreated(self, *, trainer, worker_index, **kwargs) -> None:
        self.recreated.append(worker_index)


class PhaseSchedule(DefaultCallbacks):
    """Curriculum way 2: an ``on_train_result`` that pushes a phase to every env with ``trainer.foreach_env``.

    ``schedule`` maps a training iteration to the phase pushed after it.
    """

    def __init__(self) -> None:
        self.schedule: dict[int, int] = {}

    def on_train_result(self, *, trainer, result, **kwargs) -> None:
        phase = self.schedule.get(result["training_iteration"])
        if phase is not None:
            trainer.foreach_env(lambda env: env.set_phase(phase))
            result["phase_pushed"] = phase


class IterationTaskFn:
    """Curriculum way 3, an ``env_task_fn``: the task for a training iteration, else the env's own.

    ``schedule`` maps a training iteration to a task; iterations in
    ``per_env`` give each env ``task + 10 * worker_index + vector_index``.
    It is a callable object so that a test can add entries while the trainer
    runs (it is shipped to the workers after every iteration).
    """

    def __init__(self) -> None:
        self.schedule: dict[int, int] = {}
        self.per_env: set[int] = set()

    def __call__(self, result: dict[str, Any], env: Any, env_context: Any) -> int:
        iteration = result["training_iteration"]
        if iteration not in self.schedule:
            return env.get_task()
        task = self.schedule[iteration]
        if iteration in self.per_env:
            task += 10 * env_context.worker_index + env_context.vector_index
        return task


class WorkerMetrics(DefaultCallbacks):
    """Custom metrics with known values per worker and env, plus what the episode hooks saw.

    - ``w``: ``worker_index * 10 + env_index``
    - ``ret`` / ``len``: the episode's ``total_reward`` / ``length``
    - ``nan_on_w1``: NaN on worker 1, ``worker_index * 10`` elsewhere
    - ``always_nan``: NaN
    - ``steps_ok``: 1.0 when on_episode_step ran once per step and saw each
      step's observation, action and reward as the episode recorded them
    - ``pid``: the process that ran the hooks
    - hist_data ``worker`` (``[worker_index]``) and ``episode_id``
    """

    def on_episode_start(self, *, episode, env, env_index, worker=None, **kwargs) -> None:
        episode.user_data["rewards"] = []
        episode.user_data["start_ok"] = episode.length == 0 and episode.last_action() is None

    def on_episode_step(self, *, episode, env, env_index, worker=None, **kwargs) -> None:
        rewards = episode.user_data["rewards"]
        rewards.append(episode.total_reward - sum(rewards))
        obs = episode.last_observation()
        ok = (
            episode.length == len(rewards)
            and int(episode.last_action()) in (0, 1)
            and float(obs[0]) == episode.length  # RandomRewardEnv observes t
            and episode.last_info()["t"] == episode.length
        )
        episode.user_data["step_ok"] = episode.user_data.get("step_ok", True) and ok

    def on_episode_end(self, *, episode, env, env_index, worker=None, **kwargs) -> None:
        w = episode.worker_index
        episode.custom_metrics["w"] = w * 10 + env_index
        episode.custom_metrics["ret"] = episode.total_reward
        episode.custom_metrics["len"] = episode.length
        episode.custom_metrics["nan_on_w1"] = math.nan if w == 1 else w * 10
        episode.custom_metrics["always_nan"] = math.nan
        episode.custom_metrics["steps_ok"] = float(
            episode.user_data["start_ok"]
            and episode.user_data["step_ok"]
            and math.isclose(sum(episode.user_data["rewards"]), episode.total_reward, rel_tol=1e-9, abs_tol=1e-9)
        )
        episode.custom_metrics["pid"] = os.getpid()
        episode.hist_data["worker"] = [w]
        episode.hist_data["episode_id"] = [episode.episode_id]


class ImportedMetric(DefaultCallbacks):
    """Sets custom metric ``imported`` = 100 + worker_index; adds ``order`` in on_train_result."""

    def on_episode_end(self, *, episode, **kwargs) -> None:
        episode.custom_metrics["imported"] = 100 + episode.worker_index

    def on_train_result(self, *, trainer, result, **kwargs) -> None:
        result.setdefault("order", []).append("ImportedMetric")


def find_callbacks(callbacks: Any, cls: type) -> Any:
    """The instance of ``cls`` in a callbacks object (which may run several, as a ``MultiCallbacks``)."""
    if isinstance(callbacks, cls):
        return callbacks
    for inner in getattr(callbacks, "callbacks", []):
        if isinstance(inner, cls):
            return inner
    raise LookupError(f"no {cls.__name__} in {callbacks!r}")


def task_from_iteration(result: dict[str, Any], env: Any, env_context: Any) -> int:
    """An ``env_task_fn`` defined at module level (importable, so a checkpoint can save it by name)."""
    return 100 + result["training_iteration"]
