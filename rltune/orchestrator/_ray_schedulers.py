"""Ray Tune's trial schedulers by name, as Optuna pruners of the study (``scheduler=ASHAScheduler(...)``).

=====================================  ==============================================================
Ray Tune                               the study
=====================================  ==============================================================
``FIFOScheduler()``                    no pruner
``ASHAScheduler`` /                    Optuna's ``SuccessiveHalvingPruner(min_resource=grace_period,
``AsyncHyperBandScheduler``            reduction_factor)``; ``max_t`` a stop criterion on ``time_attr``
``HyperBandScheduler``                 Optuna's ``HyperbandPruner(1, max_t, reduction_factor)``; ``max_t``
                                       a stop criterion
``MedianStoppingRule``                 Optuna's ``MedianPruner(n_warmup_steps=grace_period,
                                       n_min_trials=min_samples_required)``
``PopulationBasedTraining``            rltune's PBT (``scheduler: {type: pbt, ...}``, :mod:`._pbt`),
                                       no pruner
=====================================  ==============================================================

The pruners see the metric at each ``training_iteration`` (Optuna's step),
so ``time_attr`` must be ``training_iteration``; MedianStoppingRule's
default ``time_total_s`` is honoured as the seconds since the trial started
(its grace period). What rltune cannot do (pause trials, several ASHA
brackets) is refused by name.
"""

from __future__ import annotations

from typing import Any

from rltune.errors import ConfigError
from rltune.orchestrator._ray_part import RayName, StudyPart

ITERATION = "training_iteration"


def _time_attr(name: RayName, time_attr: Any, allowed: tuple[str, ...] = (ITERATION,)) -> str:
    if time_attr not in allowed:
        raise name._refuse("time_attr", time_attr, f"the study's pruners count time in {' or '.join(allowed)} "
                                                  "(Optuna's step is the result's training_iteration)")
    return time_attr


class FIFOScheduler(RayName):
    """Ray Tune's default: every trial runs to its stop criteria (no pruner)."""

    def __init__(self) -> None:
        pass

    def study_part(self) -> StudyPart:
        """``scheduler: none``."""
        return StudyPart("FIFOScheduler", {"scheduler": "none"})


class AsyncHyperBandScheduler(RayName):
    """ASHA: Optuna's successive halving, rungs at ``grace_period * reduction_factor**k`` iterations.

    ``max_t`` stops every trial at that many iterations (unless
    ``stop_last_trials=False``); ``brackets`` must be 1 (use
    :class:`HyperBandScheduler` for several).
    """

    def __init__(self, time_attr: str = ITERATION, metric: str | None = None, mode: str | None = None,
                 max_t: int = 100, grace_period: int = 1, reduction_factor: float = 4, brackets: int = 1,
                 stop_last_trials: bool = True) -> None:
        self.time_attr = _time_attr(self, time_attr)
        self.metric, self.mode = self._metric_mode(metric, mode)
        self.max_t = self._int("max_t", max_t, 1)
        self.grace_period = self._int("grace_period", grace_period, 1)
        if self.grace_period > self.max_t:
            raise self._refuse("grace_period", grace_period, f"must be at most max_t={self.max_t}")
        self.reduction_factor = self._int("reduction_factor", reduction_factor, 2)
        if brackets != 1:
            raise self._refuse("brackets", brackets, "rltune's ASHA has one bracket (Optuna's SuccessiveHalvingPruner); "
                                                     "use HyperBandScheduler for several")
        self.brackets = 1
        if not isinstance(stop_last_trials, bool):
            raise self._refuse("stop_last_trials", stop_last_trials, "must be True or False")
        self.stop_last_trials = stop_last_trials

    def study_part(self) -> StudyPart:
        """``scheduler: {type: asha, ...}``, and ``stop: {time_attr: max_t}``."""
        pruner = {"type": "asha", "min_resource": self.grace_period, "reduction_factor": self.reduction_factor,
                  "min_early_stopping_rate": 0}
        stop = {self.time_attr: self.max_t} if self.stop_last_trials else {}
        return StudyPart(type(self).__name__, {"scheduler": pruner}, self.metric, self.mode, stop)


