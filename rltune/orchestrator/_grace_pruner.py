"""An Optuna pruner that waits a number of seconds since the trial started (MedianStoppingRule's time_total_s)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import optuna


class GracePruner(optuna.pruners.BasePruner):
    """Optuna's ``MedianPruner(**options)``, asked only once ``grace_s`` seconds have passed since the trial started.

    The time is the wall clock since Optuna started the trial (its
    ``datetime_start``), so a trial continued after an interruption counts
    the time it was away.
    """

    def __init__(self, grace_s: float, options: dict[str, Any]) -> None:
        self.grace_s = grace_s
        self.median = optuna.pruners.MedianPruner(**options)

    def prune(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> bool:
        """False within the grace period, else the median pruner's verdict."""
        started = trial.datetime_start
        if started is not None and (datetime.now(started.tzinfo) - started).total_seconds() < self.grace_s:
            return False
        return self.median.prune(study, trial)
