"""A study's objectives: one metric (``metric: episode_reward_mean``) or several (multi-objective).

A multi-objective study names its metrics and their modes as lists of equal
length::

    metric: [evaluation/episode_reward_mean, timesteps_total]
    mode: [max, min]

Optuna then holds one value per metric for each trial (``study.directions``);
a trial is COMPLETE only when every metric has a finite value in its last
result. Optuna's pruners take one value, so a multi-objective study prunes
with rltune's own rule (:mod:`._pareto_pruning`); its samplers are those of
Optuna that handle several objectives (:data:`MULTI_OBJECTIVE_SAMPLERS`).
"""

from __future__ import annotations

import difflib
from typing import Annotated, Any, Sequence

from pydantic import AfterValidator

from rltune._metrics import MISSING, finite, flatten_keys, lookup, not_yet_reported

MODES = ("max", "min")
# rltune's sampler names whose Optuna sampler takes several objectives (CMA-ES does not)
MULTI_OBJECTIVE_SAMPLERS = ("grid", "random", "tpe", "gp", "nsga2", "nsga3")
MULTI_OBJECTIVE_PRUNERS = ("none", "pareto")


def check_metric(value: Any) -> Any:
    """The ``metric`` field: a result key, or a list of distinct result keys (ValueError says what is wrong)."""
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, str) and v for v in value):
        repeated = sorted({v for v in value if list(value).count(v) > 1})
        if repeated:
            raise ValueError(f"names {', '.join(map(repr, repeated))} twice; give each metric once")
        return value[0] if len(value) == 1 else list(value)
    raise ValueError(f"must be a result key such as episode_reward_mean, or a list of result keys "
                     f"(a multi-objective study), but got {value!r}")


def check_mode(value: Any) -> Any:
    """The ``mode`` field: ``max``/``min``, or a list of them (one per metric)."""
    if isinstance(value, str) and value in MODES:
        return value
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, str) and v in MODES for v in value):
        return list(value)  # its length is checked against the metrics' (objective_problems)
    raise ValueError(f"Input should be 'max' or 'min' (or a list of them, one per metric), but got {value!r}")


Metric = Annotated[Any, AfterValidator(check_metric)]  # the study spec's field types
Mode = Annotated[Any, AfterValidator(check_mode)]


def checked(spec: Any, sampler: str, pruner: str) -> tuple[Any, list[str]]:
    """The spec (one metric's ``mode: [max]`` made ``max``) and the problems of its objectives and constraints."""
    from rltune.orchestrator._constraints import parse_constraints

    problems = objective_problems(spec.metric, spec.mode, sampler, pruner)
    problems += parse_constraints(spec.constraints or [])[1]
    if spec.constraints and not _optuna_takes_constraints():
        problems.append("constraints: need Optuna >= 5.0 (Trial.set_constraint); pip install 'optuna>=5,<5.1'")
    if isinstance(spec.metric, str) and isinstance(spec.mode, list) and not problems:
        spec = spec.model_copy(update={"mode": spec.mode[0]})
    return spec, problems


def _optuna_takes_constraints() -> bool:
    import optuna

    return hasattr(optuna.trial.Trial, "set_constraint")


def as_list(value: str | Sequence[str]) -> list[str]:
    """A ``metric`` or ``mode`` field as a list (one entry per objective)."""
    return [value] if isinstance(value, str) else list(value)