class ASHAScheduler(AsyncHyperBandScheduler):
    """Ray Tune's other name of :class:`AsyncHyperBandScheduler`."""


class HyperBandScheduler(RayName):
    """HyperBand as Optuna's ``HyperbandPruner`` (brackets of successive halving from 1 to ``max_t`` iterations).

    Ray's HyperBand pauses trials to run its brackets in lock-step; Optuna's
    prunes asynchronously, each trial in the bracket its id falls in.
    """

    def __init__(self, time_attr: str = ITERATION, metric: str | None = None, mode: str | None = None,
                 max_t: int = 81, reduction_factor: float = 3, stop_last_trials: bool = True) -> None:
        self.time_attr = _time_attr(self, time_attr)
        self.metric, self.mode = self._metric_mode(metric, mode)
        self.max_t = self._int("max_t", max_t, 1)
        self.reduction_factor = self._int("reduction_factor", reduction_factor, 2)
        if not isinstance(stop_last_trials, bool):
            raise self._refuse("stop_last_trials", stop_last_trials, "must be True or False")
        self.stop_last_trials = stop_last_trials

    def study_part(self) -> StudyPart:
        """``scheduler: {type: hyperband, ...}``, and ``stop: {time_attr: max_t}``."""
        pruner = {"type": "hyperband", "min_resource": 1, "max_resource": self.max_t,
                  "reduction_factor": self.reduction_factor}
        stop = {self.time_attr: self.max_t} if self.stop_last_trials else {}
        return StudyPart("HyperBandScheduler", {"scheduler": pruner}, self.metric, self.mode, stop)


class MedianStoppingRule(RayName):
    """Stop a trial whose best value so far is worse than the median of the finished trials at the same step.

    ``grace_period`` is in ``time_attr`` units: iterations with
    ``time_attr="training_iteration"``; with Ray's default ``time_total_s``,
    seconds since the trial started (wall clock, its restarts included).
    ``min_samples_required``: finished trials with a value at the step.
    Trials are stopped, never paused: ``hard_stop=False`` and a
    ``min_time_slice`` are refused.
    """

    def __init__(self, time_attr: str = "time_total_s", metric: str | None = None, mode: str | None = None,
                 grace_period: float = 60.0, min_samples_required: int = 3, min_time_slice: float = 0,
                 hard_stop: bool = True) -> None:
        self.time_attr = _time_attr(self, time_attr, (ITERATION, "time_total_s"))
        self.metric, self.mode = self._metric_mode(metric, mode)
        self.grace_period = self._number("grace_period", grace_period, 0)
        if self.time_attr == ITERATION:
            self.grace_period = self._int("grace_period", grace_period, 0)
        self.min_samples_required = self._int("min_samples_required", min_samples_required, 1)
        if min_time_slice != 0:
            raise self._refuse("min_time_slice", min_time_slice, "rltune never pauses a trial for another, so a "
                                                                 "time slice has no meaning; leave it 0")
        self.min_time_slice = 0
        if hard_stop is not True:
            raise self._refuse("hard_stop", hard_stop, "rltune stops (prunes) a trial; it cannot pause one")
        self.hard_stop = True

    def study_part(self) -> StudyPart:
        """``scheduler: {type: median, ...}`` (or an instance that waits ``grace_period`` seconds first)."""
        options = {"n_startup_trials": 0, "n_min_trials": self.min_samples_required}
        if self.time_attr == ITERATION:
            pruner: Any = {"type": "median", "n_warmup_steps": self.grace_period, **options}
        else:
            from rltune.orchestrator._grace_pruner import GracePruner  # imports Optuna

            pruner = GracePruner(self.grace_period, options)
        return StudyPart("MedianStoppingRule", {"scheduler": pruner}, self.metric, self.mode)


