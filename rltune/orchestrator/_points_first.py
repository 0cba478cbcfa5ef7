"""A sampler that gives the study's first trials fixed parameters (Ray Tune's ``points_to_evaluate``), then defers.

The k-th trial of the study that is neither a grid point nor a retry (in
trial-number order) takes the k-th point; parameters a point leaves out, and
every later trial, come from the wrapped sampler. Trial numbers are stored,
so a resumed study does not run its points again.
"""

from __future__ import annotations

from typing import Any, Sequence

import optuna
from optuna.distributions import BaseDistribution
from optuna.samplers import BaseSampler
from optuna.trial import FrozenTrial

from rltune.orchestrator._retry import is_retry


class PointsFirstSampler(BaseSampler):
    """``points`` (Optuna parameter values by name, as ``trial.suggest_*`` returns them) first, then ``base``."""

    def __init__(self, base: BaseSampler, points: Sequence[dict[str, Any]]) -> None:
        self.base = base
        self.points = [dict(p) for p in points]

    def _point(self, study: optuna.Study, trial: FrozenTrial) -> dict[str, Any] | None:
        fresh = [t.number for t in study.get_trials(deepcopy=False)
                 if "grid_index" not in t.user_attrs and not is_retry(t)]
        if trial.number not in fresh:
            return None
        index = sorted(fresh).index(trial.number)
        return self.points[index] if index < len(self.points) else None

    def infer_relative_search_space(self, study: optuna.Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        """The wrapped sampler's, except for a point's trial (each of its parameters is drawn on its own)."""
        if self._point(study, trial) is not None:
            return {}
        return self.base.infer_relative_search_space(study, trial)

    def sample_relative(self, study: optuna.Study, trial: FrozenTrial,
                        search_space: dict[str, BaseDistribution]) -> dict[str, Any]:
        """The wrapped sampler's relative draw."""
        if not search_space:
            return {}
        return self.base.sample_relative(study, trial, search_space)

    def sample_independent(self, study: optuna.Study, trial: FrozenTrial, param_name: str,
                           param_distribution: BaseDistribution) -> Any:
        """The point's value of ``param_name``, or the wrapped sampler's draw."""
        point = self._point(study, trial)
        if point is not None and param_name in point:
            return point[param_name]
        return self.base.sample_independent(study, trial, param_name, param_distribution)

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        """The wrapped sampler's."""
        self.base.before_trial(study, trial)

    def after_trial(self, study: optuna.Study, trial: FrozenTrial, state: Any, values: Sequence[float] | None) -> None:
        """The wrapped sampler's."""
        self.base.after_trial(study, trial, state, values)

    def reseed_rng(self) -> None:
        """The wrapped sampler's."""
        self.base.reseed_rng()
