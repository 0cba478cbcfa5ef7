"""The JSON form of configs and results (stdlib only): one function for trainers and the orchestrator."""

from __future__ import annotations

from typing import Any, Callable


def json_safe(value: Any, *, opaque: Callable[[Any], Any] = repr) -> Any:
    """A JSON form of a config or result value.

    Numpy (and torch) scalars as numbers, arrays as lists, classes and
    functions as ``'module:qualname'``; anything else as ``opaque(value)``
    (its repr by default; a checkpoint marks it so that a restore asks for it).
    """
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return {str(k): json_safe(v, opaque=opaque) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v, opaque=opaque) for v in value]
    item = getattr(value, "item", None)
    if callable(item) and getattr(value, "shape", None) == ():
        try:
            return json_safe(item(), opaque=opaque)
        except (TypeError, ValueError):
            pass
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        try:
            return json_safe(tolist(), opaque=opaque)
        except (TypeError, ValueError):
            pass
    module = getattr(value, "__module__", None)
    qualname = getattr(value, "__qualname__", None)
    if module and qualname and "<" not in qualname and module != "__main__":
        return f"{module}:{qualname}"
    return opaque(value)