class PopulationBasedTraining(RayName):
    """Ray Tune's PBT as rltune's (:mod:`._pbt`): ``scheduler: {type: pbt, ...}`` with the same arguments.

    Differences from Ray, by name: ``time_attr`` is ``training_iteration``
    (Ray's default ``time_total_s`` is refused: perturbation intervals count
    iterations, Optuna's step), so ``perturbation_interval`` and
    ``burn_in_period`` are whole iterations. ``synch=True``: each member
    waits at every interval for the others (see docs/pbt.md). The explored
    hyperparameters apply after the restore, and the population's state is
    in the study's storage.
    """

    def __init__(self, time_attr: str = ITERATION, metric: str | None = None, mode: str | None = None,
                 perturbation_interval: float = 4, burn_in_period: float = 0,
                 hyperparam_mutations: dict[str, Any] | None = None, quantile_fraction: float = 0.25,
                 resample_probability: float = 0.25, perturbation_factors: tuple[float, float] = (1.2, 0.8),
                 custom_explore_fn: Any = None, log_config: bool = True, require_attrs: bool = True,
                 synch: bool = False) -> None:
        self.time_attr = _time_attr(self, time_attr)
        self.metric, self.mode = self._metric_mode(metric, mode)
        self.perturbation_interval = self._int("perturbation_interval", perturbation_interval, 1)
        self.burn_in_period = self._int("burn_in_period", burn_in_period, 0)
        self.fields = {"type": "pbt", "perturbation_interval": self.perturbation_interval, "synch": _flag(self, synch),
                       "burn_in_period": self.burn_in_period, "hyperparam_mutations": dict(hyperparam_mutations or {}),
                       "quantile_fraction": quantile_fraction, "resample_probability": resample_probability,
                       "perturbation_factors": tuple(perturbation_factors), "custom_explore_fn": custom_explore_fn,
                       "log_config": log_config, "require_attrs": require_attrs}
        from rltune.orchestrator._pbt_settings import parse_pbt

        problems = [p.removeprefix("scheduler.") for p in parse_pbt(self.fields, {})[2]]
        if problems:
            raise ConfigError(problems, where="PopulationBasedTraining")

    def study_part(self) -> StudyPart:
        """``scheduler: {type: pbt, ...}`` (no pruner)."""
        return StudyPart("PopulationBasedTraining", {"scheduler": dict(self.fields)}, self.metric, self.mode)


class PB2(RayName):
    """Ray Tune's PB2 as rltune's (``scheduler: {type: pb2, ...}``): PBT whose explore is a GP bandit (:mod:`._pb2`).

    The same differences from Ray as :class:`PopulationBasedTraining`
    (iterations as time); ``hyperparam_bounds`` are top-level
    config keys with ``[low, high]``.
    """

    def __init__(self, time_attr: str = ITERATION, metric: str | None = None, mode: str | None = None,
                 perturbation_interval: float = 4, hyperparam_bounds: dict[str, Any] | None = None,
                 quantile_fraction: float = 0.25, log_config: bool = True, require_attrs: bool = True,
                 synch: bool = False, custom_explore_fn: Any = None) -> None:
        self.time_attr = _time_attr(self, time_attr)
        self.metric, self.mode = self._metric_mode(metric, mode)
        self.perturbation_interval = self._int("perturbation_interval", perturbation_interval, 1)
        self.fields = {"type": "pb2", "perturbation_interval": self.perturbation_interval, "synch": _flag(self, synch),
                       "hyperparam_bounds": dict(hyperparam_bounds or {}), "quantile_fraction": quantile_fraction,
                       "custom_explore_fn": custom_explore_fn, "log_config": log_config, "require_attrs": require_attrs}
        from rltune.orchestrator._pbt_settings import parse_pbt

        problems = [p.removeprefix("scheduler.") for p in parse_pbt(self.fields, {})[2]]
        if problems:
            raise ConfigError(problems, where="PB2")

    def study_part(self) -> StudyPart:
        """``scheduler: {type: pb2, ...}`` (no pruner)."""
        return StudyPart("PB2", {"scheduler": dict(self.fields)}, self.metric, self.mode)


def _flag(name: RayName, synch: Any) -> bool:
    """``synch``, a bool."""
    if not isinstance(synch, bool):
        raise name._refuse("synch", synch, "must be True or False")
    return synch
