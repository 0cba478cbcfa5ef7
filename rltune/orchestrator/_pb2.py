"""PB2's explore step: a Gaussian-process bandit picks the new hyperparameters (pure: numpy and scikit-learn).

PB2 (Parker-Holder et al., 2020) is PBT whose explore step, instead of random
perturbations, fits a Gaussian process to what the population observed: at
each interval of each member, the hyperparameters in force (normalized to
[0, 1] in ``hyperparam_bounds``), the time (iteration, normalized) and the
change of the score over the interval; the new values maximize the upper
confidence bound ``mean + kappa x std`` at the current time, over random
candidates in the bounds. Observations come from every member's user attr
``pb2_history`` in the study's storage (those of failed members included:
they were observed; a member that errored never breaks the fit, ray#40787).

The GP is scikit-learn's ``GaussianProcessRegressor`` with the kernel
``ConstantKernel x RBF + WhiteKernel``: an RBF length scale per input (time
and each hyperparameter: a hyperparameter that does not change the score
gets a long one), the signal and noise variances, all fitted by maximizing
the marginal likelihood (:func:`fit_gp`); scores are normalized. With fewer
than 2 observations the values are drawn uniformly in the bounds.
"""

from __future__ import annotations

import math
import random
from typing import Any

import numpy as np

KAPPA = 2.0  # exploration weight of the UCB
CANDIDATES = 512
MAX_POINTS = 256  # the most recent observations the GP is fit on (its cost is cubic in them)
RESTARTS = 1  # extra starts of the marginal-likelihood fit (from random kernel parameters)


def normalize(values: dict[str, Any], bounds: dict[str, tuple[float, float]]) -> list[float]:
    """``values`` at the keys of ``bounds``, each mapped to [0, 1] (clipped; NaN for one that is no number)."""
    out = []
    for key, (low, high) in bounds.items():
        value = values.get(key, low)
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        out.append(min(max((float(value) - low) / (high - low), 0.0), 1.0) if number else math.nan)
    return out


def denormalize(point: np.ndarray, bounds: dict[str, tuple[float, float]]) -> dict[str, float]:
    """A [0, 1] point back to the bounds' units."""
    return {key: low + float(x) * (high - low) for x, (key, (low, high)) in zip(point, bounds.items())}


def ucb_choice(observations: list[tuple[float, list[float], float]], now: float, dims: int,
               rng: random.Random) -> np.ndarray:
    """The [0, 1]^dims point with the highest UCB of the score change at time ``now``, among random candidates.

    ``observations``: (time in [0, 1], normalized hyperparameters, score change).
    """
    seed = rng.randrange(2**32)
    candidates = np.random.default_rng(seed).random((CANDIDATES, dims))
    usable = [o for o in observations
              if len(o[1]) == dims and all(math.isfinite(v) for v in (o[0], o[2], *o[1]))][-MAX_POINTS:]
    if len(usable) < 2:
        return candidates[0]
    x = np.array([[t, *h] for t, h, _ in usable])
    y = np.array([d for _, _, d in usable])
    query = np.hstack([np.full((CANDIDATES, 1), now), candidates])
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):  # small matrices: BLAS threads on a busy machine made a fit 30x slower
        mean, std = fit_gp(x, y, seed).predict(query, return_std=True)
    return candidates[int(np.argmax(mean + KAPPA * std))]


def fit_gp(x: np.ndarray, y: np.ndarray, seed: int = 0) -> Any:
    """A ``GaussianProcessRegressor`` fitted on inputs ``x`` (rows: time, hyperparameters in [0, 1]) and ``y``.

    Its kernel's parameters (``kernel_``: signal variance, one RBF length
    scale per column, noise) maximize the marginal likelihood, from the
    defaults and :data:`RESTARTS` random starts (``seed``). A fit that does
    not converge keeps its best parameters (scikit-learn's warning is silenced).
    """
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel

    kernel = (ConstantKernel(1.0, (1e-3, 1e3)) * RBF(np.full(x.shape[1], 0.3), (1e-2, 1e2))
              + WhiteKernel(0.1, (1e-6, 1e1)))
    gp = GaussianProcessRegressor(kernel, normalize_y=True, n_restarts_optimizer=RESTARTS, random_state=seed % 2**32)
    from threadpoolctl import threadpool_limits

    with warnings.catch_warnings(), threadpool_limits(1):
        warnings.simplefilter("ignore", ConvergenceWarning)
        gp.fit(x, y)
    return gp
