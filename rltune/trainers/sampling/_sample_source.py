"""SampleSource: where an algorithm's training data comes from.

The rollout workers (:class:`WorkerSet`) are one source; a policy server,
offline files or a replay of logged episodes are others (a trainer's
``make_sample_source`` plugs one in; docs/sample_sources.md). A source hands
over raw per-agent episode fragments (:class:`~._fragment.Fragment`), which
the algorithm postprocesses with its learner's policies, and takes the
weights back. An algorithm only samples, syncs weights and reads metrics
through this interface.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from rltune.errors import ConfigError
from rltune.trainers.sampling._sample_batch import SampleResult


@runtime_checkable
class SampleSource(Protocol):
    """What an algorithm needs from a data source."""

    def sample(self, min_steps: int) -> SampleResult:
        """At least ``min_steps`` env steps (or rows): raw fragments (``SampleResult.fragments``) and the episodes that ended."""
        ...

    def sync_weights(self, global_vars: dict[str, Any] | None = None) -> None:
        """Weights in: the learner's weights changed (a source reads them, e.g. ``trainer.get_weights()``, with the
        observation filters' state); ``global_vars`` such as ``timestep`` come along."""
        ...

    def metrics(self) -> dict[str, int]:
        """Metrics out: the source's health counters for the result dict (workers alive, restarts)."""
        ...


def checked_source(source: Any, where: str) -> SampleSource:
    """``source`` if it has the :class:`SampleSource` methods, else a ConfigError naming what it lacks."""
    missing = [name for name in ("sample", "sync_weights", "metrics") if not callable(getattr(source, name, None))]
    if missing:
        raise ConfigError(f"{where} returned {type(source).__name__}, which lacks the SampleSource method(s) {missing}: "
                          "sample(min_steps) -> SampleResult, sync_weights(global_vars), metrics() -> dict")
    return source
