"""Stop criteria as in Ray Tune: a trial stops as soon as ANY result key reaches its value.

``StopCriteria({"episode_reward_mean": 475, "timesteps_total": 200_000})``
stops when ``result["episode_reward_mean"] >= 475`` or
``result["timesteps_total"] >= 200_000``. Nested result keys are written
with ``/`` or ``.``: ``info/learner/default_policy/kl``.

Invariants:

- NaN (e.g. ``episode_reward_mean`` before the first episode ends) and
  None never satisfy a criterion.
- A threshold is a finite number; one of a counter that starts at 0 and
  only grows (``training_iteration``, ``timesteps_total``,
  ``time_total_s``, ... :data:`COUNTERS`) must be > 0: 0 or less would stop
  every trial at its first result, which is no limit anyone means.
- The keys are checked against the first result: a key the first result
  lacks raises :class:`ConfigError` naming it and the closest result key,
  unless it is a per-policy reward (``policy_reward_mean/main``) whose
  policy has no finished episode yet.
  A key that goes missing later does not satisfy its criterion.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass
from typing import Any, Mapping

from rltune._metrics import MISSING as _MISSING
from rltune._metrics import as_number, flatten_keys, lookup, not_yet_reported
from rltune.errors import ConfigError

__all__ = ["StopCriteria", "StopReason", "flatten_keys", "lookup"]

# Result keys that count up from 0 (training iterations, steps, episodes, seconds), in rltune's and RLlib's names.
COUNTERS = frozenset({
    "training_iteration", "timesteps_total", "time_total_s", "episodes_total", "agent_timesteps_total",
    "timesteps_this_iter", "time_this_iter_s", "episodes_this_iter", "num_env_steps_sampled",
    "num_agent_steps_sampled", "num_env_steps_sampled_lifetime", "num_agent_steps_sampled_lifetime",
    "num_episodes_lifetime", "num_env_steps_trained", "num_agent_steps_trained", "time_since_restore",
    "timesteps_since_restore", "iterations_since_restore",
})


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
            number = _threshold(value)
            if not isinstance(key, str) or not key:
                problems.append(f"{key!r}: a stop key must be a non-empty string")
            elif number is None:
                problems.append(f"{key}: the value must be a number, but got {value!r}")
            elif not math.isfinite(number):
                # NaN never stops and inf never does either; -inf stops at once: each is a mistake,
                # and "no criterion" is written by leaving the key out.
                problems.append(f"{key}: the value must be a finite number, but got {value!r}")
            elif number <= 0 and _counter(key):
                problems.append(f"{key}: must be > 0, but got {value!r} ({key} counts up from 0, so a trial would "
                                "stop at its first result; leave the key out for no limit)")
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
            value = as_number(lookup(result, key))
            if value is not None and value >= threshold:  # NaN >= x is False: NaN never stops
                return StopReason(key, value, threshold)
        return None

    def validate_keys(self, result: Mapping[str, Any]) -> None:
        """Raise :class:`ConfigError` for every key that ``result`` lacks or that is not a number in it."""
        problems = []
        leaves = flatten_keys(result)
        for key in self.criteria:
            value = lookup(result, key)
            if value is _MISSING and not_yet_reported(result, key):
                continue
            if value is _MISSING:
                sep = "." if "." in key and "/" not in key else "/"
                candidates = {k.replace("/", sep): k for k in leaves}
                close = difflib.get_close_matches(key, list(candidates), n=1, cutoff=0.5)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                problems.append(f"{key!r} is not a key of the training results{hint}")
            elif isinstance(value, Mapping):
                inner = ", ".join(sorted(map(str, value))[:8])
                problems.append(f"{key!r} is a group of results, not a number; pick one of its keys: {inner}")
            elif as_number(value) is None and value is not None:
                problems.append(f"{key!r} is not a number in the results (it is {type(value).__name__})")
        if problems:
            raise ConfigError(problems, where=self.where)


def _counter(key: Any) -> bool:
    """Whether ``key`` names a counter (also inside RLlib's ``env_runners`` block: ``env_runners/num_episodes_lifetime``)."""
    if not isinstance(key, str):
        return False
    block, _, name = key.replace(".", "/").rpartition("/")
    return name in COUNTERS and block in ("", "env_runners", "sampler_results")


def _threshold(value: Any) -> float | None:
    """A stop value as a float: a number, or numeric text (YAML reads ``2e5`` as a string); else None."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return as_number(value)


def with_timesteps(stop: dict[str, Any] | None, steps: int, *, where: str) -> dict[str, Any]:
    """Stop criteria plus ``timesteps_total: steps`` (``rltune train --steps N``); training stops at either."""
    if steps < 1:
        raise ConfigError(f"must be >= 1, but got {steps}", where=where)
    if stop and "timesteps_total" in stop:
        given = stop["timesteps_total"]
        shown = format(given, "g") if isinstance(given, (int, float)) else repr(given)
        raise ConfigError(f"the stop criteria have timesteps_total: {shown} already; give it once", where=where)
    return {**(stop or {}), "timesteps_total": steps}
