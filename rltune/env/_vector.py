"""gymnasium vector envs as a worker's envs: recognising them, their autoreset mode, their sub-envs' infos.

A :class:`gymnasium.vector.VectorEnv` given as ``env`` (an instance, a class,
a creator returning one, or ``gym.make_vec``'s result) is the worker's
vectorization: the worker builds ONE vector env and steps its ``num_envs``
sub-envs with one ``step(actions)`` call per step (see
:mod:`rltune.trainers.sampling._vector_env_rows`).
"""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, VectorEnv

from rltune.env._context import EnvContext
from rltune.env._task import task_env
from rltune.errors import ConfigError, EnvError


def is_vector_env(env: Any) -> bool:
    """Whether ``env`` is a gymnasium vector env (its sub-envs are stepped as one)."""
    return isinstance(env, VectorEnv)


def single_spaces(env: Any) -> tuple[gym.Space, gym.Space]:
    """The (observation, action) spaces of one env: a vector env's sub-env spaces, else the env's own."""
    if is_vector_env(env):
        return env.single_observation_space, env.single_action_space
    return env.observation_space, env.action_space


def autoreset_mode(env: VectorEnv, name: str) -> AutoresetMode:
    """The vector env's ``metadata['autoreset_mode']`` (gymnasium's default NEXT_STEP when it names none)."""
    mode = (getattr(env, "metadata", None) or {}).get("autoreset_mode", AutoresetMode.NEXT_STEP)
    try:
        return mode if isinstance(mode, AutoresetMode) else AutoresetMode(mode)
    except ValueError:
        raise EnvError(
            f"env {name!r}: metadata['autoreset_mode'] is {mode!r}, not one of gymnasium's "
            f"AutoresetMode values ({', '.join(m.value for m in AutoresetMode)})"
        ) from None


def check_vector_env(env: VectorEnv, name: str, worker_index: int) -> int:
    """The vector env's number of sub-envs; :class:`EnvError` if it has no usable ``num_envs`` or single spaces."""
    num_envs = getattr(env, "num_envs", None)
    if not isinstance(num_envs, (int, np.integer)) or num_envs < 1:
        raise EnvError(f"env {name!r} (worker {worker_index}): a VectorEnv needs num_envs >= 1, but has {num_envs!r}")
    for attribute in ("single_observation_space", "single_action_space"):
        if not isinstance(getattr(env, attribute, None), gym.Space):
            raise EnvError(f"env {name!r} (worker {worker_index}): a VectorEnv needs a gymnasium space as {attribute}")
    autoreset_mode(env, name)
    return int(num_envs)


def vector_config_problem(config: Any, name: str, num_envs: int, has_tasks: bool) -> str | None:
    """Why a trainer config cannot run with a vector env of ``num_envs`` sub-envs (one message), or None.

    ``num_envs_per_worker`` is 1 (the default: the vector env is the
    worker's vectorization) or the vector env's ``num_envs``; options that
    act on single sub-envs, which a vector env hides, are refused by name
    (``env_task_fn`` only when the sub-envs' tasks cannot be set: ``has_tasks``).
    """
    per_worker = config.num_envs_per_worker
    if per_worker not in (1, num_envs):
        return (f"num_envs_per_worker={per_worker}, but env {name!r} is a gymnasium VectorEnv of {num_envs} sub-envs, "
                "which is each worker's vectorization: leave num_envs_per_worker at 1 (or set it to the vector "
                "env's num_envs), and change the vector env's num_envs instead")
    if config.restart_failed_sub_environments:
        return (f"restart_failed_sub_environments: True cannot rebuild one sub-env of env {name!r}, a gymnasium "
                "VectorEnv (its sub-envs live inside it): set it to False, or pass the single env instead")
    if config.env_task_fn is not None and not has_tasks:
        return (f"env_task_fn: the sub-envs of env {name!r}, a gymnasium VectorEnv, cannot be reached to set their "
                "task (only a SyncVectorEnv's task-settable sub-envs can): use a SyncVectorEnv, or pass the single "
                "task-settable env with num_envs_per_worker for its vectorization")
    return None


def sub_info(infos: dict[str, Any], i: int) -> dict[str, Any]:
    """Sub-env ``i``'s info out of a vector env's infos (a dict of arrays, each key masked by ``_key``)."""
    if not infos:
        return {}
    info: dict[str, Any] = {}
    for key, value in infos.items():
        if key.startswith("_") or key in ("final_obs", "final_info"):
            continue
        mask = infos.get("_" + key)
        if mask is not None and not mask[i]:
            continue
        info[key] = sub_info(value, i) if isinstance(value, dict) else value[i]
    return info


def vector_env_contexts(env: VectorEnv, ctx: EnvContext, config: Any, name: str) -> list[EnvContext]:
    """One context per sub-env of ``env``, the vector env a worker built with ``ctx`` (vector indices 0..num_envs-1).

    Raises :class:`EnvError` for a vector env without sub-envs or single
    spaces, :class:`ConfigError` for a trainer ``config`` it cannot run with
    (see :func:`vector_config_problem`); the env is closed then.
    """
    try:
        num_envs = check_vector_env(env, name, ctx.worker_index)
        problem = vector_config_problem(config, name, num_envs, task_env(env) is not None)
        if problem:
            raise ConfigError(problem)
    except (ConfigError, EnvError):
        env.close()
        raise
    return [ctx.copy_with_overrides(vector_index=v) for v in range(num_envs)]


class VectorEnvInstance:
    """The creator of a vector env given as an instance: the instance itself, then copies.

    The first env a process builds is the instance (a rollout worker
    process gets its own unpickled copy); a second one in the same process
    (e.g. evaluation's worker beside the local worker) is a deep copy. An
    ``AsyncVectorEnv`` (sub-processes and pipes) is neither copied nor sent
    to rollout worker processes: a clear error asks for a creator.
    """

    def __init__(self, env: VectorEnv) -> None:
        self.env = env
        self._used = False

    def _needs_creator(self, why: str) -> str:
        return (f"env {type(self.env).__name__}: {why}; pass a creator instead, "
                "e.g. env=lambda ctx: gymnasium.vector.AsyncVectorEnv([...]) or gymnasium.make_vec(...)")

    def __call__(self, ctx: EnvContext) -> VectorEnv:
        if not self._used:
            self._used = True
            return self.env
        where = f"a VectorEnv instance serves one worker only, and worker {ctx.worker_index} needs another"
        if isinstance(self.env, AsyncVectorEnv):
            raise EnvError(self._needs_creator(f"{where} (an AsyncVectorEnv cannot be copied)"))
        try:
            return copy.deepcopy(self.env)
        except Exception as exc:
            raise EnvError(self._needs_creator(f"{where} (copying it failed: {type(exc).__name__}: {exc})")) from exc

    def __reduce__(self) -> Any:
        if isinstance(self.env, AsyncVectorEnv):
            raise ConfigError(self._needs_creator("an AsyncVectorEnv instance cannot be sent to rollout worker "
                                                  "processes (num_workers > 0)"))
        return (VectorEnvInstance, (self.env,))
