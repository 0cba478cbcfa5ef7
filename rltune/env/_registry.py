"""Resolving the ``env`` a trainer is given into a function that builds one env.

``env`` may be a gymnasium id (``"CartPole-v1"``), an env class whose
constructor takes ``env_config``, a name given to :func:`register_env`, an
import string ``"pkg.module:Name"`` (a class or a creator function), or any
callable ``creator(env_context) -> env``; also a gymnasium ``VectorEnv``
instance (or any of the above returning a ``VectorEnv``).
"""

from __future__ import annotations

import dataclasses
import difflib
from dataclasses import dataclass
from typing import Any, Callable

import gymnasium as gym

from rltune._imports import import_object
from rltune.env._context import EnvContext
from rltune.env._old_gym import atari_id_problem
from rltune.env._vector import VectorEnvInstance, is_vector_env
from rltune.errors import ConfigError

EnvCreator = Callable[[EnvContext], Any]

_ENV_REGISTRY: dict[str, EnvCreator] = {}


def register_env(name: str, creator: EnvCreator) -> None:
    """Register ``creator(env_context) -> env`` under ``name`` so configs can say ``env: name``.

    The creator is shipped to rollout worker processes by value, so lambdas
    and functions defined in ``__main__`` work.
    """
    if not isinstance(name, str) or not name:
        raise ConfigError(f"register_env: name must be a non-empty string, but got {name!r}")
    if not callable(creator):
        raise ConfigError(f"register_env({name!r}, ...): creator must be callable, but got {creator!r}")
    _ENV_REGISTRY[name] = creator


def registered_envs() -> list[str]:
    """Names given to :func:`register_env` in this process."""
    return sorted(_ENV_REGISTRY)


def registered_creator(name: str) -> EnvCreator | None:
    """The creator given to :func:`register_env` under ``name`` in this process, or None."""
    return _ENV_REGISTRY.get(name)


@dataclass(frozen=True)
class EnvSpec:
    """A resolved ``env``: its display name, the function that builds one instance, and whether an env on
    the old gym API is wrapped (``auto_wrap_old_gym_envs``) or refused."""

    name: str
    creator: EnvCreator
    auto_wrap_old_gym_envs: bool = True


class _GymMaker:
    """Builds a registered gymnasium env with ``env_config`` as keyword arguments (as RLlib does).

    It holds the id's registration (gymnasium's ``EnvSpec``), read where the
    trainer runs and shipped with the maker: an id that the user's script
    registered with ``gymnasium.register`` builds in rollout worker processes
    too, where that registration never ran.
    """

    def __init__(self, spec: gym.envs.registration.EnvSpec) -> None:
        self.spec = spec

    def __call__(self, ctx: EnvContext) -> gym.Env:
        # rltune runs gymnasium's full env checker on the first env itself (unless
        # disable_env_checking), so gym.make's passive checker wrapper is left out.
        return gym.make(self.spec, disable_env_checker=True, **dict(ctx))


def _gym_env(name: str, env_id: str) -> EnvSpec:
    return EnvSpec(name, _GymMaker(gym.registry[env_id]))


class _ClassMaker:
    """Builds an env class by calling ``cls(env_context)``."""

    def __init__(self, cls: type) -> None:
        self.cls = cls

    def __call__(self, ctx: EnvContext) -> Any:
        return self.cls(ctx)


def _vector_name(env: Any) -> str:
    """A vector env instance's name for messages: its sub-env's id when it has one (``make_vec``), else its class."""
    spec = getattr(env, "spec", None)
    return getattr(spec, "id", None) or type(env).__name__


def resolve_env(env: Any, *, auto_wrap_old_gym_envs: bool = True) -> EnvSpec:
    """Turn the user's ``env`` into an :class:`EnvSpec`; raise :class:`ConfigError` naming the fix."""
    spec = _resolve(env)
    return spec if auto_wrap_old_gym_envs else dataclasses.replace(spec, auto_wrap_old_gym_envs=False)


def _resolve(env: Any) -> EnvSpec:
    if env is None:
        raise ConfigError("no env given: set config['env'] or pass env=... (e.g. 'CartPole-v1')")
    if isinstance(env, type):
        return EnvSpec(env.__name__, _ClassMaker(env))
    if is_vector_env(env):
        return EnvSpec(_vector_name(env), VectorEnvInstance(env))
    if isinstance(env, str):
        if env in _ENV_REGISTRY:
            return EnvSpec(env, _ENV_REGISTRY[env])
        if ":" in env and not env.startswith(":"):
            if env in gym.registry:
                return _gym_env(env, env)
            try:
                obj = import_object(env, f"env {env!r}")
            except ConfigError:
                # gymnasium's own "module:Env-v0" form: importing the module registered the id.
                if env.partition(":")[2] in gym.registry:
                    return _gym_env(env, env.partition(":")[2])
                raise
            if isinstance(obj, type):
                return EnvSpec(env, _ClassMaker(obj))
            if callable(obj):
                return EnvSpec(env, obj)
            raise ConfigError(f"env {env!r}: the imported object is neither an env class nor a creator function")
        atari = atari_id_problem(env)  # an Atari id: registered by ale-py, or what to install
        if atari is not None:
            raise ConfigError(atari)
        if env in gym.registry:
            return _gym_env(env, env)
        known = list(_ENV_REGISTRY) + list(gym.registry)
        close = difflib.get_close_matches(env, known, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ConfigError(
            f"env {env!r} is not a gymnasium id nor a name given to register_env(){hint} "
            "(an env class, or an import string 'pkg.module:Name', also works)"
        )
    if callable(env):
        return EnvSpec(getattr(env, "__name__", type(env).__name__), env)
    raise ConfigError(f"env must be a gymnasium id, a registered name, an env class or an import string, but got {env!r}")
