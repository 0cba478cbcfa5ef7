"""Ray Tune's search algorithms by name, as the study's Optuna sampler (``search_alg=OptunaSearch(...)``).

=====================================  ==============================================================
Ray Tune                               the study
=====================================  ==============================================================
``BasicVariantGenerator``              ``search_alg: random`` (grid_search entries run every value)
``OptunaSearch(sampler=...)``          that Optuna sampler (default Optuna's ``TPESampler(seed=seed)``)
``HyperOptSearch``                     Optuna's ``TPESampler`` (``n_startup_trials=n_initial_points``,
                                       hyperopt's ``gamma``)
``BayesOptSearch``                     Optuna's ``GPSampler`` (``n_startup_trials=random_search_steps``)
``ConcurrencyLimiter(s, n)``           ``s``, with at most ``n`` trials at once
=====================================  ==============================================================

``points_to_evaluate`` (every searcher) are the first trials' configs;
``metric`` / ``mode`` become the study's. The search space is the study's
``config`` (Ray's ``param_space``): a searcher's own ``space`` is refused.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

from rltune.orchestrator._ray_part import RayName, StudyPart


def _no_space(name: RayName, space: Any) -> None:
    if space is not None:
        raise name._refuse("space", space, "give the search space as the study's config (tune.run(config=...), "
                                           "Tuner(param_space=...)) with tune.uniform, tune.choice, ...")


class Searcher(RayName):
    """Base of the searchers: the study part of a sampler with its metric, mode and points."""

    metric: str | None = None
    mode: str | None = None
    points_to_evaluate: list[dict[str, Any]] | None = None

    def sampler(self) -> Any:
        """The study's ``search_alg`` value."""
        raise NotImplementedError

    def study_part(self) -> StudyPart:
        """``search_alg`` with the searcher's metric, mode and points."""
        return StudyPart(type(self).__name__, {"search_alg": self.sampler()}, self.metric, self.mode,
                         points=self.points_to_evaluate)


class BasicVariantGenerator(Searcher):
    """Ray Tune's default: grid_search entries run every value, the other entries are drawn at random."""

    def __init__(self, points_to_evaluate: list[dict[str, Any]] | None = None, max_concurrent: int = 0,
                 constant_grid_search: bool = False, random_state: int | None = None) -> None:
        self.points_to_evaluate = self._points(points_to_evaluate)
        self.max_concurrent = self._int("max_concurrent", max_concurrent, 0)
        if constant_grid_search is not False:
            raise self._refuse("constant_grid_search", constant_grid_search, "each grid point draws its own random "
                                                                             "values here")
        self.random_state = self._seed("random_state", random_state)

    def sampler(self) -> Any:
        """``random``, seeded by ``random_state``."""
        return {"type": "random", "seed": self.random_state} if self.random_state is not None else "random"

    def study_part(self) -> StudyPart:
        """As :class:`Searcher`, and ``max_concurrent`` (0: no cap)."""
        part = super().study_part()
        part.concurrency = self.max_concurrent or None
        return part


class OptunaSearch(Searcher):
    """Optuna's sampler ``sampler`` (any ``optuna.samplers`` instance), or a ``TPESampler(seed=seed)``.

    ``metric`` and ``mode`` may be lists (a multi-objective study, as in Ray
    Tune): ``OptunaSearch(metric=["a", "b"], mode=["max", "min"], sampler=NSGAIISampler())``.
    """

    def __init__(self, space: Any = None, metric: str | list[str] | None = None, mode: str | list[str] | None = None,
                 points_to_evaluate: list[dict[str, Any]] | None = None, sampler: Any = None, seed: int | None = None,
                 evaluated_rewards: list[Any] | None = None) -> None:
        _no_space(self, space)
        self.metric, self.mode = self._metric_mode(metric, mode, several=True)
        self.points_to_evaluate = self._points(points_to_evaluate)
        if sampler is not None:
            import optuna

            if not isinstance(sampler, optuna.samplers.BaseSampler):
                raise self._refuse("sampler", sampler, "must be an Optuna sampler (optuna.samplers.TPESampler(), ...)")
            if seed is not None:
                raise self._refuse("seed", seed, "seeds OptunaSearch's default TPESampler; give the seed to the "
                                                 "sampler you pass")
        self._sampler = sampler
        self.seed = self._seed("seed", seed)
        if evaluated_rewards is not None:
            raise self._refuse("evaluated_rewards", evaluated_rewards, "results of points not run by the study are "
                                                                       "not taken; run the points (points_to_evaluate)")

    def sampler(self) -> Any:
        """The sampler given, or TPE seeded by ``seed``."""
        if self._sampler is not None:
            return self._sampler
        return {"type": "tpe", "seed": self.seed} if self.seed is not None else "tpe"


