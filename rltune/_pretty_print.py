"""``pretty_print(result)``: a training result as YAML-like text, as RLlib printed it (stdlib, numpy-free, PyYAML)."""

from __future__ import annotations

from typing import Any, Iterable

import yaml

from rltune._json import json_safe

# Keys left out, as RLlib's pretty_print did: the config (printed once elsewhere) and the per-episode lists.
_OMITTED = ("config", "hist_stats")


def pretty_print(result: dict[str, Any], exclude: Iterable[str] | None = None) -> str:
    """``result`` (a ``train()`` result dict) as indented ``key: value`` lines, nested dicts as blocks.

    ``config`` and ``hist_stats``, keys in ``exclude`` and None values are
    left out; numpy values print as numbers and lists.
    """
    skipped = set(_OMITTED) | set(exclude or ())
    shown = {k: v for k, v in result.items() if v is not None and k not in skipped}
    return yaml.safe_dump(json_safe(shown), default_flow_style=False, sort_keys=True)
