"""What the orchestrator answers a trial's result, and how a finished trial ends: pure functions.

No processes, no storage: the runner reads a result (:func:`read_result`),
reports :attr:`Reading.value` to Optuna, then asks :func:`decide` whether the
trial goes on. When the trial's process is done, :func:`final_state` says what
Optuna is told. A scheduler (PBT and others, later) plugs in here.
``rltune train`` asks :func:`read_result` and :func:`decide` too, in its own
process (:class:`rltune.orchestrator._trial.LocalDecider`).
"""

from __future__ import annotations

import difflib
import enum
from dataclasses import dataclass
from typing import Any, Callable

from rltune._ipc import Continue, Stop
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
class Decision:
    """The answer to one result: go on, or stop (with or without a checkpoint), and the trial's outcome."""

    stop: bool = False
    reason: str | None = None  # why it stops (sent to the trial)
    checkpoint: bool = False  # save a checkpoint before stopping
    outcome: Outcome | None = None  # None while it goes on
    note: str | None = None  # the trial's reason as shown and recorded

    def message(self) -> Continue | Stop:
        """The message to the trial process: ``Continue()`` or ``Stop(reason, want_checkpoint)``."""
        return Stop(self.reason, self.checkpoint) if self.stop else CONTINUE


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
           should_prune: Callable[[], bool] | None) -> Decision:
    """Continue or stop, after the reading's value was reported.

    ``stopping``: the study is stopping (Ctrl-C): checkpoint and stop.
    ``should_prune``: the pruner's verdict, asked only when it can matter
    (None: no pruner). A study error stops the trial without a checkpoint.
    """
    if reading.error is not None:
        return Decision(True, "invalid study", False, Outcome.ERROR, str(reading.error))
    if stopping:
        return Decision(True, "interrupted", True, Outcome.INTERRUPTED, "interrupted")
    if reading.stop_reason is not None:
        reason = str(reading.stop_reason)
        return Decision(True, reason, checkpoint_at_end, Outcome.COMPLETE, reason)
    if should_prune is not None and reading.value is not None and should_prune():
        return Decision(True, "pruned", True, Outcome.PRUNED, f"pruned at iteration {iteration}")
    return Decision()


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
