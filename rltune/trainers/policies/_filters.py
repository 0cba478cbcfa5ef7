"""Observation filters (RLlib's ``observation_filter``): a running mean and std of each policy's observations.

``MeanStdFilter`` maps every observation a policy receives (flattened by its
preprocessor) to ``clip((obs - mean) / (std + 1e-6), -10, 10)``, per
dimension, where ``mean`` and ``std`` are the running statistics of all the
observations of that policy seen so far, the ones being filtered included
(they are added first, as RLlib does). The filtered observation is what the
policy acts on and what the training batch holds (``obs`` and ``new_obs``).
There is one filter per policy id: the agents of one policy share it.
``NoFilter`` passes observations through; it is no object at all (a worker
holds no filter for it), so it costs nothing.

Statistics: the count, mean and sum of squared deviations (``m2``) in
float64. Each step's observations (all the envs of a worker, one batch) are
added at once with Welford's update, batched; statistics of different
workers are merged with Chan et al.'s parallel formula. Both are exact and
work on deviations from a nearby mean, so a large offset (observations
around 1e5) loses nothing. The std is the sample std (``n - 1``). With no
observation yet a filter passes observations through unchanged; with one
it only subtracts the mean (RLlib divides by ``|mean|`` there, which makes
its only observation 0 too).

Across processes (RLlib's ``FilterManager``, without its extra round trips):
every rollout worker process filters with its own copy and also keeps what it
has seen since it last reported (its *delta*). A worker's ``sample()`` reply
carries its deltas, which the trainer merges into its master filters (those
of its local worker) as the replies arrive; the master statistics go back to
every worker with the weights (``set_weights``), once per iteration (after
every round of an off-policy algorithm). A worker then filters with the
master statistics plus anything it saw since its last report. With
``num_workers: 0`` the local worker samples and its filters are the master.
Checkpoints hold the master statistics; evaluation, ``compute_single_action``,
``rltune rollout`` and the exported MLflow model apply them frozen (no updates).

``ConcurrentMeanStdFilter`` is the same filter here. In RLlib it is a
MeanStdFilter behind a lock, for ``sample_async``, where a sampler thread
filters while the worker's main thread reads and replaces the filter. An
rltune rollout worker is one process that samples on its own thread only,
and the trainer's master is touched by the trainer's thread only, so there
is nothing to lock: both names give the same statistics.

RLlib's classic ``observation_filter`` passes ``clip=None``; its newer
connectors clip at 10, as rltune does.
"""

from __future__ import annotations

from typing import Any

import numpy as np

FILTER_NAMES = ("NoFilter", "MeanStdFilter", "ConcurrentMeanStdFilter")
CLIP = 10.0  # filtered values are clipped to [-CLIP, CLIP]
EPSILON = 1e-6  # added to the std before dividing (RLlib's SMALL_NUMBER)
PENDING_ROWS = 8192  # rows a rollout worker keeps for its delta before folding them into its stats


