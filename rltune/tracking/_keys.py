"""Results and configs as MLflow keys: metrics with '/' keys, params with dotted keys, run names."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Mapping

from rltune._metrics import RESULT_SPELLINGS, finite
from rltune._trial_files import json_safe
from rltune.tracking._mlflow_compat import MAX_ENTITY_KEY_LENGTH

_SKIP_RESULT_KEYS = frozenset({"config", "hist_stats"})  # config: not a metric; hist_stats: per-episode lists
_BAD_KEY_CHARS = re.compile(r"[^/\w.\- :]")


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


def flatten_params(config: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """A nested config as ``{"model.fcnet_hiddens": "[64, 64]", ...}``: dotted keys, values as text.

    Lists are JSON, functions and classes ``module:qualname`` (as in params.json), an empty dict ``{}``.
    """
    out: dict[str, str] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(flatten_params(value, name + "."))
            continue
        safe = json_safe(value)
        out[name] = safe if isinstance(safe, str) else json.dumps(safe, sort_keys=True, default=repr)
    return out


def flatten_metrics(result: Mapping[str, Any], prefix: str = "") -> dict[str, float]:
    """The numeric leaves of a result as ``{"info/learner/default_policy/entropy": 0.69, ...}``.

    Bools (not numbers, see :mod:`rltune._metrics`), NaN, infinities, strings, lists (``hist_stats``) and the
    ``config`` entry are left out, and so are RLlib's other spellings of the episode stats
    (:data:`~rltune._metrics.RESULT_SPELLINGS`: ``env_runners/...``, ``episode_return_mean``) beside
    ``episode_reward_mean``: MLflow gets each value once, under rltune's classic name.
    """
    out: dict[str, float] = {}
    copies = "episode_reward_mean" in result
    for key, value in result.items():
        if not prefix and key in _SKIP_RESULT_KEYS or copies and key in RESULT_SPELLINGS:
            continue
        name = f"{prefix}{key}"
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

