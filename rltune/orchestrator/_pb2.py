"""PB2's explore step: a Gaussian-process bandit picks the new hyperparameters (pure: numpy and scipy).

PB2 (Parker-Holder et al., 2020) is PBT whose explore step, instead of random
perturbations, fits a Gaussian process to what the population observed: at
each interval of each member, the hyperparameters in force (normalized to
[0, 1] in ``hyperparam_bounds``), the time (iteration, normalized) and the
change of the score over the interval; the new values maximize the upper
confidence bound ``mean + kappa x std`` at the current time, over random
candidates in the bounds. Observations come from every member's user attr
``pb2_history`` in the study's storage (those of failed members included:
they were observed; a member that errored never breaks the fit, ray#40787).

The kernel is a squared exponential with fixed length scale and noise (no
hyperparameter fit); with fewer than 2 observations the values are drawn
uniformly in the bounds.
"""

from __future__ import annotations

import math
import random
from typing import Any

import numpy as np

KAPPA = 2.0  # exploration weight of the UCB
LENGTH_SCALE = 0.3  # of the squared-exponential kernel, on [0, 1]-normalized inputs
NOISE = 0.1  # observation noise variance, on standardized score changes
CANDIDATES = 512
MAX_POINTS = 256  # the most recent observations the GP is fit on (its cost is cubic in them)


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
    y = (y - y.mean()) / (y.std() or 1.0)
    query = np.hstack([np.full((CANDIDATES, 1), now), candidates])
    mean, std = _posterior(x, y, query)
    return candidates[int(np.argmax(mean + KAPPA * std))]


def _posterior(x: np.ndarray, y: np.ndarray, query: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    from scipy.linalg import cho_factor, cho_solve

    factor = cho_factor(_kernel(x, x) + NOISE * np.eye(len(x)))
    cross = _kernel(query, x)
    mean = cross @ cho_solve(factor, y)
    variance = 1.0 - np.einsum("ij,ji->i", cross, cho_solve(factor, cross.T))
    return mean, np.sqrt(np.clip(variance, 0.0, None))


def _kernel(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    squared = ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1)
    return np.exp(-0.5 * squared / LENGTH_SCALE**2)
