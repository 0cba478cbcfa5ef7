"""A module that registers a gymnasium id when imported: gymnasium's ``"module:Env-v0"`` form."""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from trainers.envs import CountingEnv, ResetReturnsObsOnlyEnv

PLUGIN_ID = "RltunePluginCounting-v0"


def make_counting(**kwargs: Any) -> CountingEnv:
    """An entry point taking env_config as keyword arguments, as gymnasium passes them."""
    return CountingEnv(kwargs)


def make_old_api(**kwargs: Any) -> ResetReturnsObsOnlyEnv:
    """An entry point whose env breaks the gymnasium API (reset returns the obs alone)."""
    return ResetReturnsObsOnlyEnv(kwargs)


if PLUGIN_ID not in gym.registry:
    gym.register(PLUGIN_ID, entry_point=make_counting)
