"""A uniform replay buffer over numpy ring arrays (one array per column)."""

from __future__ import annotations

import numpy as np

from rltune.trainers.sampling._sample_batch import SampleBatch, batch_size


class ReplayBuffer:
    """Stores up to ``capacity`` rows of flat batches; the oldest rows are overwritten first."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._columns: dict[str, np.ndarray] = {}
        self._next = 0
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def add(self, batch: SampleBatch) -> None:
        """Append every row of a flat batch."""
        n = batch_size(batch)
        if n == 0:
            return
        if not self._columns:
            self._columns = {k: np.empty((self.capacity,) + v.shape[1:], dtype=v.dtype) for k, v in batch.items()}
        if n >= self.capacity:  # only the newest rows fit
            batch = {k: v[-self.capacity :] for k, v in batch.items()}
            n = self.capacity
        idx = (self._next + np.arange(n)) % self.capacity
        for key, column in self._columns.items():
            column[idx] = batch[key]
        self._next = int((self._next + n) % self.capacity)
        self._size = min(self._size + n, self.capacity)

    def sample(self, num_items: int, rng: np.random.Generator) -> SampleBatch:
        """``num_items`` rows drawn uniformly with replacement."""
        idx = rng.integers(0, self._size, size=num_items)
        return {k: v[idx] for k, v in self._columns.items()}

    def get_state(self) -> dict[str, np.ndarray]:
        """The stored rows (oldest first) as arrays, for a checkpoint."""
        if not self._columns:
            return {}
        order = (self._next - self._size + np.arange(self._size)) % self.capacity
        return {k: v[order] for k, v in self._columns.items()}

    def set_state(self, arrays: dict[str, np.ndarray]) -> None:
        """Refill from :meth:`get_state` output."""
        self._columns, self._next, self._size = {}, 0, 0
        if arrays:
            self.add(arrays)
