"""Pruning a multi-objective study: a trial dominated at the same step by k members of the front is pruned.

Optuna's ``Trial.report`` and pruners take one value, so a multi-objective
study keeps its trials' values per step in the trial's user attr
``objectives@<step>`` (a list, one value per metric; a step run again after a
restore replaces it) and prunes with this rule (``scheduler: {type: pareto,
k: 2, warmup_steps: 3}``):

    At step s (s > warmup_steps), take the other trials of the study
    (running, complete or pruned) that reached s, and their front at s: those
    no other of them dominates at s. The trial is pruned when at least k
    members of that front dominate its values at s.

A dominates B when A is at least as good in every metric (by its mode) and
better in one. Equal values do not dominate (a tie is never pruned), a trial
on the front at s is never pruned at s, and with fewer than k trials at s
nothing is pruned.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from pydantic import Field, ValidationError

from rltune._validation import UserInput
from rltune.orchestrator._optuna_compat import prune_as_of

STEP_ATTR = "objectives@"  # user attr prefix: objectives@12 = [v1, v2] at training_iteration 12


class ParetoPruning(UserInput):
    """Options of ``scheduler: {type: pareto, ...}``."""

    k: int = Field(2, ge=1, description="Front members that must dominate a trial at a step to prune it.")
    warmup_steps: int = Field(0, ge=0, description="No trial is pruned at a step <= warmup_steps.")


def is_pareto(value: Any) -> bool:
    """Whether a ``scheduler``/``pruner`` field asks for this rule: ``pareto``, ``{type: pareto, ...}``, ``{pareto: {...}}``."""
    if isinstance(value, str):
        return value.lower() == "pareto"
    if isinstance(value, dict):
        name = value.get("type", value.get("name"))
        if name is None and len(value) == 1:
            name = next(iter(value))
        return isinstance(name, str) and name.lower() == "pareto"
    return False


def pareto_options(value: Any) -> tuple[str, dict[str, Any], list[str]]:
    """``("pareto", options, problems)`` for a field that :func:`is_pareto`."""
    if isinstance(value, str):
        options: Any = {}
    elif "type" in value or "name" in value:
        options = {k: v for k, v in value.items() if k not in ("type", "name")}
    else:
        options = next(iter(value.values())) or {}
    if not isinstance(options, dict):
        return "pareto", {}, [f"pareto: options must be a mapping (k, warmup_steps), but got {options!r}"]
    try:
        return "pareto", ParetoPruning.model_validate(options).model_dump(), []
    except ValidationError as exc:
        return "pareto", {}, [f"{'.'.join(map(str, e['loc']))}: {e['msg']} (got {e.get('input')!r})"
                              for e in exc.errors()]


def dominates(a: Sequence[float], b: Sequence[float], directions: Sequence[str]) -> bool:
    """Whether values ``a`` dominate ``b`` (directions ``maximize``/``minimize``, one per value)."""
    better = False
    for x, y, direction in zip(a, b, directions):
        if direction == "minimize":
            x, y = -x, -y
        if x < y:
            return False
        better = better or x > y
    return better


def front(points: Sequence[Sequence[float]], directions: Sequence[str]) -> list[Sequence[float]]:
    """The points no other point dominates."""
    return [p for p in points if not any(dominates(q, p, directions) for q in points)]


def dominated_by_front(own: Sequence[float], others: Sequence[Sequence[float]], directions: Sequence[str],
                       k: int) -> bool:
    """The rule: at least ``k`` members of the front of ``others`` dominate ``own``."""
    return sum(dominates(p, own, directions) for p in front(others, directions)) >= k


def record_step_values(trial: Any, step: int, values: Sequence[float]) -> None:
    """Keep a multi-objective trial's values at ``step`` (replacing those of an earlier run of the step)."""
    trial.set_user_attr(f"{STEP_ATTR}{int(step)}", [float(v) for v in values])


def step_values(frozen: Any) -> dict[int, list[float]]:
    """A stored trial's values by step (:func:`record_step_values`)."""
    found = {}
    for key, value in frozen.user_attrs.items():
        if key.startswith(STEP_ATTR) and key[len(STEP_ATTR):].isdigit():
            found[int(key[len(STEP_ATTR):])] = value
    return found


def should_prune_at(study: Any, number: int, step: int, values: Sequence[float], directions: Sequence[str],
                    rule: dict[str, Any]) -> bool:
    """The rule for trial ``number`` with ``values`` at ``step``, against the study's other trials in storage."""
    from optuna.trial import TrialState

    if step <= rule["warmup_steps"]:
        return False
    states = (TrialState.RUNNING, TrialState.COMPLETE, TrialState.PRUNED)
    others = [t.user_attrs.get(f"{STEP_ATTR}{step}") for t in study.get_trials(deepcopy=False, states=states)
              if t.number != number]
    others = [o for o in others if isinstance(o, list) and len(o) == len(values)]
    return len(others) >= rule["k"] and dominated_by_front(values, others, directions, rule["k"])


def pruning_check(plan: Any, a: Any) -> Callable[[], bool] | None:
    """What the runner asks after trial ``a``'s result: Optuna's pruner, the Pareto rule, or nothing (None)."""
    if plan.pruner_name == "none":
        return None
    if plan.pruner_name != "pareto":
        return lambda: prune_as_of(a.trial, a.iteration)  # judged at its step (a race's later seeds, a re-run)
    directions, rule = plan.directions, plan.pruner_options
    return lambda: should_prune_at(a.trial.study, a.number, a.iteration, a.reported[a.iteration], directions, rule)
