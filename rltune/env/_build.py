"""Building one environment for a worker: creation, the gymnasium API check, clear errors."""

from __future__ import annotations

import logging
import warnings
from typing import Any

import gymnasium as gym
from gymnasium.utils import env_checker
from gymnasium.utils.passive_env_checker import env_reset_passive_checker, env_step_passive_checker

from rltune.env._context import EnvContext
from rltune.env._multi_agent import is_multi_agent
from rltune.env._multi_agent_check import check_multi_agent_env
from rltune.env._old_gym import on_gymnasium_api
from rltune.env._registry import EnvSpec
from rltune.env._vector import is_vector_env
from rltune.errors import EnvError

logger = logging.getLogger(__name__)


def where(ctx: EnvContext) -> str:
    """A short description of an env's place, used in every error message."""
    return f"worker {ctx.worker_index}, env {ctx.vector_index}"


def build_env(spec: EnvSpec, ctx: EnvContext, *, check: bool) -> Any:
    """Create one env from ``spec`` with ``ctx``; run the env checker on it when ``check``.

    A gymnasium ``VectorEnv`` is returned as built (the worker checks it).
    An env on the old gym API is wrapped in :class:`~rltune.env._old_gym.OldGymApi`
    (or refused, see ``auto_wrap_old_gym_envs``). A :class:`rltune.env.MultiAgentEnv` is checked by
    :func:`~rltune.env._multi_agent_check.check_multi_agent_env`, any other
    env by gymnasium's checker.

    Raises :class:`EnvError` naming the env, its place and the rule broken.
    """
    try:
        env = spec.creator(ctx)
    except EnvError:
        raise
    except Exception as exc:  # the user's constructor: report whatever it raised
        raise EnvError(f"env {spec.name!r} ({where(ctx)}) could not be created: {type(exc).__name__}: {exc}") from exc
    if is_vector_env(env):  # checked by the worker that steps it (check_vector_env)
        return env
    if not isinstance(env, gym.Env):
        raise EnvError(
            f"env {spec.name!r} ({where(ctx)}): the creator returned {type(env).__name__}, "
            f"which is not a gymnasium.Env ({_env_class_hint(env)})"
        )
    if not is_multi_agent(env):
        env = on_gymnasium_api(env, spec.name, where(ctx), auto_wrap=spec.auto_wrap_old_gym_envs)
    if check and is_multi_agent(env):
        check_multi_agent_env(env, spec.name, ctx)
    elif check:
        # The advice on gymnasium's own envs (e.g. CartPole's infinite observation bounds) is
        # about design choices the user cannot change: logged at DEBUG only.
        from_gymnasium = type(env.unwrapped).__module__.startswith("gymnasium.")
        check_gym_api(env, spec.name, ctx, advice_level=logging.DEBUG if from_gymnasium else logging.WARNING)
    return env


def _env_class_hint(env: Any) -> str:
    """What to subclass or wrap an object in so that rltune can step it."""
    if hasattr(env, "possible_agents") and hasattr(env, "agent_iter"):
        return "a PettingZoo AEC env: wrap it, rltune.env.PettingZooEnv(env)"
    if hasattr(env, "possible_agents"):
        return "a PettingZoo parallel env: wrap it, rltune.env.ParallelPettingZooEnv(env)"
    return "subclass gymnasium.Env, or rltune.env.MultiAgentEnv for several agents"


class BothKeywords(gym.Wrapper):
    """Calls the env's ``reset`` with both keywords, ``seed`` and ``options``, as RLlib does.

    So an env written ``reset(self, seed, options)`` (no defaults) is reset as
    the sampler resets it, also by gymnasium's checker (which calls ``reset()``).
    """

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        return self.env.reset(seed=seed, options=options)


# Checks of gymnasium's env checker about reproducibility (same seed, same observations and random
# generator): advice, not API breaks. An env that wraps another by composition (RLlib's docs) and
# forwards reset(seed=...) has no np_random of its own and fails them, yet trains fine.
_DETERMINISM_CHECKS = ("check_reset_seed_determinism", "check_step_determinism")
_API_RULES = ("not within the observation space", "cannot be reset with a random seed")


def check_gym_api(env: gym.Env, name: str, ctx: EnvContext, *, advice_level: int = logging.WARNING) -> None:
    """Run gymnasium's env checker once on ``env`` as built; turn a violation into an :class:`EnvError`.

    The env is checked with its wrappers, as the sampler will step it: a
    wrapper that makes an env follow the API passes, one that breaks it
    fails. Seeding determinism that does not hold is a warning; the
    checker's other warnings (advice, not violations) are logged at
    ``advice_level``.
    """
    determinism: list[str] = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            _run_checker(BothKeywords(env), determinism)
    except Exception as exc:  # the checker raises AssertionError, TypeError, AttributeError...
        message = str(exc).split(" See https://")[0].strip() or type(exc).__name__
        raise EnvError(
            f"env {name!r} ({where(ctx)}) breaks the gymnasium API: {message} "
            "(set 'disable_env_checking': True to skip this check)"
        ) from exc
    for text in determinism:
        logger.warning("env %r (%s): seeding is not reproducible: %s", name, where(ctx), text)
    for w in caught:
        text = str(w.message)
        if "is different from the unwrapped version" in text:
            continue
        logger.log(advice_level, "env %r (%s): %s", name, where(ctx), text)


def _run_checker(env: gym.Env, determinism: list[str]) -> None:
    """gymnasium's ``check_env`` step by step (render and close checks skipped), with its own functions.

    The determinism checks' failures go to ``determinism`` instead of raising,
    unless they are API breaks: an observation outside the space, or ``reset``
    raising a TypeError (which the checker reports as an AssertionError).
    """
    c = env_checker
    for space in ("action", "observation"):
        if not hasattr(env, f"{space}_space"):
            raise AttributeError(f"The environment must specify an {space} space.")
    c.check_action_space(env.action_space)
    c.check_space_limit(env.action_space, "action")
    c.check_observation_space(env.observation_space)
    c.check_space_limit(env.observation_space, "observation")
    checks = [c.check_seed_deprecation, c.check_reset_return_info_deprecation, c.check_reset_return_type,
              c.check_reset_seed_determinism, c.check_reset_options, env_reset_passive_checker,
              lambda e: env_step_passive_checker(e, e.action_space.sample()),
              c.check_step_determinism, getattr(c, "check_returned_data_not_reused", None)]
    for check in checks:
        if check is None:  # an older gymnasium without this check
            continue
        try:
            check(env)
        except AssertionError as exc:
            text = str(exc)
            if (getattr(check, "__name__", "") not in _DETERMINISM_CHECKS
                    or any(rule in text for rule in _API_RULES)):
                raise
            determinism.append(text.split(" See https://")[0].strip())


def describe(env: Any) -> str:
    """The env's spec id or class name, for messages."""
    spec = getattr(env, "spec", None)
    return getattr(spec, "id", None) or type(env).__name__
