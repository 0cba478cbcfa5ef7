"""What the orchestrator answers a trial's result, and how a finished trial ends: pure functions.

No processes, no storage: the runner reads a result (:func:`read_result`),
reports :attr:`Reading.value` to Optuna, then asks :func:`decide` whether the
trial goes on. When the trial's process is done, :func:`final_state` says what
Optuna is told. A :class:`Scheduler` (PBT: :mod:`._pbt`) is asked after the pruner, with a
trial that goes on, and may answer :class:`ExploitTrial`. A decision is one of
:class:`Proceed`, :class:`StopTrial`, :class:`ExploitTrial`, :class:`HoldTrial` (:data:`Decision`).
A synchronous scheduler may answer :class:`HoldTrial` (none yet) and answer
later, when asked to ``release`` the trial.
``rltune train`` asks :func:`read_result` and :func:`decide` too, in its own
process (:class:`rltune.orchestrator._trial.LocalDecider`).
"""

from __future__ import annotations

import difflib
import enum
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Protocol, Union

from rltune._ipc import Continue, Exploit, Stop
from rltune._metrics import MISSING, finite, flatten_keys, lookup, not_yet_reported, per_policy_key
from rltune.errors import ConfigError
from rltune.orchestrator._objectives import missing_metric, not_finite_reason, objective_values
from rltune.orchestrator._stop import StopCriteria

CONTINUE = Continue()


class Outcome(enum.Enum):
    """How a trial's attempt ends, once decided (a :class:`Decision` that goes on has none)."""

    COMPLETE = "complete"  # a stop criterion met (or the trainable returned): COMPLETE with its metric
    PRUNED = "pruned"  # the pruner said so
    INTERRUPTED = "interrupted"  # Ctrl-C (or killed): left RUNNING, resumable from its latest checkpoint
    ERROR = "error"  # the study's spec does not fit the results: FAIL, and the study stops


@dataclass(frozen=True)
class Reading:
    """One result, read: the metric to report (None: missing or not finite), a stop criterion met, or a study error."""

    value: float | None
    stop_reason: Any = None  # a StopReason when a ``stop`` criterion is met
    error: ConfigError | None = None  # the study's spec does not fit the results (metric or stop key missing)


@dataclass(frozen=True)
class Proceed:
    """The answer that lets the trial go on; ``checkpoint``: save one of this iteration first (a PBT interval)."""

    checkpoint: bool = False
    outcome: ClassVar[Outcome | None] = None  # it goes on: no outcome yet
    note: ClassVar[str | None] = None

    def message(self) -> Continue:
        """``Continue()`` (``Continue(want_checkpoint=True)`` when a checkpoint is wanted)."""
        return Continue(True) if self.checkpoint else CONTINUE


@dataclass(frozen=True)
class StopTrial:
    """The answer that ends the trial: why (sent to it), whether it checkpoints first, and its outcome."""

    reason: str  # sent to the trial
    checkpoint: bool  # save a checkpoint before stopping
    outcome: Outcome
    note: str  # the trial's reason as shown and recorded

    def message(self) -> Stop:
        """``Stop(reason, want_checkpoint)``."""
        return Stop(self.reason, self.checkpoint)


@dataclass(frozen=True)
class ExploitTrial:
    """PBT's answer: restore trial ``source``'s ``checkpoint`` and go on with ``config`` (explored from its own).

    ``changed``: the hyperparameters the explore step set (name -> value),
    for the trial's lineage; ``note``: what is shown and recorded.
    """

    source: int
    checkpoint: str
    config: dict[str, Any]
    changed: dict[str, Any] = field(default_factory=dict)
    note: str = ""
    outcome: ClassVar[Outcome | None] = None  # it goes on

    def message(self) -> Exploit:
        """``Exploit(checkpoint, config)``: the trial process restores it and trains on with the new config."""
        return Exploit(self.checkpoint, self.config)


@dataclass(frozen=True)
class HoldTrial:
    """Synchronous PBT's answer: none yet. The trial's process waits for it (blocked on its answer) until
    every running member has reached interval ``iteration``; the scheduler's ``release`` answers then."""

    iteration: int
    outcome: ClassVar[Outcome | None] = None  # it goes on
    note: ClassVar[str | None] = None


Decision = Union[Proceed, StopTrial, ExploitTrial, HoldTrial]  # what a result is answered with (module docstring)
CONTINUE_DECISION = Proceed()


