"""A trial's intermediate values in Optuna: reported per step, replaced when a restored trial runs a step again."""

from __future__ import annotations

import json

from rltune.orchestrator._objectives import objective_values
from rltune.orchestrator._optuna_compat import replace_intermediate_value
from rltune.orchestrator._pareto_pruning import record_step_values
from rltune.orchestrator._trial_host import ActiveTrial


def report(a: ActiveTrial, step: int, value: float | tuple[float, ...]) -> None:
    """Optuna's intermediate value of ``a`` at ``step`` becomes ``value``: reported, or replacing another one.

    A trial that restored a checkpoint runs the steps after it again; the
    trial's history (``result.json``) is what it ran last, so a re-run's
    value replaces the one Optuna got from the earlier run of the step.
    A multi-objective study's values (a tuple) are kept in the trial's user
    attrs instead (:mod:`._pareto_pruning`): Optuna takes no intermediate values there.
    """
    if isinstance(value, tuple):
        if a.reported.get(step) != value:
            record_step_values(a.trial, step, value)
            a.reported[step] = value
        return
    if step not in a.reported:
        a.trial.report(value, step=step)
    elif a.reported[step] != value:
        replace_intermediate_value(a.trial, step, value)
    else:
        return
    a.reported[step] = value


def backfill(a: ActiveTrial, metric: str | list[str], upto: int | None = None) -> None:
    """Give Optuna the ``metric`` up to the checkpoint (or ``upto``) as ``result.json`` holds it.

    Those it never got (the orchestrator was killed before it was told),
    and those it got from an earlier run of the step (killed between the
    trial's re-run of the step and telling Optuna).
    """
    path = a.trial_dir / "result.json"
    if not path.exists():
        return
    upto = a.checkpoint_iteration if upto is None else upto
    for line in path.read_text().splitlines():
        try:
            result = json.loads(line)
            step = int(result["training_iteration"])
        except (ValueError, KeyError, TypeError):
            continue
        value = objective_values(result, metric)
        if step <= upto and value is not None:
            report(a, step, value)
        if step == upto:
            a.last_result = result
