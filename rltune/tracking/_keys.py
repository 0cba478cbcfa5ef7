"""Results and configs as MLflow keys: metrics with '/' keys, params with dotted keys, run names."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Mapping

from rltune._metrics import finite
from rltune._trial_files import json_safe
from rltune.tracking._mlflow_compat import MAX_ENTITY_KEY_LENGTH

_SKIP_RESULT_KEYS = frozenset({"config", "hist_stats"})  # config: not a metric; hist_stats: per-episode lists
_BAD_KEY_CHARS = re.compile(r"[^/\w.\- :]")
# Result dicts keyed by policy id (multi-agent): each id is one part of the metric name.
_POLICY_DICTS = frozenset({"info/learner", *(f"{where}policy_reward_{stat}" for where in ("", "evaluation/")
                                                for stat in ("mean", "min", "max"))})
_POLICIES_PARAM = "multiagent.policies"  # the config's dict keyed by policy id, in flatten_params' dotted names


def clean_key(key: str, limit: int | None = None) -> str:
    """A metric/param/tag key MLflow accepts: odd characters as '_', no empty or '.'/'..' parts, at most 250 chars."""
    key = _BAD_KEY_CHARS.sub("_", key)
    parts = [p if p not in ("", ".", "..") else "_" for p in key.split("/")]
    key = "/".join(parts) or "_"
    limit = limit or MAX_ENTITY_KEY_LENGTH
    if len(key) > limit:
        digest = hashlib.sha1(key.encode()).hexdigest()[:8]
        key = key[: limit - 9] + "-" + digest
    return key


def policy_key(policy_id: Any) -> str:
    """A policy id as one part of an MLflow key: itself, or, when MLflow would not take it as it is, cleaned + a hash.

    Ids with characters MLflow refuses (``"red@1"``), a ``/`` (which would
    nest the key), and ``""``, ``"."``, ``".."`` become ``red_1-<8 hex
    digits of the id>``: two ids that clean alike (``red@1``, ``red#1``)
    keep distinct metrics, and an id has the same key at every step.
    """
    text = str(policy_id)
    safe = _BAD_KEY_CHARS.sub("_", text).replace("/", "_")
    if safe == text and safe not in ("", ".", ".."):
        return text
    return f"{safe}-{hashlib.sha1(text.encode()).hexdigest()[:8]}"


def flatten_params(config: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """A nested config as ``{"model.fcnet_hiddens": "[64, 64]", ...}``: dotted keys, values as text.

    Lists are JSON, functions and classes ``module:qualname`` (as in params.json), an empty dict ``{}``;
    the policy ids under ``multiagent.policies`` as :func:`policy_key` writes them.
    """
    out: dict[str, str] = {}
    for key, value in config.items():
        name = f"{prefix}{policy_key(key) if prefix == _POLICIES_PARAM + '.' else key}"
        if isinstance(value, Mapping) and value:
            out.update(flatten_params(value, name + "."))
            continue
        safe = json_safe(value)
        out[name] = safe if isinstance(safe, str) else json.dumps(safe, sort_keys=True, default=repr)
    return out


def with_defaults(defaults: Mapping[str, str], params: Mapping[str, str]) -> dict[str, str]:
    """Flat ``params`` with the flat ``defaults`` they do not give.

    A default that the params give in more detail is left out: an empty
    ``multiagent.policies`` (``{}``) next to ``multiagent.policies.p0.config.lr``
    would say there are no policies.
    """
    given = set(params)
    prefixes = {key.rsplit(".", n)[0] + "." for key in given for n in range(1, key.count(".") + 1)}
    return {**{k: v for k, v in defaults.items() if k + "." not in prefixes}, **params}


def flatten_metrics(result: Mapping[str, Any], prefix: str = "") -> dict[str, float]:
    """The numeric leaves of a result as ``{"info/learner/default_policy/entropy": 0.69, ...}``.

    Bools (not numbers, see :mod:`rltune._metrics`), NaN, infinities, strings, lists (``hist_stats``) and the
    ``config`` entry are left out. Policy ids (``policy_reward_mean/<id>``, ``info/learner/<id>/...``) are
    written by :func:`policy_key`.
    """
    out: dict[str, float] = {}
    by_policy = prefix[:-1] in _POLICY_DICTS
    for key, value in result.items():
        if not prefix and key in _SKIP_RESULT_KEYS:
            continue
        name = f"{prefix}{policy_key(key) if by_policy else key}"
        if isinstance(value, Mapping):
            out.update(flatten_metrics(value, name + "/"))
            continue
        number = finite(value)
        if number is not None:
            out[clean_key(name)] = number
    return out


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_fmt(v) for v in value) + "]"
    return str(value)


def run_name(trial_number: int, key_params: Mapping[str, Any]) -> str:
    """``trial_00003 lr=0.0003 num_sgd_iter=10`` (at most 250 characters)."""
    parts = [f"trial_{trial_number:05d}"] + [f"{k.rsplit('.', 1)[-1]}={_fmt(v)}" for k, v in key_params.items()]
    return " ".join(parts)[:250]