class Scheduler(Protocol):
    """What the runner asks after the pruner (PBT and others): a seam beside Optuna's pruners.

    Invariants: :meth:`decide` is asked only with a :class:`Proceed` (a trial
    that stops stays stopped) and only for a result whose metric has a value;
    it returns that decision or another. Its state lives in the Optuna
    storage (a scheduler object keeps none of its own between calls), so a
    resumed study and workers sharing a storage see the same population.
    """

    def decide(self, trial: Any, result: dict[str, Any], value: float, decision: Proceed) -> Decision:
        """The answer to ``trial``'s ``result`` (its metric's ``value``), given the pruner's ``decision``."""

    def annotate(self, trial: Any, result: dict[str, Any]) -> None:
        """Add to ``result`` what the scheduler records with it, before anyone sees it (PBT: ``hyperparams``)."""

    def release(self, trial: Any) -> Decision | None:
        """The answer to a trial it held (:class:`HoldTrial`), or None while it still waits."""


def read_result(result: dict[str, Any], metric: str | list[str] | None, stop: StopCriteria) -> Reading:
    """The metric's value in ``result`` and the ``stop`` criterion it meets, or why the study cannot go on.

    ``metric`` None: a trial of no study (``rltune train``), read for its stop criteria only.
    A per-policy metric (``policy_reward_mean/main``) that the result's
    ``policy_reward_mean`` lacks has no value yet (no episode of the policy
    has ended), as a NaN ``episode_reward_mean`` has none.
    """
    multi = metric is not None and not isinstance(metric, str)  # several metrics: a tuple of values (._objectives)
    found = None if metric is None or multi else lookup(result, metric)
    if found is MISSING and not_yet_reported(result, metric):
        found = None
    if found is MISSING:
        keys = flatten_keys(result)
        close = difflib.get_close_matches(metric, keys, n=1, cutoff=0.5)
        hint = f"; did you mean {close[0]!r}?" if close else f" (keys: {', '.join(sorted(keys)[:12])})"
        return Reading(None, error=ConfigError(f"metric: {metric!r} is not a key of the trial's results{hint}",
                                               where="study"))
    if multi and missing_metric(result, metric):
        return Reading(None, error=ConfigError(missing_metric(result, metric), where="study"))
    try:
        reason = stop.check(result)
    except ConfigError as exc:
        return Reading(None, error=exc)
    return Reading(objective_values(result, metric) if multi else finite(found), reason)


def decide(reading: Reading, *, iteration: int, stopping: bool, checkpoint_at_end: bool,
           should_prune: Callable[[], bool] | None) -> Proceed | StopTrial:
    """Continue or stop, after the reading's value was reported.

    ``stopping``: the study is stopping (Ctrl-C): checkpoint and stop.
    ``should_prune``: the pruner's verdict, asked only when it can matter
    (None: no pruner). A study error stops the trial without a checkpoint.
    """
    if reading.error is not None:
        return StopTrial("invalid study", False, Outcome.ERROR, str(reading.error))
    if stopping:
        return StopTrial("interrupted", True, Outcome.INTERRUPTED, "interrupted")
    if reading.stop_reason is not None:
        reason = str(reading.stop_reason)
        return StopTrial(reason, checkpoint_at_end, Outcome.COMPLETE, reason)
    if should_prune is not None and reading.value is not None and should_prune():
        return StopTrial("pruned", True, Outcome.PRUNED, f"pruned at iteration {iteration}")
    return CONTINUE_DECISION


@dataclass(frozen=True)
class Final:
    """How Optuna is told a trial ended: its state, value, and the error recorded with a FAIL."""

    state: str  # "COMPLETE" | "PRUNED" | "FAIL"
    value: float | list[float] | None = None  # a list in a multi-objective study
    error: str | None = None


def final_state(outcome: Outcome | None, reason: str | None, last_result: dict[str, Any] | None,
                metric: str | list[str]) -> Final:
    """The end of a trial whose process is done and that was not interrupted (see :class:`Decision`)."""
    if outcome is Outcome.ERROR:
        return Final("FAIL", error=reason or "invalid study")
    if outcome is Outcome.PRUNED:
        return Final("PRUNED")
    if last_result is None:
        return Final("FAIL", error="the trainable returned without reporting a result (call reporter(**result))")
    if not isinstance(metric, str):  # several metrics: each must be finite (._objectives)
        values = objective_values(last_result, metric)
        return Final("COMPLETE", list(values)) if values is not None else Final(
            "FAIL", error=not_finite_reason(last_result, metric))
    found = lookup(last_result, metric)
    value = finite(found)
    if found is MISSING and per_policy_key(metric) is not None:
        group, policy = per_policy_key(metric)
        return Final("FAIL", error=f"metric {metric!r} has no value in the last result: {group} has no entry for "
                                   f"policy {policy!r} (no episode in which it acted ended in the results' window)")
    if value is None:
        return Final("FAIL", error=f"metric {metric!r} is {found!r} in the last result (not a finite number)")
    return Final("COMPLETE", value)
