"""Study fields that each work alone but not together: one check of every such combination, at the edge.

PBT ranks one metric and exploits one trainer's checkpoint; ``aggregate: min``
and ``final_evaluation`` judge one metric. Each problem is a
``field: message`` line, as the planner collects them.
"""

from __future__ import annotations

from typing import Any

from rltune.orchestrator._objectives import as_list
from rltune.orchestrator._pbt_settings import is_pbt


def combination_problems(spec: Any, pbt: bool) -> list[str]:
    """What is wrong with the combination of ``spec``'s fields (``pbt``: its PBT settings were valid)."""
    problems = []
    if pbt and spec.seeds_per_trial > 1:  # an exploit restores one trainer, not a group of seeds
        problems.append("seeds_per_trial: PBT members exploit one another's checkpoint; a member of several seeds "
                        "cannot (use seeds_per_trial: 1 with pbt)")
    if len(as_list(spec.metric)) < 2:
        return problems
    if is_pbt(spec.pruner if spec.pruner is not None else spec.scheduler):
        problems.append("scheduler: pbt ranks the population on one metric; a multi-objective study cannot use it "
                        "(give one metric, or use {type: pareto} or none)")
    if spec.aggregate == "min":
        problems.append("aggregate: min takes each metric's worst seed, which may be a different seed per metric; in "
                        "a multi-objective study use mean, median or iqm")
    if spec.final_evaluation is not None:
        problems.append("final_evaluation: retrains the top-k of one metric; a multi-objective study's answer is its "
                        "front (give one metric to evaluate the best on fresh seeds)")
    return problems
