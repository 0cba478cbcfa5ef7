"""Env registrations made by the user's script, shipped to a study's trial processes.

A trial process starts fresh and never runs the user's script, so a name
given to ``register_env`` or an id given to ``gymnasium.register`` there must
travel with the trial. This module imports neither torch nor gymnasium: the
orchestrator reads the registries only if the user's process imported them.
"""

from __future__ import annotations

import sys
from typing import Any


def collect_env_registrations(*envs: Any) -> dict[str, tuple[str, Any]]:
    """For each string in ``envs`` registered in this process: its register_env creator or gymnasium EnvSpec."""
    rltune_registry = sys.modules.get("rltune.env._registry")
    gymnasium = sys.modules.get("gymnasium")
    found: dict[str, tuple[str, Any]] = {}
    for env in envs:
        if not isinstance(env, str):
            continue
        creator = rltune_registry.registered_creator(env) if rltune_registry is not None else None
        if creator is not None:
            found[env] = ("rltune", creator)
        elif gymnasium is not None and env in gymnasium.registry:
            found[env] = ("gymnasium", gymnasium.registry[env])
    return found


def install_env_registrations(registrations: dict[str, tuple[str, Any]]) -> None:
    """Register what :func:`collect_env_registrations` found in another process (this process's own come first)."""
    for name, (kind, value) in registrations.items():
        if kind == "rltune":
            from rltune.env._registry import register_env, registered_creator

            if registered_creator(name) is None:
                register_env(name, value)
        else:
            import gymnasium

            if name not in gymnasium.registry:
                gymnasium.registry[name] = value