class HyperoptGamma:
    """Hyperopt's split of the trials into good and bad for TPE: ``ceil(gamma * sqrt(n))`` good ones, at most 25."""

    def __init__(self, gamma: float) -> None:
        self.gamma = gamma

    def __call__(self, n: int) -> int:
        return min(math.ceil(self.gamma * math.sqrt(n)), 25)

    def __repr__(self) -> str:
        return f"HyperoptGamma({self.gamma!r})"


class HyperOptSearch(Searcher):
    """Hyperopt's TPE as Optuna's ``TPESampler``: ``n_initial_points`` random trials, hyperopt's ``gamma``."""

    def __init__(self, space: Any = None, metric: str | None = None, mode: str | None = None,
                 points_to_evaluate: list[dict[str, Any]] | None = None, n_initial_points: int = 20,
                 random_state_seed: int | None = None, gamma: float = 0.25) -> None:
        _no_space(self, space)
        self.metric, self.mode = self._metric_mode(metric, mode)
        self.points_to_evaluate = self._points(points_to_evaluate)
        self.n_initial_points = self._int("n_initial_points", n_initial_points, 0)
        self.random_state_seed = self._seed("random_state_seed", random_state_seed)
        self.gamma = self._number("gamma", gamma, 0, above=True)
        if self.gamma > 1:
            raise self._refuse("gamma", gamma, "must be in (0, 1]")

    def sampler(self) -> Any:
        """Optuna's ``TPESampler(n_startup_trials, gamma, seed)``.

        Optuna 4.9 deprecated TPE's ``gamma`` (to be removed in 6.0): its
        warning is silenced here, and tests/orchestrator/test_ray_searchers.py
        fails when the argument goes.
        """
        import optuna

        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*gamma.*", category=FutureWarning)
            return optuna.samplers.TPESampler(n_startup_trials=self.n_initial_points, gamma=HyperoptGamma(self.gamma),
                                              seed=self.random_state_seed)


class BayesOptSearch(Searcher):
    """Bayesian optimization with a Gaussian process as Optuna's ``GPSampler`` (log expected improvement).

    bayes_opt's acquisition options (``utility_kwargs``), its duplicate
    handling (``patience``, ``skip_duplicate``) and a saved ``analysis`` have
    no Optuna counterpart: other values than Ray's defaults are refused.
    """

    def __init__(self, space: Any = None, metric: str | None = None, mode: str | None = None,
                 points_to_evaluate: list[dict[str, Any]] | None = None, utility_kwargs: dict[str, Any] | None = None,
                 random_state: int = 42, random_search_steps: int = 10, verbose: int = 0, patience: int = 5,
                 skip_duplicate: bool = True, analysis: Any = None) -> None:
        _no_space(self, space)
        self.metric, self.mode = self._metric_mode(metric, mode)
        self.points_to_evaluate = self._points(points_to_evaluate)
        self.random_state = self._seed("random_state", random_state)
        self.random_search_steps = self._int("random_search_steps", random_search_steps, 0)
        refused = {"utility_kwargs": (utility_kwargs, None, "Optuna's GPSampler uses log expected improvement"),
                   "verbose": (verbose, 0, "the GP prints nothing here; the study's verbose shows progress"),
                   "patience": (patience, 5, "Optuna's GPSampler does not stop on repeated points"),
                   "skip_duplicate": (skip_duplicate, True, "Optuna's GPSampler does not stop on repeated points"),
                   "analysis": (analysis, None, "a study continues from its storage (resume=True)")}
        for argument, (value, default, why) in refused.items():
            if value != default:
                raise self._refuse(argument, value, why)

    def sampler(self) -> Any:
        """``{type: gp, n_startup_trials, seed}``."""
        return {"type": "gp", "n_startup_trials": self.random_search_steps, "seed": self.random_state}


class ConcurrencyLimiter(RayName):
    """``searcher`` with at most ``max_concurrent`` trials at once (the study's ``n_jobs``, or less)."""

    def __init__(self, searcher: Searcher, max_concurrent: int, batch: bool = False) -> None:
        if not isinstance(searcher, Searcher):
            raise self._refuse("searcher", searcher, "must be one of rltune's Ray searchers (OptunaSearch, "
                                                     "HyperOptSearch, BayesOptSearch, BasicVariantGenerator)")
        self.searcher = searcher
        self.max_concurrent = self._int("max_concurrent", max_concurrent, 1)
        if batch is not False:
            raise self._refuse("batch", batch, "trials start one at a time as slots free up; batches are not kept")
        self.batch = False

    def study_part(self) -> StudyPart:
        """The searcher's, with the lower of both caps."""
        part = self.searcher.study_part()
        part.concurrency = min(part.concurrency or self.max_concurrent, self.max_concurrent)
        part.owner = f"ConcurrencyLimiter({part.owner})"
        return part
