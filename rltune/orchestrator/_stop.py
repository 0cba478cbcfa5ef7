"""Stop criteria as in Ray Tune: a trial stops as soon as ANY result key reaches its value.

``StopCriteria({"episode_reward_mean": 475, "timesteps_total": 200_000})``
stops when ``result["episode_reward_mean"] >= 475`` or
``result["timesteps_total"] >= 200_000``. Nested result keys are written
with ``/`` or ``.``: ``info/learner/default_policy/kl``.

Invariants:

- NaN (e.g. ``episode_reward_mean`` before the first episode ends) and
  None never satisfy a criterion.
- The keys are checked against the first result: a key the first result
  lacks raises :class:`ConfigError` naming it and the closest result key.
  A key that goes missing later does not satisfy its criterion.
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass
from typing import Any, Mapping

from rltune.errors import ConfigError

_SEPARATORS = re.compile(r"[/.]")
_MISSING = object()


@dataclass(frozen=True)
class StopReason:
    """The criterion that stopped a trial: ``key`` reached ``threshold`` with ``value``."""

    key: str
    value: float
    threshold: float

    def __str__(self) -> str:
        return f"{self.key} = {self.value:g} >= {self.threshold:g}"


class StopCriteria:
    """``{result_key: threshold}``; :meth:`check` returns the first criterion a result meets, or None.

    ``where`` names the criteria's source in error messages (``--stop``, a file).
    """

    def __init__(self, criteria: Mapping[str, Any] | None, *, where: str = "stop criteria") -> None:
        self.where = where
        if criteria is None:
            criteria = {}
        if not isinstance(criteria, Mapping):
            raise ConfigError(
                f"must be a mapping of result keys to values, e.g. {{\"episode_reward_mean\": 475}}, "
                f"but got {type(criteria).__name__}",
                where=where,
            )
        problems = []
        self.criteria: dict[str, float] = {}
        for key, value in criteria.items():
            number = _as_number(value)
            if not isinstance(key, str) or not key:
                problems.append(f"{key!r}: a stop key must be a non-empty string")
            elif number is None:
                problems.append(f"{key}: the value must be a number, but got {value!r}")
            elif not math.isfinite(number):
                # NaN never stops and inf never does either; -inf stops at once: each is a mistake,
                # and "no criterion" is written by leaving the key out.
                problems.append(f"{key}: the value must be a finite number, but got {value!r}")
            else:
                self.criteria[key] = number
        if problems:
            raise ConfigError(problems, where=where)
        self._checked = False

    def __bool__(self) -> bool:
        return bool(self.criteria)

    def __repr__(self) -> str:
        return f"StopCriteria({self.criteria!r})"

    def check(self, result: Mapping[str, Any]) -> StopReason | None:
        """The first criterion ``result`` meets (``result[key] >= threshold``), or None.

        The first call also checks that every key is in ``result``.
        """
        if not self._checked:
            self.validate_keys(result)
            self._checked = True
        for key, threshold in self.criteria.items():
            value = _as_number(lookup(result, key))
            if value is not None and value >= threshold:  # NaN >= x is False: NaN never stops
                return StopReason(key, value, threshold)
        return None

    def validate_keys(self, result: Mapping[str, Any]) -> None:
        """Raise :class:`ConfigError` for every key that ``result`` lacks or that is not a number in it."""
        problems = []
        leaves = flatten_keys(result)
        for key in self.criteria:
            value = lookup(result, key)
            if value is _MISSING:
                sep = "." if "." in key and "/" not in key else "/"
                candidates = {k.replace("/", sep): k for k in leaves}
                close = difflib.get_close_matches(key, list(candidates), n=1, cutoff=0.5)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                problems.append(f"{key!r} is not a key of the training results{hint}")
            elif isinstance(value, Mapping):
                inner = ", ".join(sorted(map(str, value))[:8])
                problems.append(f"{key!r} is a group of results, not a number; pick one of its keys: {inner}")
            elif _as_number(value) is None and value is not None:
                problems.append(f"{key!r} is not a number in the results (it is {type(value).__name__})")
        if problems:
            raise ConfigError(problems, where=self.where)


def lookup(result: Mapping[str, Any], key: str) -> Any:
    """``result[key]`` where ``key`` may be a path written with ``/`` or ``.``; a sentinel if missing.

    A path component may itself contain dots (``"my.metric"``): each level
    tries the longest run of components that names a key there.
    """
    if key in result:
        return result[key]
    return _walk(result, _SEPARATORS.split(key))


def _walk(node: Any, parts: list[str]) -> Any:
    if not parts:
        return node
    if not isinstance(node, Mapping):
        return _MISSING
    for n in range(len(parts), 0, -1):
        for sep in ("/", "."):
            name = sep.join(parts[:n])
            if name in node:
                found = _walk(node[name], parts[n:])
                if found is not _MISSING:
                    return found
    return _MISSING


def flatten_keys(result: Mapping[str, Any], prefix: str = "") -> list[str]:
    """Every leaf key of a nested result, as ``a/b/c`` paths."""
    keys = []
    for name, value in result.items():
        path = f"{prefix}{name}"
        if isinstance(value, Mapping) and value:
            keys.extend(flatten_keys(value, path + "/"))
        else:
            keys.append(path)
    return keys


def _as_number(value: Any) -> float | None:
    """A float for ints, floats, numpy scalars and numeric strings (YAML reads ``2e5`` as a string); else None."""
    if isinstance(value, bool) or value is None or value is _MISSING:
        return None
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None
