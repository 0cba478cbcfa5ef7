"""A study's best: the best feasible trial (one metric), or the Pareto front (several metrics).

Feasible trials (every constraint satisfied, :mod:`._constraints`) are
preferred: the best and the front are chosen among them, and among all
complete trials only when none is feasible. The front is ordered by the
first metric, best first; its first member is the study's ``best_trial``
(``best_config.yaml``), and each member's config is written to
``best_configs/trial_NNNNN.yaml`` (:func:`write_front_configs`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Sequence

from rltune.orchestrator._objectives import as_list, describe, directions_of
from rltune.orchestrator._pareto_pruning import dominates, step_values

FRONT_DIR = "best_configs"


def trial_value(frozen: Any) -> Any:
    """The value Optuna holds for a trial: a float, a list (several metrics), or None."""
    if not frozen.values:
        return None
    return frozen.values[0] if len(frozen.values) == 1 else list(frozen.values)


def last_values(frozen: Any) -> Any:
    """:func:`trial_value`, else the trial's latest intermediate value(s) (a running or pruned trial's)."""
    value = trial_value(frozen)
    if value is not None:
        return value
    if frozen.intermediate_values:
        return frozen.intermediate_values[max(frozen.intermediate_values)]
    steps = step_values(frozen)
    return steps[max(steps)] if steps else None


def best_trial_or_none(study: Any) -> Any:
    """``study.best_trial`` (Optuna keeps feasible trials only), or None while there is none."""
    try:
        return study.best_trial
    except ValueError:
        return None


def pick_best(records: Sequence[Any], metric: Any, mode: Any) -> tuple[Any, list[Any]]:
    """(best record, front) of complete records with a value; feasible ones (``record.feasible``) preferred.

    One metric: the front is the best alone (the first trial of a tie, as Optuna).
    """
    complete = [r for r in records if r.state == "COMPLETE" and r.value is not None]
    pool = [r for r in complete if getattr(r, "feasible", True)] or complete
    if not pool:
        return None, []
    directions = directions_of(metric, mode)
    vector: Callable[[Any], list[float]] = lambda r: r.value if isinstance(r.value, list) else [r.value]
    sign = 1 if directions[0] == "maximize" else -1
    if len(directions) == 1:
        best = max(pool, key=lambda r: (sign * r.value, -r.number))
        return best, [best]
    front = [r for r in pool if not any(dominates(vector(o), vector(r), directions) for o in pool)]
    front.sort(key=lambda r: (-sign * vector(r)[0], r.number))
    return front[0], front


def write_front_configs(front: Sequence[Any], study_dir: Path, write: Callable[[Any, Path], Path]) -> list[Path]:
    """Each front member as ``best_configs/trial_NNNNN.yaml`` (``write(record, path)``); stale files removed."""
    directory = study_dir / FRONT_DIR
    directory.mkdir(exist_ok=True)
    paths = [write(r, directory / f"trial_{r.number:05d}.yaml") for r in front]
    for old in directory.glob("trial_*.yaml"):
        if old not in paths:
            os.remove(old)
    return paths


def front_lines(study: Any, metric: Any) -> list[str]:
    """``rltune show``'s lines on a multi-objective study's Pareto front (``study.best_trials``)."""
    if isinstance(metric, str):
        return []
    front = sorted(study.best_trials, key=lambda t: t.number)
    if not front:
        return ["Pareto front: no complete (feasible) trial yet"]
    lines = [f"Pareto front ({len(front)} trial(s), feasible only; best_configs/ holds each as a rltune train -f file):"]
    lines += [f"  trial {t.number}: {describe(t.values, as_list(metric))}" for t in front]
    return lines
