"""Building one environment for a worker: creation, the gymnasium API check, clear errors."""

from __future__ import annotations

import logging
import warnings
from typing import Any

import gymnasium as gym
from gymnasium.utils.env_checker import check_env

from rltune.errors import EnvError
from rltune.trainers._env_context import EnvContext
from rltune.trainers._registry import EnvSpec

logger = logging.getLogger(__name__)


def where(ctx: EnvContext) -> str:
    """A short description of an env's place, used in every error message."""
    return f"worker {ctx.worker_index}, env {ctx.vector_index}"


def build_env(spec: EnvSpec, ctx: EnvContext, *, check: bool) -> gym.Env:
    """Create one env from ``spec`` with ``ctx``; run gymnasium's env checker on it when ``check``.

    Raises :class:`EnvError` naming the env, its place and the rule broken.
    """
    try:
        env = spec.creator(ctx)
    except EnvError:
        raise
    except Exception as exc:  # the user's constructor: report whatever it raised
        raise EnvError(f"env {spec.name!r} ({where(ctx)}) could not be created: {type(exc).__name__}: {exc}") from exc
    if not isinstance(env, gym.Env):
        raise EnvError(
            f"env {spec.name!r} ({where(ctx)}): the creator returned {type(env).__name__}, "
            "which is not a gymnasium.Env (subclass gymnasium.Env, or rltune.trainers.MultiAgentEnv later)"
        )
    if check:
        # The advice on gymnasium's own envs (e.g. CartPole's infinite observation bounds) is
        # about design choices the user cannot change: logged at DEBUG only.
        from_gymnasium = type(env.unwrapped).__module__.startswith("gymnasium.")
        check_gym_api(env, spec.name, ctx, advice_level=logging.DEBUG if from_gymnasium else logging.WARNING)
    return env


def check_gym_api(env: gym.Env, name: str, ctx: EnvContext, *, advice_level: int = logging.WARNING) -> None:
    """Run gymnasium's env checker once on ``env`` as built; turn a violation into an :class:`EnvError`.

    The env is checked with its wrappers, as the sampler will step it: a
    wrapper that makes an env follow the API passes, one that breaks it
    fails. The checker's warnings (advice, not violations) are logged at
    ``advice_level``.
    """
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            check_env(env, skip_render_check=True, skip_close_check=True)
    except Exception as exc:  # the checker raises AssertionError, TypeError, AttributeError...
        message = str(exc).split(" See https://")[0].strip() or type(exc).__name__
        raise EnvError(
            f"env {name!r} ({where(ctx)}) breaks the gymnasium API: {message} "
            "(set 'disable_env_checking': True to skip this check)"
        ) from exc
    for w in caught:
        text = str(w.message)
        if "is different from the unwrapped version" in text:
            continue
        logger.log(advice_level, "env %r (%s): %s", name, where(ctx), text)


def describe(env: Any) -> str:
    """The env's spec id or class name, for messages."""
    spec = getattr(env, "spec", None)
    return getattr(spec, "id", None) or type(env).__name__
