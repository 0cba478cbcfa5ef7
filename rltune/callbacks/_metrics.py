"""Aggregating the custom metrics and histograms of many episodes into a result."""

from __future__ import annotations

import math
from typing import Any, Iterable


def summarize_custom_metrics(per_episode: Iterable[dict[str, float]]) -> dict[str, float]:
    """``{name}_mean``, ``_min``, ``_max`` over episodes; NaN values are dropped (all NaN gives NaN)."""
    values: dict[str, list[float]] = {}
    for metrics in per_episode:
        for name, value in metrics.items():
            values.setdefault(name, [])
            try:
                number = float(value)
            except (TypeError, ValueError):
                continue
            if not math.isnan(number):
                values[name].append(number)
    summary: dict[str, float] = {}
    for name, numbers in sorted(values.items()):
        summary[f"{name}_mean"] = sum(numbers) / len(numbers) if numbers else math.nan
        summary[f"{name}_min"] = min(numbers) if numbers else math.nan
        summary[f"{name}_max"] = max(numbers) if numbers else math.nan
    return summary


def merge_hist_data(per_episode: Iterable[dict[str, Any]]) -> dict[str, list[float]]:
    """Concatenate each histogram's values over episodes."""
    merged: dict[str, list[float]] = {}
    for hist in per_episode:
        for name, values in hist.items():
            merged.setdefault(name, []).extend(values if isinstance(values, (list, tuple)) else [values])
    return merged
