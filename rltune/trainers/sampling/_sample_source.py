"""SampleSource: where an algorithm's training batches come from.

The rollout workers (:class:`WorkerSet`) are one source; a policy server,
offline files or a replay of logged episodes are others. An algorithm only
samples, pushes weights and reads metrics through this interface.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from rltune.trainers.sampling._sample_batch import SampleResult


@runtime_checkable
class SampleSource(Protocol):
    """What an algorithm needs from a data source."""

    def sample(self, min_steps: int) -> SampleResult:
        """At least ``min_steps`` env steps (or rows), postprocessed batches by policy id, and the episodes that ended."""
        ...

    def sync_weights(self, global_vars: dict[str, Any] | None = None) -> None:
        """Weights in: the learner policies' weights (and global vars such as ``timestep``) reach whatever samples."""
        ...

    def metrics(self) -> dict[str, int]:
        """Metrics out: the source's health counters for the result dict (workers alive, restarts)."""
        ...
