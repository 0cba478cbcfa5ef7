"""Seed groups in storage and in ``rltune show``: the per-trial aggregate, its bootstrap interval, each seed's value.

:class:`SeedAttrs` (a study observer) keeps the user attr ``seed_ci`` of a
seed group's trial up to date at each of its results::

    {"aggregate": "mean", "value": 5.0, "low": 3.0, "high": 7.0, "seeds": [9.0, 3.0, 3.0], "level": 0.95}

(the interval is the bootstrap interval of the aggregate over the seeds'
values at that step, :func:`._seed_stats.bootstrap_ci`; it is also in the
results as ``seed_ci_low`` / ``seed_ci_high``, hence in the trial's MLflow
run as metrics). ``rltune show`` adds a column with it (:func:`ci_of`).
"""

from __future__ import annotations

import math
from typing import Any

from rltune._metrics import finite, lookup
from rltune.orchestrator._objectives import as_list
from rltune.orchestrator._events import Observer
from rltune.orchestrator._seed_stats import CI_LEVEL

SEED_CI = "seed_ci"
CI_COLUMN = "seeds: 95% CI"


class SeedAttrs(Observer):
    """Records each seed group's running aggregate and interval as its trial's ``seed_ci`` user attr."""

    def __init__(self, metric: str) -> None:
        self.metric = metric

    def trial_result(self, a: Any) -> None:  # noqa: D102 - see Observer
        result = a.last_result or {}
        if "seeds" not in result or "seed_ci_low" not in result:
            return
        a.trial.set_user_attr(SEED_CI, ci_attr(result, self.metric))


    def trial_ended(self, a: Any, state: str, value: float | None) -> None:  # noqa: D102 - see Observer
        if a.tracking is None or not hasattr(a.tracking, "log_seed_runs"):
            return
        a.tracking.log_seed_runs(seed_runs(a.trial_dir, a.trial.user_attrs.get("seeds") or []), state)


def seed_runs(trial_dir: Any, seeds: list[int]) -> list[dict[str, Any]]:
    """What the seed runs of a trial hold: each seed's index, seed and results (its result.json)."""
    from pathlib import Path

    from rltune.orchestrator._seed_group import seed_results

    return [{"index": i, "seed": seed, "results": seed_results(Path(trial_dir) / f"seed_{i}")}
            for i, seed in enumerate(seeds)]


def seed_observers(plan: Any) -> list[Observer]:
    """The observers a study of ``plan`` needs for its seed groups (none without ``seeds_per_trial``)."""
    return [SeedAttrs(as_list(plan.spec.metric)[0])] if plan.spec.seeds_per_trial > 1 else []


def ci_attr(result: dict[str, Any], metric: str) -> dict[str, Any]:
    """The ``seed_ci`` user attr of a seed group's result (NaN stored as None)."""
    return {"aggregate": result.get("seed_aggregate"), "value": finite(lookup(result, metric)),
            "low": finite(result.get("seed_ci_low")), "high": finite(result.get("seed_ci_high")),
            "seeds": [finite(v) for v in result.get("seeds") or []], "level": CI_LEVEL}


def ci_of(frozen: Any) -> tuple[float, float] | None:
    """A stored trial's interval (low, high), or None (not a seed group's, or too few seeds reached)."""
    found = frozen.user_attrs.get(SEED_CI)
    if not isinstance(found, dict):
        last = frozen.user_attrs.get("last_result") or {}
        found = {"low": last.get("seed_ci_low"), "high": last.get("seed_ci_high")}
    low, high = found.get("low"), found.get("high")
    if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in (low, high)):
        return None
    return float(low), float(high)


def fmt_ci(ci: tuple[float, float] | None) -> str:
    """``[3, 7]`` for a cell (``-`` without an interval)."""
    from rltune.orchestrator._columns import fmt_value

    return "-" if ci is None else f"[{fmt_value(ci[0])}, {fmt_value(ci[1])}]"
