"""A trial's results as the tracking reads them: ``result.json`` back, steps, learning-curve points."""

from __future__ import annotations

import json
import numbers
from pathlib import Path
from typing import Any, Mapping

from rltune._metrics import MISSING, finite, lookup


def read_results(path: Path) -> list[dict[str, Any]]:
    """The results in a ``result.json`` (one JSON object a line), each step once (the latest line of it)."""
    by_step: dict[int, dict[str, Any]] = {}
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return []
    for i, line in enumerate(lines):
        try:
            result = json.loads(line)
        except ValueError:  # a line cut by a kill
            continue
        if isinstance(result, dict):
            by_step[step_of(result, i + 1)] = result
    return [by_step[step] for step in sorted(by_step)]


def read_json(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def step_of(result: Mapping[str, Any], default: int) -> int:
    step = result.get("training_iteration")
    return int(step) if isinstance(step, numbers.Integral) or (isinstance(step, float) and step.is_integer()) else default


def curve_point(result: Mapping[str, Any], step: int, metric: str) -> dict[str, Any]:
    value = lookup(result, metric)
    timesteps = result.get("timesteps_total")
    return {
        "iteration": step,
        "timesteps": finite(timesteps) if timesteps is not None else None,
        "metric": None if value is MISSING else finite(value),
        "phase": result.get("curriculum_phase"),
        "task": result.get("curriculum_task"),
        "task_probs": _task_probs(result),  # an automatic curriculum's distribution (plots/task_sampling.png)
    }


def _task_probs(result: Mapping[str, Any]) -> dict[str, float] | None:
    curriculum = result.get("curriculum")
    probs = curriculum.get("task_probs") if isinstance(curriculum, Mapping) else None
    return {str(k): v for k, v in probs.items() if finite(v) is not None} if isinstance(probs, Mapping) else None
