"""The runner's answer to one result of a trial: report it to Optuna, decide, send the decision.

Moved out of :mod:`._runner` (the runner calls :func:`on_result`); what a
result means is :mod:`._decision`'s, this carries it out. The study's
scheduler (``state.scheduler``, a :class:`~._decision.Scheduler`: PBT) is
asked after the pruner, for a trial that goes on. A trial it holds
(synchronous PBT: :class:`~._decision.HoldTrial`) gets no answer yet; its
process waits, blocked on it, until :func:`release_held` (each turn of the
runner's loop) has the scheduler's answer, or the study stops.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rltune.orchestrator import _trial_host as host
from rltune.orchestrator._decision import (Decision, ExploitTrial, HoldTrial, Outcome, Proceed, StopTrial, decide,
                                           read_result)
from rltune.orchestrator._intermediate import report
from rltune.orchestrator._pareto_pruning import pruning_check
from rltune.orchestrator._pbt import LINEAGE, ancestry_tags
from rltune.orchestrator._race_check import with_race_check
from rltune.orchestrator._trial_host import ActiveTrial

if TYPE_CHECKING:
    from rltune.orchestrator._runner import StudyRunner


def exploited(runner: StudyRunner, a: ActiveTrial, decision: ExploitTrial) -> None:
    """The trial restores another's checkpoint and goes on with ``decision.config``: its config from now on."""
    a.config = decision.config
    runner.state.configs[a.number] = decision.config
    runner.observers.message(f"trial {a.number}: {decision.note}")
    if a.tracking is not None:
        a.tracking.set_tags(ancestry_tags(a.trial.user_attrs.get(LINEAGE)))


def on_result(runner: StudyRunner, a: ActiveTrial, result: dict[str, Any]) -> None:
    """Report the result's metric to Optuna and answer the trial with :func:`._decision.decide`."""
    scheduler = runner.state.scheduler
    if scheduler is not None:
        scheduler.annotate(a, result)  # pbt: the hyperparameters in force, a metric each in MLflow
    runner.observers.result_received(a, result)
    a.last_result = result
    runner.state.results[a.number] = result
    a.iteration = int(result.get("training_iteration", a.iteration + 1))
    reading = read_result(result, runner.spec.metric, a.stop)
    if reading.error is None and reading.value is not None:
        report(a, a.iteration, reading.value)  # a step run again after a restore: its new value
    decision: Decision = decide(reading, iteration=a.iteration, stopping=runner.stopping_since is not None,
                                checkpoint_at_end=runner.spec.checkpoint_at_end,
                                should_prune=with_race_check(runner.plan, a, pruning_check(runner.plan, a)))
    if scheduler is not None and isinstance(decision, Proceed) and reading.value is not None:
        decision = scheduler.decide(a, result, reading.value, decision)  # after the pruner (PBT: exploit)
    answer(runner, a, decision)
    if reading.error is not None:
        runner.spec_error = reading.error
        if runner.stopping_since is None:
            runner._begin_stop("invalid study")
        return
    runner.observers.trial_result(a)


def answer(runner: StudyRunner, a: ActiveTrial, decision: Decision) -> None:
    """Send ``decision`` to the trial and carry it out here; a :class:`HoldTrial` is kept until released."""
    if isinstance(decision, HoldTrial):
        a.held_at = decision.iteration
        return
    a.held_at = None
    host.send(a, decision.message())
    if isinstance(decision, ExploitTrial):
        exploited(runner, a, decision)
    if decision.outcome is not None:
        a.outcome, a.reason = decision.outcome, decision.note


def release_held(runner: StudyRunner) -> None:
    """Answer the trials the scheduler held, once it has their answer (or stop them: the study stops)."""
    def release(a: ActiveTrial) -> None:
        if runner.stopping_since is not None:
            decision: Decision | None = StopTrial("interrupted", True, Outcome.INTERRUPTED, "interrupted")
        else:
            decision = runner.state.scheduler.release(a)
        if decision is not None:
            answer(runner, a, decision)

    for a in [a for a in runner.active if a.held_at is not None and not a.finished and a.conn is not None]:
        runner._guarded(a, release)  # another worker may have taken the trial over (shared storage)
