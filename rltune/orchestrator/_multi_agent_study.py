"""A study of a multi-agent trainer: its policies' configs searched like the rest, its per-policy keys checked.

- :func:`plain_multiagent`: ``multiagent.policies`` written with
  ``PolicySpec(config={...})`` or RLlib's 4-tuples is rewritten as the
  nested dicts a study file writes, so that search-space entries inside a
  policy's config are found (``multiagent.policies.p0.config.lr``, the same
  Optuna parameter name in Python and in YAML).
- :func:`per_policy_key_problems`: a ``metric`` or ``stop`` key on one
  policy (``policy_reward_mean/<id>``, ``info/learner/<id>/...``) must name
  a policy of the config, checked before any trial runs (a result lacks a
  policy's reward until one of its episodes ends, so a misspelt id would
  otherwise never be noticed); ``policy_reward_mean`` alone, a dict, is no
  metric.
"""

from __future__ import annotations

import difflib
from typing import Any, Iterable

from rltune._metrics import DEFAULT_POLICY_ID, per_policy_key
from rltune.orchestrator._search_space import as_entry

_LEARNER_PREFIXES = ("info/learner/", "info.learner.")
_POLICY_GROUPS = {f"{where}policy_reward_{stat}" for where in ("", "evaluation/") for stat in ("mean", "min", "max")}


def plain_multiagent(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` with its ``multiagent.policies`` as dicts (a new top-level dict; the given one is not changed)."""
    from rltune.trainers.policies._policy_spec import plain_policies

    block = config.get("multiagent")
    if not isinstance(block, dict) or as_entry(block) is not None:
        return config
    policies = block.get("policies")
    if not isinstance(policies, dict) or as_entry(policies) is not None:
        return config
    return {**config, "multiagent": {**block, "policies": plain_policies(policies)}}


def policy_ids(config: dict[str, Any]) -> list[str] | None:
    """The policy ids of a config's ``multiagent.policies`` (a dict or a set/list of ids); None if it has none."""
    block = config.get("multiagent")
    policies = block.get("policies") if isinstance(block, dict) else None
    if not policies or as_entry(policies) is not None:
        return None
    if isinstance(policies, (dict, set, frozenset, list, tuple)):
        return sorted(str(pid) for pid in policies)
    return None


def per_policy_key_problems(field: str, keys: Iterable[str], config: dict[str, Any]) -> list[str]:
    """Problems of result ``keys`` (of ``field``: metric, stop) that name a policy the trainer's config lacks."""
    ids = policy_ids(config)
    problems = []
    for key in keys:
        if key.replace(".", "/") in _POLICY_GROUPS:
            problems.append(f"{field}: {key!r} holds one number per policy; name one policy's, "
                            f"{key}/<policy id> (the policies: {ids or 'none, config.multiagent.policies is not set'})")
            continue
        policy = _named_policy(key, ids or [])
        if policy is None:
            continue
        if ids is None and policy != DEFAULT_POLICY_ID:  # without the block, a MultiAgentEnv's agents share it
            problems.append(f"{field}: {key!r} is a per-policy result of multi-agent training, but "
                            "config.multiagent.policies is not set (a single-agent trainer reports "
                            "episode_reward_mean and info/learner/default_policy/...; a MultiAgentEnv without "
                            f"a multiagent block, {DEFAULT_POLICY_ID!r} alone)")
        elif ids is not None and policy not in ids:
            close = difflib.get_close_matches(policy, ids, n=1, cutoff=0.5)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            problems.append(f"{field}: {key!r} names policy {policy!r}, which is not one of "
                            f"config.multiagent.policies {ids}{hint}")
    return problems


def _named_policy(key: str, ids: list[str]) -> str | None:
    """The policy id a result key names (``policy_reward_mean/<id>``, ``info/learner/<id>/<stat>``), or None."""
    parsed = per_policy_key(key)
    if parsed is not None:
        return parsed[1]
    for prefix in _LEARNER_PREFIXES:
        if key.startswith(prefix):
            rest = key[len(prefix):]
            if rest.startswith(DEFAULT_POLICY_ID) and DEFAULT_POLICY_ID not in ids:
                return None  # the single-agent learner's key
            # The longest known id the rest starts with (ids may hold '/' or '.'), else its first part.
            known = [pid for pid in ids if rest == pid or rest.startswith((pid + "/", pid + "."))]
            return max(known, key=len) if known else rest.replace(".", "/").split("/")[0]
    return None
