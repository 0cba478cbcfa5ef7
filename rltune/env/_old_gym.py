"""Envs on the old gym API (``reset()`` returning the observation only, ``step`` a 4-tuple), and Atari ids.

RLlib's older docs and many envs written before gym 0.26 use that API. Such
an env is recognised by its ``reset`` taking no ``seed`` (the sampler resets
every env with ``reset(seed=..., options=...)``), and wrapped in
:class:`OldGymApi`, whose step converts the 4-tuple with gymnasium's own
``step_api_compatibility`` (``done`` with ``info["TimeLimit.truncated"]`` is
``truncated``, else ``terminated``). A warning says so once per env; the
config key ``auto_wrap_old_gym_envs: false`` (RLlib's name) makes it an error
instead. An env of the old ``gym`` package itself (gym spaces) is not
converted here: shimmy's ``GymV21CompatibilityV0`` does that.
"""

from __future__ import annotations

import importlib.util
import inspect
import logging
import re
from typing import Any

import gymnasium as gym
from gymnasium.utils.step_api_compatibility import convert_to_terminated_truncated_step_api

from rltune.errors import EnvError

logger = logging.getLogger(__name__)
_warned: set[str] = set()


class OldGymApi(gym.Wrapper):
    """An old-gym-API env (``reset() -> obs``, ``step() -> (obs, reward, done, info)``) on gymnasium's API.

    ``reset(seed=...)`` calls the env's own ``seed(seed)`` when it has one; ``options`` are not passed on.
    """

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        seeder = getattr(self.env.unwrapped, "seed", None)
        if seed is not None and callable(seeder):
            seeder(seed)
        return self.env.reset(), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        return convert_to_terminated_truncated_step_api(self.env.step(action))


def uses_old_gym_api(env: gym.Env) -> bool:
    """Whether the env's own ``reset`` takes no ``seed`` (nor ``**kwargs``): the old gym API."""
    reset = getattr(type(env.unwrapped), "reset", None)
    if reset is None or reset is gym.Env.reset:
        return False
    try:
        params = list(inspect.signature(reset).parameters.values())[1:]
    except (TypeError, ValueError):  # a builtin or C-implemented reset: nothing to read
        return False
    return not any(p.name == "seed" or p.kind is p.VAR_KEYWORD for p in params)


def on_gymnasium_api(env: gym.Env, name: str, place: str, *, auto_wrap: bool) -> gym.Env:
    """``env`` itself, or wrapped in :class:`OldGymApi` if it is on the old gym API; EnvError if that is not allowed."""
    if not uses_old_gym_api(env):
        return env
    if not auto_wrap or env is not env.unwrapped:
        why = ("auto_wrap_old_gym_envs is false" if not auto_wrap else
               f"it is inside a wrapper ({type(env).__name__}), so it cannot be converted from outside")
        raise EnvError(f"env {name!r} ({place}) is on the old gym API (reset() without seed, a 4-tuple step) and "
                       f"{why}: update it to gymnasium's API (reset(*, seed=None, options=None) -> (obs, info), "
                       "step -> (obs, reward, terminated, truncated, info)), or wrap the env itself in "
                       "rltune.env.OldGymApi")
    if name not in _warned:
        _warned.add(name)
        logger.warning("env %r is on the old gym API (reset() -> obs, step() -> 4-tuple): running it through "
                       "rltune.env.OldGymApi (gymnasium's step-API conversion); update the env to gymnasium's API, "
                       "or set auto_wrap_old_gym_envs: false to refuse such envs", name)
    return OldGymApi(env)


# Atari ids: gymnasium's ALE/<Game>-v5 and gym's <Game>[-ram][NoFrameskip|Deterministic]-v0/v4.
_ATARI_GAMES = frozenset("""
Adventure AirRaid Alien Amidar Assault Asterix Asteroids Atlantis BankHeist BattleZone BeamRider Berzerk Bowling
Boxing Breakout Carnival Centipede ChopperCommand CrazyClimber Defender DemonAttack DoubleDunk ElevatorAction Enduro
FishingDerby Freeway Frostbite Gopher Gravitar Hero IceHockey Jamesbond JourneyEscape Kangaroo Krull KungFuMaster
MontezumaRevenge MsPacman NameThisGame Phoenix Pitfall Pong Pooyan PrivateEye Qbert Riverraid RoadRunner Robotank
Seaquest Skiing Solaris SpaceInvaders StarGunner Tennis TimePilot Tutankham UpNDown Venture VideoPinball
WizardOfWor YarsRevenge Zaxxon
""".split())
_GYM_ATARI = re.compile(r"^(?P<game>[A-Za-z]+?)(-ram)?(NoFrameskip|Deterministic)?-v[04]$")


def atari_id_problem(env_id: str) -> str | None:
    """For an Atari id that gymnasium does not know: what to install (or to import) to run it; else None."""
    match = _GYM_ATARI.match(env_id)
    if not (env_id.startswith("ALE/") or (match and match.group("game") in _ATARI_GAMES)):
        return None
    if importlib.util.find_spec("ale_py") is None:
        return (f"env {env_id!r} is an Atari game, and the Arcade Learning Environment is not installed: "
                "pip install ale-py (it registers the ALE/ and the NoFrameskip ids with gymnasium)")
    ale_py = importlib.import_module("ale_py")
    gym.register_envs(ale_py)  # gymnasium 1.x registers ALE's ids only when asked to
    return None if env_id in gym.registry else f"env {env_id!r} is not an id ale-py {getattr(ale_py, '__version__', '')} registers"
