"""Gymnasium spaces as JSON values and back: the one form checkpoints and exported policies save spaces in.

Box (any shape and dtype; uniform bounds as one number, so an image space
stays small), Discrete (with ``start``), MultiDiscrete (with its dtype and
``start``), MultiBinary, and Tuple / Dict of them, nested. Reading never
imports or calls anything the JSON names, and takes the forms older rltune
wrote too: checkpoints' MultiDiscrete without dtype (int64), exported
policies' without ``start``, Discrete without ``start``, Box bounds as full
lists.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

SUPPORTED = "Box, Discrete, MultiDiscrete, MultiBinary, and Tuple / Dict of them"


def space_to_json(space: gym.Space) -> dict[str, Any]:
    """A JSON-able description of ``space``; ValueError for a space of another kind."""
    s = gym.spaces
    if isinstance(space, s.Box):
        return {"type": "Box", "low": _bound(space.low), "high": _bound(space.high),
                "shape": list(space.shape), "dtype": str(space.dtype)}
    if isinstance(space, s.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, s.MultiDiscrete):
        return {"type": "MultiDiscrete", "nvec": space.nvec.tolist(), "dtype": str(space.dtype),
                "start": np.asarray(space.start).tolist()}
    if isinstance(space, s.MultiBinary):
        return {"type": "MultiBinary", "n": np.asarray(space.n).tolist()}
    if isinstance(space, s.Tuple):
        return {"type": "Tuple", "spaces": [space_to_json(x) for x in space.spaces]}
    if isinstance(space, s.Dict):
        return {"type": "Dict", "spaces": {k: space_to_json(x) for k, x in space.spaces.items()}}
    raise ValueError(f"cannot save a {type(space).__name__} space (supported: {SUPPORTED})")


def _bound(values: np.ndarray) -> Any:
    """A Box bound: one number when every entry is the same (an image's 0 and 255), else nested lists."""
    flat = values.reshape(-1)
    if flat.size and (flat == flat[0]).all():
        return flat[0].item()
    return values.tolist()


def space_from_json(value: Any) -> gym.Space:
    """The space :func:`space_to_json` described; ValueError naming what is malformed."""
    if not isinstance(value, dict) or "type" not in value:
        raise ValueError(f"not a saved space: {value!r:.100}")
    s, kind = gym.spaces, value["type"]
    try:
        if kind == "Box":
            dtype, shape = np.dtype(str(value["dtype"])), tuple(int(n) for n in value["shape"])
            low, high = (np.broadcast_to(np.asarray(value[k], dtype=dtype), shape) for k in ("low", "high"))
            return s.Box(low=low.copy(), high=high.copy(), shape=shape, dtype=dtype)
        if kind == "Discrete":
            return s.Discrete(int(value["n"]), start=int(value.get("start", 0)))
        if kind == "MultiDiscrete":
            dtype = np.dtype(str(value.get("dtype", "int64")))
            start = value.get("start")
            return s.MultiDiscrete(np.asarray(value["nvec"], dtype=dtype), dtype=dtype,
                                   start=None if start is None else np.asarray(start, dtype=dtype))
        if kind == "MultiBinary":
            return s.MultiBinary(value["n"])
        if kind == "Tuple":
            return s.Tuple([space_from_json(x) for x in value["spaces"]])
        if kind == "Dict":
            return s.Dict({str(k): space_from_json(x) for k, x in value["spaces"].items()})
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"malformed saved {kind} space: {exc}") from None
    raise ValueError(f"unknown saved space type {kind!r} (known: {SUPPORTED})")
