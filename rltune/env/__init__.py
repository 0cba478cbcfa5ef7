"""What users subclass or call around envs; the bottom layer of rltune (it imports no other rltune package).

Public names (re-exported by :mod:`rltune.trainers`, ``TaskSettableEnv`` also by
:mod:`rltune.callbacks`)::

    EnvContext                      the env_config dict every env is built with, plus where it runs
    register_env, registered_envs   names for env creators, usable as ``env: name`` in configs
    TaskSettableEnv                 an env whose task a curriculum can read and change
    MultiAgentEnv, make_multi_agent an env of several agents (dicts keyed by agent id)
    with_agent_groups               agents of a MultiAgentEnv acting as one per group
    PettingZooEnv, ParallelPettingZooEnv   PettingZoo AEC and parallel envs as MultiAgentEnvs
    OldGymApi                       an env on the old gym API (reset() -> obs, 4-tuple step) on gymnasium's

Modules: ``_context`` (EnvContext), ``_registry`` (register_env and resolving
a trainer's ``env`` into an ``EnvSpec``), ``_build`` (building one env and
running gymnasium's env checker on it), ``_task`` (TaskSettableEnv, and a
SyncVectorEnv's sub-envs' task),
``_multi_agent`` (MultiAgentEnv), ``_multi_agent_check`` (its API checker),
``_groups`` (agent groups), ``_pettingzoo`` (the PettingZoo wrappers),
``_vector`` (gymnasium vector envs as a worker's envs), ``_old_gym`` (old-gym-API envs, Atari ids),
``_shipping`` (the user's env registrations, sent to a study's trial processes).

The names load on first access: ``rltune.env._shipping`` is imported by the
orchestrator, which must not pay for importing gymnasium.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rltune.env._context import EnvContext
    from rltune.env._registry import register_env, registered_envs
    from rltune.env._task import TaskSettableEnv
    from rltune.env._multi_agent import MultiAgentEnv, make_multi_agent
    from rltune.env._groups import with_agent_groups
    from rltune.env._pettingzoo import ParallelPettingZooEnv, PettingZooEnv
    from rltune.env._old_gym import OldGymApi

_PUBLIC = {
    "EnvContext": "rltune.env._context",
    "register_env": "rltune.env._registry",
    "registered_envs": "rltune.env._registry",
    "TaskSettableEnv": "rltune.env._task",
    "MultiAgentEnv": "rltune.env._multi_agent",
    "make_multi_agent": "rltune.env._multi_agent",
    "with_agent_groups": "rltune.env._groups",
    "PettingZooEnv": "rltune.env._pettingzoo",
    "ParallelPettingZooEnv": "rltune.env._pettingzoo",
    "OldGymApi": "rltune.env._old_gym",
    "BaseEnv": "rltune._compat_objects",  # RLlib's name, for type hints (ray.rllib.env.BaseEnv)
}


def __getattr__(name: str) -> Any:
    if name in _PUBLIC:
        return getattr(importlib.import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'rltune.env' has no attribute {name!r}")


__all__ = [
    "EnvContext",
    "MultiAgentEnv",
    "OldGymApi",
    "ParallelPettingZooEnv",
    "PettingZooEnv",
    "TaskSettableEnv",
    "make_multi_agent",
    "register_env",
    "registered_envs",
    "with_agent_groups",
]
