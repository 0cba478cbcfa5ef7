"""The action distribution catalog: how a policy samples, scores and sends actions of any supported space.

:func:`action_dist_for` maps an action space to an :class:`ActionDist`:

- ``Discrete``: a categorical over ``n`` logits (the index ``0 .. n - 1``;
  the env gets ``start`` added);
- ``MultiDiscrete``: one categorical per entry;
- ``MultiBinary``: one Bernoulli per bit over a logit;
- ``Box``: a diagonal Gaussian over the model's means and a state-free log
  std per dimension (clipped to the bounds for the env with ``clip_actions``);
- ``Tuple`` and ``Dict`` of those, nested: the product distribution of
  their parts (log-prob and entropy are sums over the parts).

Every space is a product of these leaves. The model's distribution inputs
are ``[B, num_inputs + num_log_std]``: the leaves' head outputs in leaf
order (logits, means), then the free log stds of the Gaussian leaves, in
leaf order (a plain Box: means then log stds, as before). A batch holds an
action as one flat row of ``width`` numbers (int64 when every leaf is
discrete, else float32), the leaves' columns in leaf order (Dict keys in the
space's order); :meth:`ActionDist.to_env` turns rows back into the env's
structured actions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional

import gymnasium as gym
import numpy as np
import torch
from torch.nn import functional as F

from rltune.errors import SpaceError
from rltune.trainers.policies._distributions import log_softmax, sample_categorical
from rltune.trainers.policies._exploration import uniform_box

SUPPORTED_ACTION_SPACES = "Discrete, MultiDiscrete, MultiBinary, Box, and Tuple / Dict of them"
_LOG_2PI = math.log(2 * math.pi)


@dataclass(frozen=True)
class _Leaf:
    """One elementary distribution of a product, with its slices of the inputs, log stds and action columns."""

    kind: str  # "categorical", "bernoulli" or "gaussian"
    size: int  # categories of a categorical, bits of a Bernoulli, dimensions of a Gaussian
    inputs: slice
    log_std: slice
    columns: slice
    low: Optional[np.ndarray] = None  # a Gaussian's bounds (flat), for uniform draws
    high: Optional[np.ndarray] = None


class ActionDist:
    """The distribution of one action space: sizes, numpy sampling, torch log-probs and entropies, env actions."""

    def __init__(self, space: gym.Space) -> None:
        self.space = space
        self.leaves: list[_Leaf] = []
        self._counts = [0, 0, 0]  # inputs, log stds, columns so far
        self._tree = self._build(space)
        self.num_inputs, self.num_log_std, self.width = self._counts
        discrete = all(leaf.kind != "gaussian" for leaf in self.leaves)
        self.action_dtype = np.int64 if discrete else np.float32
        if isinstance(space, gym.spaces.Discrete):
            self.action_shape: tuple[int, ...] = ()
        elif isinstance(space, gym.spaces.Box):
            self.action_shape = tuple(space.shape)
        else:
            self.action_shape = (self.width,)

    # -- building ---------------------------------------------------------------------
    def _leaf(self, kind: str, size: int, inputs: int, log_std: int, columns: int, **bounds: Any) -> _Leaf:
        i, s, c = self._counts
        leaf = _Leaf(kind, size, slice(i, i + inputs), slice(s, s + log_std), slice(c, c + columns), **bounds)
        self._counts = [i + inputs, s + log_std, c + columns]
        self.leaves.append(leaf)
        return leaf

    def _build(self, space: gym.Space) -> Any:
        """The space's decoding tree: ``(kind, space, leaves or children)``."""
        s = gym.spaces
        if isinstance(space, s.Discrete):
            return ("discrete", space, self._leaf("categorical", int(space.n), int(space.n), 0, 1))
        if isinstance(space, s.MultiDiscrete):
            leaves = [self._leaf("categorical", int(n), int(n), 0, 1) for n in space.nvec.reshape(-1)]
            return ("multi_discrete", space, leaves)
        if isinstance(space, s.MultiBinary):
            n = int(np.prod(space.shape))
            return ("multi_binary", space, self._leaf("bernoulli", n, n, 0, n))
        if isinstance(space, s.Box):
            d = int(np.prod(space.shape))
            low = np.asarray(space.low, np.float64).reshape(-1)
            high = np.asarray(space.high, np.float64).reshape(-1)
            return ("box", space, self._leaf("gaussian", d, d, d, d, low=low, high=high))
        if isinstance(space, s.Tuple):
            return ("tuple", space, [self._build(part) for part in space.spaces])
        if isinstance(space, s.Dict):
            return ("dict", space, {key: self._build(part) for key, part in space.spaces.items()})
        raise SpaceError(f"action space {space} is not supported by the built-in distributions (supported: {SUPPORTED_ACTION_SPACES})")

    # -- rollouts (numpy) ----------------------------------------------------------------
    def sample(self, dist_inputs: np.ndarray, rng: np.random.Generator, deterministic: bool) -> tuple[np.ndarray, np.ndarray]:
        """Actions ``[B, *action_shape]`` and their log-probabilities ``[B]`` (float32) from distribution inputs."""
        n = len(dist_inputs)
        heads, log_stds = dist_inputs[:, : self.num_inputs], dist_inputs[:, self.num_inputs :]
        actions = np.empty((n, self.width), dtype=self.action_dtype)
        logp = np.zeros(n, dtype=np.float64)
        for leaf in self.leaves:
            x = heads[:, leaf.inputs]
            if leaf.kind == "categorical":
                a, lp = sample_categorical(log_softmax(x), rng, deterministic)
                actions[:, leaf.columns] = a[:, None]
            elif leaf.kind == "bernoulli":
                a = (x > 0) if deterministic else rng.random(x.shape) < _sigmoid(x)
                lp = (-np.logaddexp(0.0, np.where(a, -x, x))).sum(axis=1)
                actions[:, leaf.columns] = a
            else:
                mean, log_std = x, log_stds[:, leaf.log_std]
                a = mean if deterministic else mean + np.exp(log_std) * rng.standard_normal(mean.shape)
                z = (a - mean) / np.exp(log_std)
                lp = (-0.5 * z * z - log_std - 0.5 * _LOG_2PI).sum(axis=1)
                actions[:, leaf.columns] = a
            logp += lp
        return actions.reshape((n,) + self.action_shape), logp.astype(np.float32)

    def uniform(self, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
        """``n`` uniformly random actions (a Gaussian leaf: uniform within finite bounds, standard normal where
        unbounded) and their log-probabilities under that sampling distribution."""
        actions = np.empty((n, self.width), dtype=self.action_dtype)
        logp = np.zeros(n, dtype=np.float64)
        for leaf in self.leaves:
            if leaf.kind == "categorical":
                actions[:, leaf.columns] = rng.integers(0, leaf.size, size=(n, 1))
                logp -= math.log(leaf.size)
            elif leaf.kind == "bernoulli":
                actions[:, leaf.columns] = rng.integers(0, 2, size=(n, leaf.size))
                logp -= leaf.size * math.log(2)
            else:
                a, lp = uniform_box(leaf.low, leaf.high, rng, n)
                actions[:, leaf.columns] = a
                logp += lp
        return actions.reshape((n,) + self.action_shape), logp.astype(np.float32)

    def to_env(self, actions: np.ndarray, clip: bool = True) -> list[Any]:
        """Batch rows ``[B, *action_shape]`` as the env's actions (Discrete parts offset by ``start``, Box parts clipped with ``clip``)."""
        rows = np.asarray(actions).reshape(len(actions), self.width)
        return [self._decode(self._tree, row, clip) for row in rows]

    def _decode(self, node: Any, row: np.ndarray, clip: bool) -> Any:
        kind, space, part = node
        if kind == "discrete":
            return int(row[part.columns][0]) + int(space.start)
        if kind == "multi_discrete":
            values = np.array([row[leaf.columns][0] for leaf in part], dtype=np.int64).reshape(space.shape)
            return (values + space.start).astype(space.dtype)
        if kind == "multi_binary":
            return np.asarray(row[part.columns]).reshape(space.shape).astype(space.dtype)
        if kind == "box":
            values = np.asarray(row[part.columns], dtype=np.float64).reshape(space.shape)
            if clip:
                values = np.clip(values, space.low, space.high)
            return values.astype(space.dtype)
        if kind == "tuple":
            return tuple(self._decode(child, row, clip) for child in part)
        return {key: self._decode(child, row, clip) for key, child in part.items()}

    def encode(self, action: Any) -> np.ndarray:
        """One env action as a batch row (the inverse of :meth:`to_env` for actions within the bounds)."""
        row = np.empty(self.width, dtype=self.action_dtype)
        self._encode(self._tree, action, row)
        return row.reshape(self.action_shape)

    def _encode(self, node: Any, action: Any, row: np.ndarray) -> None:
        kind, space, part = node
        if kind == "discrete":
            row[part.columns] = int(action) - int(space.start)
        elif kind == "multi_discrete":
            values = (np.asarray(action, np.int64) - space.start).reshape(-1)
            for leaf, value in zip(part, values):
                row[leaf.columns] = value
        elif kind in ("multi_binary", "box"):
            row[part.columns] = np.asarray(action).reshape(-1)
        elif kind == "tuple":
            for child, value in zip(part, action):
                self._encode(child, value, row)
        else:
            for key, child in part.items():
                self._encode(child, action[key], row)

    # -- learning (torch) ----------------------------------------------------------------
    def torch_dist(self, dist_inputs: torch.Tensor) -> ProductDistribution:
        """The distribution over the model's outputs, for the loss."""
        return ProductDistribution(self, dist_inputs)


class ProductDistribution:
    """An :class:`ActionDist`'s distribution over torch inputs ``[B, num_inputs + num_log_std]``: sums over its leaves."""

    def __init__(self, dist: ActionDist, dist_inputs: torch.Tensor) -> None:
        self.dist = dist
        self.heads = dist_inputs[:, : dist.num_inputs]
        self.log_stds = dist_inputs[:, dist.num_inputs :]

    def logp(self, actions: torch.Tensor) -> torch.Tensor:
        """Log-probabilities ``[B]`` of action rows ``[B, *action_shape]``."""
        rows = actions.reshape(len(actions), self.dist.width)
        total = torch.zeros(len(actions), dtype=self.heads.dtype, device=self.heads.device)
        for leaf in self.dist.leaves:
            x, a = self.heads[:, leaf.inputs], rows[:, leaf.columns]
            if leaf.kind == "categorical":
                total = total + torch.log_softmax(x, dim=-1).gather(-1, a.long()).squeeze(-1)
            elif leaf.kind == "bernoulli":
                total = total - F.softplus(torch.where(a.bool(), -x, x)).sum(dim=-1)
            else:
                log_std = self.log_stds[:, leaf.log_std]
                z = (a.to(x.dtype) - x) / log_std.exp()
                total = total + (-0.5 * z.pow(2) - log_std - 0.5 * _LOG_2PI).sum(dim=-1)
        return total

    def entropy(self) -> torch.Tensor:
        """Entropies ``[B]``: the sum of the leaves'."""
        total = torch.zeros(len(self.heads), dtype=self.heads.dtype, device=self.heads.device)
        for leaf in self.dist.leaves:
            x = self.heads[:, leaf.inputs]
            if leaf.kind == "categorical":
                log_probs = torch.log_softmax(x, dim=-1)
                total = total - (log_probs.exp() * log_probs).sum(dim=-1)
            elif leaf.kind == "bernoulli":
                total = total + (F.softplus(x) - x * torch.sigmoid(x)).sum(dim=-1)
            else:
                total = total + (self.log_stds[:, leaf.log_std] + 0.5 * math.log(2 * math.pi * math.e)).sum(dim=-1)
        return total


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))  # no overflow warning for large |x|


def action_dist_for(space: gym.Space, algorithm: str = "") -> ActionDist:
    """The catalog's distribution of ``space``; :class:`SpaceError` naming it (and ``algorithm``) if the catalog has none."""
    try:
        return ActionDist(space)
    except SpaceError as exc:
        if not algorithm:
            raise
        raise SpaceError(f"{algorithm}: {exc}") from None
