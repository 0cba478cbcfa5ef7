"""The numbers of a seed group: seeds derived from a trial's seed, the aggregate over seeds, its bootstrap interval.

Pure functions (no processes, no storage), used by the trial process of a
``seeds_per_trial`` study (:mod:`rltune.orchestrator._seed_group`) and by the
final evaluation.

Aggregates (``aggregate:`` in a study), over the finite values only:

- ``mean``, ``median``;
- ``iqm``: the interquartile mean, the mean of the middle 50% (scipy's
  ``trim_mean(values, 0.25)``; with fewer than 4 values it is the mean of
  the values left after trimming, the median for 1 to 3 seeds' odd counts);
- ``min``: the WORST seed: the lowest value when the study maximizes, the
  highest when it minimizes.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any, Iterable, Sequence

AGGREGATES = ("mean", "median", "iqm", "min")
CI_LEVEL = 0.95
CI_RESAMPLES = 2000
RACE_NEXT = "seed_race_next"  # a race group's result that ends a seed, not the trial (docs/seeds.md)


def derive_seed(trial_seed: int, index: int, salt: str = "seed") -> int:
    """The seed of run ``index`` of a trial whose seed is ``trial_seed``; run 0 keeps the trial's own seed.

    The others are a hash of (trial seed, index, ``salt``), below 2**31 (numpy's
    legacy RandomState takes it); ``salt`` "final" gives the final evaluation's seeds.
    """
    if index == 0 and salt == "seed":
        return int(trial_seed)
    digest = hashlib.sha256(f"rltune:{salt}:{int(trial_seed)}:{int(index)}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def finite_values(values: Iterable[Any]) -> list[float]:
    """The finite numbers among ``values`` (None, NaN, infinities and non-numbers left out)."""
    out = []
    for value in values:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if math.isfinite(value):
            out.append(float(value))
    return out


def aggregate(values: Sequence[Any], how: str = "mean", mode: str = "max") -> float:
    """The aggregate ``how`` of the finite ``values`` (NaN when there is none); see the module docstring."""
    xs = finite_values(values)
    if not xs:
        return math.nan
    if how == "mean":
        return math.fsum(xs) / len(xs)
    if how == "median":
        import statistics

        return float(statistics.median(xs))
    if how == "iqm":
        from scipy.stats import trim_mean

        return float(trim_mean(xs, 0.25))
    if how == "min":
        return min(xs) if mode == "max" else max(xs)
    raise ValueError(f"aggregate must be one of {', '.join(AGGREGATES)}, but got {how!r}")


def bootstrap_ci(values: Sequence[Any], how: str = "mean", mode: str = "max", *, level: float = CI_LEVEL,
                 n_resamples: int = CI_RESAMPLES, seed: int = 0) -> tuple[float, float]:
    """The bootstrap confidence interval (``level``, percentile method) of the aggregate of ``values``.

    scipy's ``stats.bootstrap``; (NaN, NaN) with fewer than 2 finite values
    (no spread to resample), and the single value twice when they are all equal.
    """
    xs = finite_values(values)
    if len(xs) < 2:
        return math.nan, math.nan
    if min(xs) == max(xs):
        return xs[0], xs[0]
    import numpy as np
    from scipy.stats import bootstrap

    if how not in AGGREGATES:
        raise ValueError(f"aggregate must be one of {', '.join(AGGREGATES)}, but got {how!r}")
    from scipy.stats import trim_mean

    worst = np.min if mode == "max" else np.max
    vectorized = {"mean": np.mean, "median": np.median, "iqm": lambda x, axis: trim_mean(x, 0.25, axis=axis),
                  "min": worst}

    def statistic(sample: Any, axis: int = -1) -> Any:
        return vectorized[how](sample, axis=axis)

    found = bootstrap((np.asarray(xs),), statistic, n_resamples=n_resamples, confidence_level=level,
                      method="percentile", random_state=np.random.default_rng(seed), vectorized=True)
    low, high = float(found.confidence_interval.low), float(found.confidence_interval.high)
    return low, high


def aggregate_result(results: Sequence[dict[str, Any] | None], metric_values: Sequence[Any], *, how: str,
                     mode: str) -> dict[str, Any]:
    """One result of a seed group: every numeric leaf aggregated across ``results`` (the seeds' results at a step).

    ``results``: the result of each seed counted at this step (None: not
    counted); the first counted one gives the non-numeric keys.
    ``metric_values``: the study metric of every seed (None: not reached), kept
    as ``result["seeds"]`` in seed order.
    """
    counted = [r for r in results if r is not None]
    merged = _merge(counted, how, mode)
    merged["seeds"] = [None if v is None or not finite_values([v]) else float(v) for v in metric_values]
    merged["seeds_reached"] = len(counted)
    merged["seed_aggregate"] = how
    return merged


def _merge(results: list[dict[str, Any]], how: str, mode: str) -> dict[str, Any]:
    """The first result with each numeric leaf replaced by its aggregate across ``results``."""
    first = results[0]
    out: dict[str, Any] = {}
    for key, value in first.items():
        if isinstance(value, dict):
            out[key] = _merge([r[key] for r in results if isinstance(r.get(key), dict)], how, mode)
        elif isinstance(value, bool) or not isinstance(value, (int, float)):
            out[key] = value
        else:
            found = aggregate([r.get(key) for r in results], how, mode)
            out[key] = int(round(found)) if isinstance(value, int) and math.isfinite(found) else found
    return out
