"""Gymnasium spaces as JSON values and back (checkpoints save the spaces of the policies they hold).

Only data: Box, Discrete, MultiDiscrete, MultiBinary, and Tuple / Dict of
them. Reading never imports or calls anything a checkpoint names.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


def space_to_json(space: gym.Space) -> dict[str, Any]:
    """A JSON-able description of ``space``; ValueError for a space of another kind."""
    s = gym.spaces
    if isinstance(space, s.Box):
        return {"type": "Box", "low": space.low.tolist(), "high": space.high.tolist(),
                "shape": list(space.shape), "dtype": str(space.dtype)}
    if isinstance(space, s.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, s.MultiDiscrete):
        return {"type": "MultiDiscrete", "nvec": space.nvec.tolist()}
    if isinstance(space, s.MultiBinary):
        return {"type": "MultiBinary", "n": np.asarray(space.n).tolist()}
    if isinstance(space, s.Tuple):
        return {"type": "Tuple", "spaces": [space_to_json(x) for x in space.spaces]}
    if isinstance(space, s.Dict):
        return {"type": "Dict", "spaces": {k: space_to_json(x) for k, x in space.spaces.items()}}
    raise ValueError(f"cannot save a {type(space).__name__} space")


def space_from_json(value: Any) -> gym.Space:
    """The space :func:`space_to_json` described; ValueError naming what is malformed."""
    if not isinstance(value, dict) or "type" not in value:
        raise ValueError(f"not a saved space: {value!r:.100}")
    s, kind = gym.spaces, value["type"]
    try:
        if kind == "Box":
            dtype = np.dtype(str(value["dtype"]))
            low, high = np.asarray(value["low"], dtype=dtype), np.asarray(value["high"], dtype=dtype)
            return s.Box(low=low, high=high, shape=tuple(value["shape"]), dtype=dtype)
        if kind == "Discrete":
            return s.Discrete(int(value["n"]), start=int(value.get("start", 0)))
        if kind == "MultiDiscrete":
            return s.MultiDiscrete(np.asarray(value["nvec"], dtype=np.int64))
        if kind == "MultiBinary":
            return s.MultiBinary(value["n"])
        if kind == "Tuple":
            return s.Tuple([space_from_json(x) for x in value["spaces"]])
        if kind == "Dict":
            return s.Dict({str(k): space_from_json(x) for k, x in value["spaces"].items()})
    except (KeyError, TypeError) as exc:
        raise ValueError(f"malformed saved {kind} space: {exc}") from None
    raise ValueError(f"unknown saved space type {kind!r}")

