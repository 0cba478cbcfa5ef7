"""Observation preprocessing and the action spaces the built-in models support.

Observations are flattened into one float32 vector with gymnasium's own
``flatten`` (Discrete and MultiDiscrete become one-hot, Tuple and Dict are
concatenated); a Box is only reshaped, which keeps the hot path cheap.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.spaces import utils as space_utils

from rltune.errors import SpaceError

SUPPORTED_OBS_SPACES = "Box, Discrete, MultiDiscrete, MultiBinary, Tuple and Dict of those"
SUPPORTED_ACTION_SPACES = "Discrete and Box"


class ObsPreprocessor:
    """Turns observations of ``space`` into flat float32 vectors of length ``size``."""

    def __init__(self, space: gym.Space) -> None:
        if not isinstance(space, gym.Space):
            raise SpaceError(f"observation_space must be a gymnasium.Space, but got {space!r}")
        unsupported = _unsupported_part(space)
        if unsupported is not None or not space.is_np_flattenable:
            raise SpaceError(
                f"observation space {space} is not supported by the built-in models "
                f"(supported: {SUPPORTED_OBS_SPACES})"
            )
        self.space = space
        self.size = int(space_utils.flatdim(space))
        self._is_box = isinstance(space, gym.spaces.Box)
        self._flat_shape = (self.size,)

    def __call__(self, obs: Any) -> np.ndarray:
        """One observation as a new flat float32 vector (never a view of ``obs``, which the env may reuse)."""
        if self._is_box:
            vec = np.array(obs, dtype=np.float32)
            return vec if vec.shape == self._flat_shape else vec.reshape(self.size)
        return np.asarray(space_utils.flatten(self.space, obs), dtype=np.float32)

    def batch(self, observations: Any) -> np.ndarray:
        """A batch of observations (a sequence, or an array with a leading batch axis) as ``[B, size]``.

        From a sequence, always a new array (never a view of an observation, which the env may reuse).
        """
        if self._is_box:
            return np.asarray(observations, dtype=np.float32).reshape(-1, self.size)
        return np.stack([self(o) for o in observations]).astype(np.float32, copy=False)


def _unsupported_part(space: gym.Space) -> gym.Space | None:
    """The first sub-space the flat preprocessor cannot encode as numbers (Text, Sequence, Graph...)."""
    if isinstance(space, (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)):
        return None
    if isinstance(space, gym.spaces.Tuple):
        return next((p for p in map(_unsupported_part, space.spaces) if p is not None), None)
    if isinstance(space, gym.spaces.Dict):
        return next((p for p in map(_unsupported_part, space.spaces.values()) if p is not None), None)
    return space


def check_action_space(space: gym.Space, algorithm: str, allowed: tuple[type, ...]) -> None:
    """Raise :class:`SpaceError` unless ``space`` is one of ``allowed`` for ``algorithm``."""
    if not isinstance(space, allowed):
        names = " and ".join(t.__name__ for t in allowed)
        raise SpaceError(f"{algorithm} supports {names} action spaces, but the env's action space is {space}")