class RunningStats:
    """Count, mean and sum of squared deviations (``m2``) of the vectors seen, in float64.

    Invariant: ``mean`` and ``m2`` have the shape ``(size,)``; with
    ``count == 0`` both are zero. :meth:`merge` is exact: merging the stats
    of two sequences gives the stats of their concatenation.
    """

    __slots__ = ("count", "mean", "m2")

    def __init__(self, size: int) -> None:
        self.count = 0
        self.mean = np.zeros(size, dtype=np.float64)
        self.m2 = np.zeros(size, dtype=np.float64)

    @classmethod
    def of(cls, rows: np.ndarray) -> "RunningStats":
        """The stats of a batch of rows ``[B, size]``."""
        rows = np.asarray(rows)
        stats = cls(rows.shape[1])
        stats.add_rows(rows)
        return stats

    @classmethod
    def from_arrays(cls, count: Any, mean: Any, m2: Any) -> "RunningStats":
        """Stats from their saved arrays; ValueError naming what does not fit."""
        count_arr, mean, m2 = np.asarray(count), np.asarray(mean, dtype=np.float64), np.asarray(m2, dtype=np.float64)
        if count_arr.shape != () or not np.issubdtype(count_arr.dtype, np.integer) or int(count_arr) < 0:
            raise ValueError(f"count must be an integer >= 0, but is {count!r:.60}")
        if mean.ndim != 1 or m2.shape != mean.shape:
            raise ValueError(f"mean and m2 must be vectors of one length, but have shapes {mean.shape} and {m2.shape}")
        if not (np.isfinite(mean).all() and np.isfinite(m2).all()) or (m2 < 0).any():
            raise ValueError("mean and m2 must be finite and m2 >= 0")
        stats = cls(len(mean))
        stats.count, stats.mean[:], stats.m2[:] = int(count_arr), mean, m2
        return stats

    @property
    def size(self) -> int:
        return len(self.mean)

    @property
    def std(self) -> np.ndarray:
        """The sample standard deviation (``n - 1``); ones while fewer than two vectors were seen."""
        if self.count < 2:
            return np.ones_like(self.mean)
        return np.sqrt(self.m2 / (self.count - 1))

    def copy(self) -> "RunningStats":
        other = RunningStats(self.size)
        other.count, other.mean[:], other.m2[:] = self.count, self.mean, self.m2
        return other

    def add_rows(self, rows: np.ndarray) -> np.ndarray:
        """Add a batch of rows ``[B, size]``; return ``rows - mean`` (float64) with the new mean.

        Welford's update, batched: the new mean is the old one plus the rows'
        deviations from it over the new count, and ``m2`` grows by
        ``sum((rows - old mean) * (rows - new mean))``, which is exact. The
        deviations are from a mean close to the rows (the running one; the
        batch's own on the first batch), so nothing large cancels.
        """
        # Plain ufunc calls with positional arguments: a step's batch is a few rows, where
        # numpy's Python-level wrappers (mean, clip, einsum) and keyword parsing cost more
        # than the arithmetic.
        n = len(rows)
        if self.count == 0:
            np.multiply(np.add.reduce(rows, 0, np.float64), 1.0 / n, self.mean)
            dev = np.subtract(rows, self.mean)
            self.m2 = np.add.reduce(np.multiply(dev, dev), 0)
            self.count = n
            return dev
        self.count += n
        old = np.subtract(rows, self.mean)
        step = np.add.reduce(old, 0)
        step *= 1.0 / self.count
        self.mean += step
        dev = np.subtract(rows, self.mean)
        old *= dev
        self.m2 += np.add.reduce(old, 0)
        return dev

    def add_moments(self, n: int, mean: np.ndarray, m2: np.ndarray) -> None:
        """Merge in the count, mean and m2 of ``n`` more vectors (Chan et al.'s parallel formula)."""
        if n == 0:
            return
        total = self.count + n
        delta = np.subtract(mean, self.mean)
        self.m2 += m2
        if self.count:
            self.mean += delta * (n / total)
            delta *= delta
            delta *= self.count * n / total
            self.m2 += delta
        else:
            self.mean += delta
        self.count = total

    def merge(self, other: "RunningStats") -> None:
        """Merge in another stats of the same size (their concatenation's stats)."""
        if other.size != self.size:
            raise ValueError(f"cannot merge stats of {other.size} dimensions into stats of {self.size}")
        self.add_moments(other.count, other.mean, other.m2)

    def to_arrays(self) -> dict[str, np.ndarray]:
        """``count`` (int64 scalar), ``mean``, ``m2`` (float64) for a checkpoint or an exported model."""
        return {"count": np.asarray(self.count, dtype=np.int64), "mean": self.mean.copy(), "m2": self.m2.copy()}

    def __repr__(self) -> str:
        return f"RunningStats(count={self.count}, size={self.size})"


