"""The racing check of a ``seed_mode: race`` study with a pruner: does a configuration's next seed start?

A race runs a configuration's seeds one after another (docs/seeds.md). The
pruner judges the running aggregate at every step; the end of each seed but
the last (a result marked ``seed_race_next``) is also a racing check: the
next seed starts only if the configuration's running aggregate reaches the
low end of the 95% interval over seeds (``seed_ci``) of the best complete
configuration so far (the high end when the study minimizes). A
configuration behind that bound is pruned there: it is clearly worse than
the best, and its further seeds would be spent on a configuration that
cannot be chosen. Without a complete configuration (or its interval), every
seed runs as the pruner allows.
"""

from __future__ import annotations

import math
from typing import Any, Callable

from rltune.orchestrator._objectives import as_list
from rltune.orchestrator._seed_report import SEED_CI
from rltune.orchestrator._seed_stats import RACE_NEXT


def behind_the_best(study: Any, value: float, mode: str) -> bool:
    """True when ``value`` is behind the best complete trial's interval over its seeds (see the module)."""
    try:
        best = study.best_trial
    except ValueError:  # no complete trial yet
        return False
    ci = best.user_attrs.get(SEED_CI)
    bound = ci.get("low" if mode == "max" else "high") if isinstance(ci, dict) else None
    if not isinstance(bound, (int, float)) or not math.isfinite(bound):
        return False
    return value < bound if mode == "max" else value > bound


def with_race_check(plan: Any, a: Any, check: Callable[[], bool] | None) -> Callable[[], bool] | None:
    """The pruner's ``check`` for trial ``a`` (None: no pruner, no check), and at the end of a race seed,
    :func:`behind_the_best` too."""
    spec = plan.spec
    result = a.last_result or {}
    if check is None or spec.seed_mode != "race" or int(spec.seeds_per_trial) <= 1 or not result.get(RACE_NEXT):
        return check
    value = a.reported.get(a.iteration)
    if not isinstance(value, (int, float)):
        return check
    return lambda: check() or behind_the_best(a.trial.study, float(value), as_list(spec.mode)[0])
