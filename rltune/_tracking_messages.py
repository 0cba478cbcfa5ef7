"""The messages between the orchestrator and the study's tracking process (re-exported by :mod:`rltune._ipc`).

One message class per tracker call in; :class:`LogLine`, :class:`Progress`,
:class:`Reconciled` and :class:`Closed` out. Frozen dataclasses, pickled by
reference to this module: both ends run the same rltune. Add fields at the
end, with defaults.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

@dataclass(frozen=True)
class TrackingInit:
    """The first message to the tracking process: what it needs to open the study's tracker."""

    kind: ClassVar[str] = "init"
    options: dict[str, Any]


@dataclass(frozen=True)
class OpenTrial:
    """Create (or reopen) the trial's run; ``start_time_ms``: the trial's own start (the run's ``start_time``)."""

    kind: ClassVar[str] = "open"
    number: int
    params: dict[str, Any]
    key_params: Any
    options: dict[str, Any]
    start_time_ms: int | None = None


@dataclass(frozen=True)
class LogResult:
    """Log one result of trial ``number`` at its step.

    ``replace``: the trial just ran it (the orchestrator's results, not a
    replay of recorded ones): at a step the run already holds, the trial ran
    the step again after restoring a checkpoint, and these values replace
    the held ones (see ``TrialTracker.log_results``).
    """

    kind: ClassVar[str] = "result"
    number: int
    result: dict[str, Any]
    timestamp_ms: int
    replace: bool = False


@dataclass(frozen=True)
class LogCheckpoint:
    """Upload the checkpoint copy at ``copy`` as ``checkpoints/<name>``, then remove the copy."""

    kind: ClassVar[str] = "checkpoint"
    number: int
    copy: str
    name: str


@dataclass(frozen=True)
class LogFiles:
    """Upload the file copies ``copies``, then remove their staging directory."""

    kind: ClassVar[str] = "files"
    number: int
    staging: str
    copies: list[str]


@dataclass(frozen=True)
class LogCurve:
    kind: ClassVar[str] = "curve"
    number: int


@dataclass(frozen=True)
class TagTrial:
    """Set tags on the trial's run (PBT: its ancestry, ``rltune.pbt.*``)."""

    kind: ClassVar[str] = "tags"
    number: int
    tags: dict[str, str]


@dataclass(frozen=True)
class LogModel:
    """Export the policy of the checkpoint copy at ``copy`` as a pyfunc model, then remove the copy."""

    kind: ClassVar[str] = "model"
    number: int
    copy: str


@dataclass(frozen=True)
class LogSeedRuns:
    """The seeds of a seeds_per_trial trial as runs nested under its run: each ``{index, seed, results}``."""

    kind: ClassVar[str] = "seeds"
    number: int
    runs: list[dict[str, Any]]
    state: str


@dataclass(frozen=True)
class EndTrial:
    """End the trial's run in ``state``; ``end_time_ms``: the trial's own end (the run's ``end_time``)."""

    kind: ClassVar[str] = "end"
    number: int
    state: str
    reason: str | None
    error: str | None
    end_time_ms: int | None = None


@dataclass(frozen=True)
class UpdateBest:
    kind: ClassVar[str] = "best"
    number: int
    value: float
    params: dict[str, Any]


@dataclass(frozen=True)
class Reconcile:
    kind: ClassVar[str] = "reconcile"
    trials: list[Any]
    finished_only: bool


@dataclass(frozen=True)
class DrawPlots:
    kind: ClassVar[str] = "plots"
    trials: list[Any]
    directions: list[Any]


@dataclass(frozen=True)
class FinishStudy:
    """End the study's parent run (FINISHED, or KILLED when interrupted) at ``end_time_ms``, the study's end."""

    kind: ClassVar[str] = "finish"
    interrupted: bool
    end_time_ms: int


@dataclass(frozen=True)
class CloseTracking:
    kind: ClassVar[str] = "close"
    interrupted: bool


@dataclass(frozen=True)
class LogLine:
    """A warning of the tracking process, for the orchestrator's log."""

    level: int
    text: str


@dataclass(frozen=True)
class Progress:
    """The tracking process has handled every message before the ``recorded``-th (counted from 0, its init)."""

    recorded: int


@dataclass(frozen=True)
class Reconciled:
    """A reconciliation logged what the runs of these trials lacked (an earlier run left it unrecorded)."""

    repaired: list[int]


@dataclass(frozen=True)
class Closed:
    """The tracking process closed its tracker: what it could not record, and how many calls by kind."""

    unrecorded: list[str]
    failure_counts: dict[str, int]