class MeanStdFilter:
    """Running mean/std normalisation of one policy's flat observations (see the module docstring).

    ``track_delta``: also keep what was seen since the last
    :meth:`flush_delta` (a rollout worker process reports it to the
    trainer). The rows are kept as they come (a copy per step) and their
    stats computed once, when flushed or when they reach
    :data:`PENDING_ROWS`: cheaper than a second running update per step.
    """

    name = "MeanStdFilter"

    def __init__(self, size: int, *, track_delta: bool = True) -> None:
        self.stats = RunningStats(size)
        self.track_delta = track_delta
        self._delta = RunningStats(size)  # what was seen since the last flush, but for the pending rows
        self._pending: list[np.ndarray] = []
        self._num_pending = 0
        self._refresh()

    @property
    def size(self) -> int:
        return self.stats.size

    def _refresh(self) -> None:
        """Recompute the shift (mean) and scale (std + eps) that :meth:`normalize` applies."""
        stats = self.stats
        self._shift = stats.mean
        if stats.count < 2:
            self._scale = np.full(stats.size, 1.0 + EPSILON)
            return
        std = stats.m2 * (1.0 / (stats.count - 1))
        np.sqrt(std, std)
        std += EPSILON
        self._scale = std

    def __call__(self, rows: np.ndarray, update: bool = True, out: np.ndarray | None = None) -> np.ndarray:
        """Filter a batch of flat observations ``[B, size]`` (first adding them to the stats if ``update``).

        ``out`` (may be ``rows`` itself) receives the result; else a new float32 array.
        """
        if not (update and len(rows)):
            return self.normalize(rows, out)
        centred = self.stats.add_rows(rows)
        if self.track_delta:
            self._pending.append(np.array(rows, dtype=np.float32))  # a copy: ``out`` may be ``rows``
            self._num_pending += len(rows)
            if self._num_pending >= PENDING_ROWS:
                self._fold_pending()
        self._refresh()
        if out is None:
            out = np.empty(rows.shape, np.float32)
        np.divide(centred, self._scale, out)
        np.minimum(out, CLIP, out=out)
        return np.maximum(out, -CLIP, out=out)

    def normalize(self, rows: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """``clip((rows - mean) / (std + eps), -10, 10)`` with the current stats, no update (a frozen filter)."""
        if out is None:
            out = np.empty(rows.shape, np.float32)
        if self.stats.count == 0:
            out[...] = rows
            return out
        np.subtract(rows, self._shift, out)  # in float64 (the stats' precision), stored as float32
        np.divide(out, self._scale, out)
        np.minimum(out, CLIP, out=out)
        return np.maximum(out, -CLIP, out=out)

    def _fold_pending(self) -> None:
        if self._pending:
            self._delta.merge(RunningStats.of(np.concatenate(self._pending)))
            self._pending, self._num_pending = [], 0

    def flush_delta(self) -> RunningStats | None:
        """The stats seen since the last flush (None if nothing new), which start again from empty."""
        self._fold_pending()
        delta = self._delta
        if delta.count == 0:
            return None
        self._delta = RunningStats(self.size)
        return delta

    def merge_delta(self, delta: RunningStats) -> None:
        """Add a worker's delta to these stats (the trainer's master filter)."""
        self.stats.merge(delta)
        self._refresh()

    def set_stats(self, stats: RunningStats) -> None:
        """Filter with ``stats`` (the master's) from now on, plus what this filter saw and did not report yet."""
        if stats.size != self.size:
            raise ValueError(f"observation filter stats of {stats.size} dimensions for observations of {self.size}")
        self.stats = stats.copy()
        self._fold_pending()
        self.stats.merge(self._delta)
        self._refresh()

    def __repr__(self) -> str:
        return f"MeanStdFilter(size={self.size}, count={self.stats.count})"


def make_filter(name: str, size: int, *, track_delta: bool) -> MeanStdFilter | None:
    """The filter ``observation_filter: name`` asks for, for observations of ``size``; None for NoFilter."""
    if name == "NoFilter":
        return None
    if name in ("MeanStdFilter", "ConcurrentMeanStdFilter"):
        return MeanStdFilter(size, track_delta=track_delta)
    raise ValueError(f"unknown observation filter {name!r}; use one of {', '.join(map(repr, FILTER_NAMES))}")


def filter_name_problem(name: Any) -> str | None:
    """Why ``name`` is no ``observation_filter`` value (None if it is one)."""
    if isinstance(name, str) and name in FILTER_NAMES:
        return None
    return f"{name!r} is not an observation filter; use one of {', '.join(map(repr, FILTER_NAMES))}"


# -- many policies ---------------------------------------------------------------------------
Filters = dict[str, MeanStdFilter]  # by policy id; a policy without an entry is not filtered (NoFilter)


def filter_stats(filters: Filters) -> dict[str, RunningStats]:
    """Copies of every filter's stats, by policy id (what the trainer sends to workers and checkpoints)."""
    return {pid: f.stats.copy() for pid, f in filters.items()}


def flush_deltas(filters: Filters) -> dict[str, RunningStats]:
    """Every filter's new stats since the last flush, by policy id (only those with any)."""
    deltas = {}
    for pid, f in filters.items():
        delta = f.flush_delta()
        if delta is not None:
            deltas[pid] = delta
    return deltas


def merge_deltas(filters: Filters, deltas: dict[str, RunningStats]) -> None:
    """Merge a worker's deltas into the master filters (a policy removed meanwhile is skipped)."""
    for pid, delta in deltas.items():
        if pid in filters:
            filters[pid].merge_delta(delta)


def set_filter_stats(filters: Filters, stats: dict[str, RunningStats]) -> None:
    """Give each filter the master's stats of its policy (policies the master lacks keep theirs)."""
    for pid, s in stats.items():
        if pid in filters:
            filters[pid].set_stats(s)
