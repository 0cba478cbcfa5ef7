"""The hyperparameter schedule a PBT trial's weights followed, from the lineages in the study's storage.

A trial that exploited another at its iteration ``i`` went on from the
other's checkpoint (of iteration ``c``, its number) with explored values, so
the weights it ends with were trained, up to ``c``, under the other's
schedule, and from ``c`` on under the values in force after the exploit.
:func:`pbt_schedule` follows that chain back to iteration 0 (a trial's
sampled config). ``best_config.yaml`` writes it as a ``schedule:`` that
``rltune train -f`` replays (:mod:`._replay`).
"""

from __future__ import annotations

from typing import Any

from rltune._trial_files import checkpoint_iteration, json_safe
from rltune.orchestrator._pbt_settings import PBTSettings, mutated_values, nested_keys
from rltune.orchestrator._yaml_files import deep_merge


def pbt_schedule(plan: Any, study: Any, number: int) -> list[dict[str, Any]]:
    """Trial ``number``'s schedule: ``[{at_iteration, config}]`` (the mutated values in force from then on).

    Empty when the study is not PBT or the trial never exploited another
    (its config is the same throughout).
    """
    settings = getattr(plan, "scheduler", None)
    if not isinstance(settings, PBTSettings) or study is None:
        return []
    trials = {t.number: t for t in study.get_trials(deepcopy=False)}
    if number not in trials or not _steps(trials[number], None):
        return []
    budget = sum(len(_steps(t, None)) for t in trials.values()) + 1  # a chain never visits more exploits
    segments = _walk(plan, settings, trials, number, None, budget)
    return [{"at_iteration": at, "config": json_safe(values)} for at, values in segments]


def _walk(plan: Any, settings: PBTSettings, trials: dict[int, Any], number: int, until: int | None,
          budget: int) -> list[tuple[int, dict[str, Any]]]:
    """The segments of ``number``'s weights up to its iteration ``until`` (None: its end)."""
    from rltune.orchestrator._trial_setup import decode_trial_config

    frozen = trials[number]
    steps = _steps(frozen, until)
    if not steps or budget <= 0 or steps[-1].get("source") not in trials:
        return [(0, mutated_values(decode_trial_config(plan, frozen), settings.hyperparam_mutations))]
    last = steps[-1]
    numbered = checkpoint_iteration(last.get("checkpoint"))
    start = numbered if numbered is not None else int(last.get("iteration") or 0)
    source = _walk(plan, settings, trials, int(last["source"]), start, budget - 1)
    values = deep_merge(source[-1][1], nested_keys(last.get("changed") or {}))  # the source's in force, explored
    return [*(s for s in source if s[0] < start), (start, values)]


def _steps(frozen: Any, until: int | None) -> list[dict[str, Any]]:
    """A trial's exploits (user attr ``pbt_lineage``) at or before its iteration ``until``."""
    from rltune.orchestrator._pbt import LINEAGE

    steps = [s for s in frozen.user_attrs.get(LINEAGE) or [] if isinstance(s, dict)]
    return [s for s in steps if until is None or int(s.get("iteration") or 0) <= until]