def objective_problems(metric: Any, mode: Any, sampler: str, pruner: str) -> list[str]:
    """What is wrong with a study's objectives and the sampler and pruner that must handle them."""
    metrics, modes = as_list(metric), as_list(mode)
    problems = []
    if len(metrics) > 1 and isinstance(mode, str) and mode in MODES:
        pass  # one mode for every metric
    elif len(modes) != len(metrics):
        problems.append(f"mode: {len(modes)} mode(s) for {len(metrics)} metric(s); give one mode per metric "
                        f"(mode: [{', '.join(['max'] * len(metrics))}]) or one mode for all")
    if len(metrics) > 1:
        if sampler not in MULTI_OBJECTIVE_SAMPLERS and sampler != "custom":
            problems.append(f"search_alg: {sampler} cannot optimize several metrics (a multi-objective study); "
                            f"use one of {', '.join(MULTI_OBJECTIVE_SAMPLERS)}")
        if pruner not in MULTI_OBJECTIVE_PRUNERS:
            named = "an Optuna pruner instance" if pruner == "custom" else pruner
            problems.append(f"scheduler: {named} prunes on one metric; a multi-objective study prunes with "
                            "{type: pareto, k: 2, warmup_steps: 3} (see docs/multi-objective.md), or none")
    elif pruner == "pareto":
        problems.append("scheduler: pareto prunes a multi-objective study (metric: [a, b]); with one metric "
                        "use median, asha or hyperband")
    return problems


def modes_of(metric: Any, mode: Any) -> list[str]:
    """One mode per metric (a single mode applies to every metric)."""
    metrics, modes = as_list(metric), as_list(mode)
    return modes * len(metrics) if len(modes) == 1 else modes


def directions_of(metric: Any, mode: Any) -> list[str]:
    """Optuna's directions (``maximize``/``minimize``), one per metric."""
    return ["maximize" if m == "max" else "minimize" for m in modes_of(metric, mode)]


def lookup_objectives(result: dict[str, Any], metric: Any) -> Any:
    """The metric's value in ``result`` (a single metric), or the tuple of the metrics' values (MISSING if one is).

    A per-policy metric that has no entry yet is None (not yet reported), as
    a NaN is; the result's keys are checked by :func:`missing_metric`.
    """
    if isinstance(metric, str):
        return lookup(result, metric)
    values = []
    for name in metric:
        found = lookup(result, name)
        if found is MISSING:
            return MISSING
        values.append(found)
    return tuple(values)


def missing_metric(result: dict[str, Any], metric: Any) -> str | None:
    """The first metric the result lacks (that is not just not reported yet), with a close key; None if none."""
    for name in as_list(metric):
        if lookup(result, name) is MISSING and not not_yet_reported(result, name):
            keys = flatten_keys(result)
            close = difflib.get_close_matches(name, keys, n=1, cutoff=0.5)
            hint = f"; did you mean {close[0]!r}?" if close else f" (keys: {', '.join(sorted(keys)[:12])})"
            return f"metric: {name!r} is not a key of the trial's results{hint}"
    return None


def finite_objectives(found: Any) -> Any:
    """A finite float, or a tuple of finite floats, or None when a value is missing or not finite."""
    if isinstance(found, tuple):
        values = tuple(finite(v) for v in found)
        return None if any(v is None for v in values) else values
    return None if found is MISSING else finite(found)


def objective_values(result: dict[str, Any], metric: Any) -> Any:
    """:func:`finite_objectives` of the metric(s) in ``result``."""
    return finite_objectives(lookup_objectives(result, metric))


def not_finite_reason(result: dict[str, Any], metric: Any) -> str | None:
    """Why a multi-objective trial's last result gives Optuna no values: the first metric not finite."""
    for name in as_list(metric):
        found = lookup(result, name)
        if finite(found) is None:
            shown = "missing" if found is MISSING else repr(found)
            return f"metric {name!r} is {shown} in the last result (not a finite number)"
    return None


def first_value(value: Any) -> Any:
    """The first objective's value of a multi-objective trial's values (a single value as it is)."""
    return value[0] if isinstance(value, (list, tuple)) and value else value


def describe(values: Any, metric: Any) -> str:
    """``reward = 200`` or ``reward = 200, timesteps_total = 4000`` (values of one trial)."""
    if not isinstance(values, (list, tuple)):
        values = [values]
    return ", ".join(f"{name} = {value:g}" for name, value in zip(as_list(metric), values))


def describe_objectives(metric: Any, mode: Any) -> str:
    """``max episode_reward_mean`` or ``max evaluation/episode_reward_mean, min timesteps_total``."""
    return ", ".join(f"{m} {name}" for name, m in zip(as_list(metric), modes_of(metric, mode)))
