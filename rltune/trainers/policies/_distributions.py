"""Action distributions over the model's distribution inputs (RLlib's ``action_dist_inputs``)."""

from __future__ import annotations

import math

import numpy as np
import torch


class Categorical:
    """Categorical over logits ``[B, n]``, for the loss (rollouts sample in numpy, below); actions are int64 ``[B]``."""

    def __init__(self, logits: torch.Tensor) -> None:
        self.log_probs = torch.log_softmax(logits, dim=-1)

    def logp(self, actions: torch.Tensor) -> torch.Tensor:
        return self.log_probs.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)

    def entropy(self) -> torch.Tensor:
        return -(self.log_probs.exp() * self.log_probs).sum(dim=-1)


class DiagGaussian:
    """Diagonal Gaussian over ``[B, 2*d]`` inputs (means, then log stds), for the loss; actions are float32 ``[B, d]``."""

    def __init__(self, inputs: torch.Tensor) -> None:
        self.mean, self.log_std = torch.chunk(inputs, 2, dim=-1)
        self.std = self.log_std.exp()

    def logp(self, actions: torch.Tensor) -> torch.Tensor:
        z = (actions - self.mean) / self.std
        return (-0.5 * z.pow(2) - self.log_std - 0.5 * math.log(2 * math.pi)).sum(dim=-1)

    def entropy(self) -> torch.Tensor:
        return (self.log_std + 0.5 * math.log(2 * math.pi * math.e)).sum(dim=-1)


# Sampling on the rollout path happens in numpy: for the small batches of a
# vector of envs, a few numpy calls cost less than the equivalent torch kernels.


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """Normalised log-probabilities ``[B, n]`` of logits ``[B, n]``."""
    shifted = logits - logits.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


def sample_categorical(
    log_probs: np.ndarray, rng: np.random.Generator, deterministic: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Actions ``[B]`` (int64) and their log-probabilities from normalised log-probabilities ``[B, n]``."""
    if deterministic:
        actions = log_probs.argmax(axis=1)
    else:
        cumulative = np.cumsum(np.exp(log_probs), axis=1)
        # Scaling by the last cumulative value keeps the draw below it despite rounding.
        draws = rng.random((len(log_probs), 1), dtype=np.float32) * cumulative[:, -1:]
        actions = (cumulative < draws).sum(axis=1)
    # Fancy indexing: several times cheaper than np.take_along_axis on a vector's few rows.
    return actions, log_probs[np.arange(len(log_probs)), actions]


def sample_diag_gaussian(
    inputs: np.ndarray, rng: np.random.Generator, deterministic: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Actions ``[B, d]`` (float32) and their log-probabilities from ``[B, 2d]`` means and log stds."""
    mean, log_std = np.split(inputs, 2, axis=1)
    if deterministic:
        actions = mean
    else:
        actions = mean + np.exp(log_std) * rng.standard_normal(mean.shape, dtype=np.float32)
    z = (actions - mean) / np.exp(log_std)
    logp = (-0.5 * z * z - log_std - 0.5 * math.log(2 * math.pi)).sum(axis=1)
    return actions.astype(np.float32), logp.astype(np.float32)
