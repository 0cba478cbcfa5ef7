"""The observation preprocessor catalog: what a policy's model reads for each observation space.

:func:`get_preprocessor` picks, by space:

- ``Box`` (any shape): the values as float32, reshaped to one row (the hot
  path: one copy, nothing else); a 3-d ``Box`` (``H x W x C``, an image)
  is the same row with the kind ``"image"``, so an image encoder can take it;
- ``Discrete``: one-hot (``start`` is the first slot), ``MultiDiscrete``:
  one one-hot per entry, concatenated;
- ``MultiBinary``, ``Tuple`` and ``Dict`` (nested): their parts flattened and
  concatenated in the space's order (a Tuple's order; a Dict's key order,
  which gymnasium keeps sorted when the Dict is built from a dict).

Every preprocessor gives float32 rows of ``size`` numbers (what the samplers
store; a ``uint8`` image's rows stay ``uint8``: ``dtype``) and keeps the structure for the model: ``kind`` names what it
produces (the model catalog picks the encoder by it, see ``_encoders.py``),
``shape`` the row's shape before flattening, and ``parts`` each leaf's path,
space and slice of the row. :meth:`Preprocessor.restore` turns a row back into
the observation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.spaces import utils as space_utils

from rltune.errors import SpaceError

SUPPORTED_OBS_SPACES = "Box, Discrete, MultiDiscrete, MultiBinary, Tuple and Dict of those"


@dataclass(frozen=True)
class ObsPart:
    """One leaf of an observation space: its path (Tuple indices, Dict keys), space and columns of the row."""

    path: tuple[Any, ...]
    space: gym.Space
    columns: slice


class Preprocessor:
    """Turns observations of ``space`` into flat float32 rows of length ``size`` (gymnasium's ``flatten``)."""

    kind = "flat"
    dtype = np.dtype(np.float32)  # of the rows (a uint8 image's are uint8: ImagePreprocessor)

    def __init__(self, space: gym.Space) -> None:
        self.space = space
        self.size = int(space_utils.flatdim(space))
        self.shape: tuple[int, ...] = (self.size,)
        self.parts: tuple[ObsPart, ...] = tuple(_parts(space, (), 0)[0])

    def __call__(self, obs: Any) -> np.ndarray:
        """One observation as a new flat float32 vector (never a view of ``obs``, which the env may reuse)."""
        return np.asarray(space_utils.flatten(self.space, obs), dtype=np.float32)

    def batch(self, observations: Any) -> np.ndarray:
        """A sequence of observations as a new ``[B, size]`` array (never a view of an observation)."""
        return np.stack([self(o) for o in observations]).astype(np.float32, copy=False)

    def restore(self, row: np.ndarray) -> Any:
        """The observation of one row (the inverse of :meth:`__call__`)."""
        return space_utils.unflatten(self.space, np.asarray(row).astype(space_utils.flatten_space(self.space).dtype))


class BoxPreprocessor(Preprocessor):
    """A Box's values as one float32 row: a copy, reshaped (the hot path)."""

    def __init__(self, space: gym.spaces.Box) -> None:
        super().__init__(space)
        self.shape = tuple(space.shape)
        self._flat_shape = (self.size,)

    def __call__(self, obs: Any) -> np.ndarray:
        vec = np.array(obs, dtype=np.float32)
        return vec if vec.shape == self._flat_shape else vec.reshape(self.size)

    def batch(self, observations: Any) -> np.ndarray:
        """A batch of observations (a sequence, or an array with a leading batch axis) as ``[B, size]``."""
        return np.asarray(observations, dtype=np.float32).reshape(-1, self.size)

    def restore(self, row: np.ndarray) -> Any:
        return np.asarray(row).reshape(self.shape).astype(self.space.dtype)


class ImagePreprocessor(BoxPreprocessor):
    """An ``H x W x C`` Box: the same flat row as any Box, of kind ``"image"`` (``shape`` is ``(H, W, C)``).

    A ``uint8`` image stays ``uint8`` (``dtype``) in the rows, the samplers'
    buffers and the batches (4x less memory and IPC than float32); it becomes
    float32, the same numbers, where a tensor for the model is built.
    """

    kind = "image"

    def __init__(self, space: gym.spaces.Box) -> None:
        super().__init__(space)
        if space.dtype == np.uint8:
            self.dtype = np.dtype(np.uint8)

    def __call__(self, obs: Any) -> np.ndarray:
        return np.array(obs, dtype=self.dtype).reshape(self.size)

    def batch(self, observations: Any) -> np.ndarray:
        return np.asarray(observations, dtype=self.dtype).reshape(-1, self.size)


def _parts(space: gym.Space, path: tuple[Any, ...], start: int) -> tuple[list[ObsPart], int]:
    """The leaves of ``space`` from column ``start`` on, and the column after them."""
    if isinstance(space, gym.spaces.Tuple):
        children = list(enumerate(space.spaces))
    elif isinstance(space, gym.spaces.Dict):
        children = list(space.spaces.items())
    else:
        size = int(space_utils.flatdim(space))
        return [ObsPart(path, space, slice(start, start + size))], start + size
    parts: list[ObsPart] = []
    for key, child in children:
        found, start = _parts(child, path + (key,), start)
        parts += found
    return parts, start


def _unsupported_part(space: gym.Space) -> gym.Space | None:
    """The first sub-space the catalog cannot encode as numbers (Text, Sequence, Graph...)."""
    if isinstance(space, (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)):
        return None
    if isinstance(space, gym.spaces.Tuple):
        return next((p for p in map(_unsupported_part, space.spaces) if p is not None), None)
    if isinstance(space, gym.spaces.Dict):
        return next((p for p in map(_unsupported_part, space.spaces.values()) if p is not None), None)
    return space


def get_preprocessor(space: gym.Space) -> Preprocessor:
    """The catalog's preprocessor for observations of ``space``; :class:`SpaceError` naming a space it cannot take."""
    if not isinstance(space, gym.Space):
        raise SpaceError(f"observation_space must be a gymnasium.Space, but got {space!r}")
    if _unsupported_part(space) is not None or not space.is_np_flattenable:
        raise SpaceError(
            f"observation space {space} is not supported by the built-in models (supported: {SUPPORTED_OBS_SPACES})"
        )
    if isinstance(space, gym.spaces.Box):
        return ImagePreprocessor(space) if len(space.shape) == 3 else BoxPreprocessor(space)
    return Preprocessor(space)
