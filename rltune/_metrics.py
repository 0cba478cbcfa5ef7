"""Reading numbers out of training results: a key by path, and the one number coercion.

Shared by the stop criteria, the study's objective (the metric told to
Optuna), the live display and the MLflow tracking, so that they agree on
what a number is:

- ints, floats and numpy/torch numeric scalars (0-d arrays included) are numbers;
- a bool (Python's or numpy's) is not a number: ``True`` is neither the
  metric 1.0 for Optuna, nor a stop value, nor an MLflow metric (as
  ``num_samples: true`` is refused in a config);
- strings are not numbers (a YAML stop value such as ``2e5`` is parsed by
  the stop criteria as input, not here);
- :func:`finite` also refuses NaN and infinities.
"""

from __future__ import annotations

import math
import numbers
import re
from typing import Any, Mapping

_SEPARATORS = re.compile(r"[/.]")
MISSING = object()  # what lookup returns for a key the result lacks
DEFAULT_POLICY_ID = "default_policy"  # a single-agent trainer's policy, and a MultiAgentEnv's without policies
# policy_reward_mean/<policy id> (also _min, _max, and under evaluation/): the id may hold '/' and '.'
_PER_POLICY = re.compile(r"^(?P<group>(?:evaluation[/.])?policy_reward_(?:mean|min|max))[/.](?P<policy>.+)$")

# RLlib's other spellings of a trainer result's episode stats (rltune.trainers.rllib._rllib_names.add_result_spellings):
# copies of values the result has under its classic names (episode_reward_mean, ...). MLflow logs each value
# once, under the classic name, so these keys are left out of it wherever a result also has episode_reward_mean.
RESULT_SPELLINGS = frozenset({
    "episode_return_mean", "episode_return_min", "episode_return_max", "num_env_steps_sampled_lifetime",
    "env_runners", "sampler_results",
})
# Path parts of RLlib's result keys that a few Ray versions spelled differently: read as rltune's.
_PART_SPELLINGS = {"evaluation_results": "evaluation", "env_runner_results": "env_runners"}
# RLlib's classic stack nests a policy's learner stats one level deeper than rltune's results do:
# info/learner/<policy>/learner_stats/<stat> is rltune's info/learner/<policy>/<stat>.
_DROPPED_PARTS = frozenset({"learner_stats"})


def as_number(value: Any) -> float | None:
    """``value`` as a float (NaN and infinities kept), or None when it is not a number (bools included)."""
    kind = type(value)
    if kind is float or kind is int:  # the common case, first
        return float(value)
    if kind is bool or value is None or isinstance(value, (str, bytes)):
        return None
    if isinstance(value, numbers.Real):  # numpy floats and ints (numpy's bool_ is not a numbers.Real)
        return float(value)
    item = getattr(value, "item", None)  # 0-d arrays and tensors
    if callable(item) and getattr(value, "shape", None) == ():
        try:
            inner = item()
        except (TypeError, ValueError, RuntimeError):
            return None
        return None if isinstance(inner, bool) else as_number(inner)
    return None


def finite(value: Any) -> float | None:
    """``value`` as a finite float, or None (NaN, infinities, bools, text, missing, not a number)."""
    number = as_number(value)
    return number if number is not None and math.isfinite(number) else None


def lookup(result: Mapping[str, Any], key: str) -> Any:
    """``result[key]`` where ``key`` may be a path written with ``/`` or ``.``; :data:`MISSING` if missing.

    A path component may itself contain dots (``"my.metric"``): each level
    tries the longest run of components that names a key there. RLlib's
    ``evaluation_results/env_runner_results/...`` (a few Ray versions' names)
    reads ``evaluation/env_runners/...``.
    """
    if key in result:
        return result[key]
    parts = _SEPARATORS.split(key)
    found = _walk(result, parts)
    if found is MISSING and any(p in _PART_SPELLINGS or p in _DROPPED_PARTS for p in parts):
        found = _walk(result, [_PART_SPELLINGS.get(p, p) for p in parts if p not in _DROPPED_PARTS])
    return found


def per_policy_key(key: str) -> tuple[str, str] | None:
    """``(group, policy id)`` of a per-policy reward key (``policy_reward_mean/main`` -> ``("policy_reward_mean", "main")``).

    None for any other key. The groups are ``policy_reward_mean|min|max``,
    also under ``evaluation/``; the policy id is the rest of the key.
    """
    match = _PER_POLICY.match(key)
    return (match["group"], match["policy"]) if match else None


def not_yet_reported(result: Mapping[str, Any], key: str) -> bool:
    """Whether ``key``, which ``result`` lacks, is a per-policy value that later results may have.

    A multi-agent trainer's ``policy_reward_mean`` (and min, max) holds a
    policy only once an episode in which it acted has ended, as
    ``episode_reward_mean`` is NaN until the first episode ends: so
    ``policy_reward_mean/main`` missing from a result that has
    ``policy_reward_mean`` is "no value yet", not a misspelt key.
    """
    parsed = per_policy_key(key)
    return parsed is not None and isinstance(lookup(result, parsed[0]), Mapping)


def _walk(node: Any, parts: list[str]) -> Any:
    if not parts:
        return node
    if not isinstance(node, Mapping):
        return MISSING
    for n in range(len(parts), 0, -1):
        for sep in ("/", "."):
            name = sep.join(parts[:n])
            if name in node:
                found = _walk(node[name], parts[n:])
                if found is not MISSING:
                    return found
    return MISSING


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
