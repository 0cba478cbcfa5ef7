"""Every use of a private Optuna name, in one place, each with why Optuna's public API cannot do it.

The rest of rltune uses Optuna's public API only (a test greps for it). When
Optuna changes one of these, this module is the one to adapt. Tested with
Optuna 5.0 (tests/orchestrator/test_optuna_compat.py drives each on real
storages and fails when one moves).
"""

from __future__ import annotations

import warnings
from typing import Any

# Optuna's RDBStorage methods that rltune retries on a lost connection besides its public ones:
# Optuna's _CachedStorage (which wraps every RDBStorage a study uses) and its heartbeat call these
# private backend methods directly, so a database restart reaches rltune through them too.
RDB_PRIVATE_CALLS = frozenset({"_create_new_trial", "_set_trial_param", "_get_trials", "_get_best_trial_id",
                               "_get_stale_trial_ids"})


def trial_id(trial: Any) -> int:
    """The storage id of a ``Trial`` or ``FrozenTrial``.

    Private: Optuna's public API names trials by number, but the storage calls
    rltune needs (``record_heartbeat``, ``get_trial``) and ``optuna.Trial(study,
    trial_id)`` take the storage id, which only ``_trial_id`` holds.
    """
    return trial._trial_id


def trial_of(study: Any, frozen: Any) -> Any:
    """A live ``optuna.Trial`` for a stored RUNNING trial (resumed in place after an interruption).

    Public ``study.ask()`` can only create or pop a new trial; continuing a
    RUNNING one needs ``optuna.Trial(study, trial_id)`` with its private id.
    """
    import optuna

    return optuna.trial.Trial(study, trial_id(frozen))


def replace_intermediate_value(trial: Any, step: int, value: float) -> None:
    """Set the ``optuna.Trial``'s intermediate value at ``step`` to ``value``, reported before or not.

    A trial that restored a checkpoint runs its later steps again: the
    value of the re-run replaces the first one. Public ``Trial.report``
    ignores a step already reported (with a warning), so this calls the
    storage's own ``set_trial_intermediate_value`` (public on every storage,
    which overwrites the step) through the study's private ``_storage``, and
    updates the trial's private cached copy, which its ``should_prune`` hands
    to the pruner.
    """
    value = float(value)
    trial.study._storage.set_trial_intermediate_value(trial_id(trial), int(step), value)
    trial._cached_frozen_trial.intermediate_values[int(step)] = value


def pop_waiting_trial(study: Any) -> Any | None:
    """Take a WAITING trial of the study (atomically, against other workers); None when there is none.

    Unlike ``study.ask()``, never creates a trial: in a shared study every
    trial of the budget was enqueued when the study was created. Optuna has no
    public "pop only": ``ask()`` falls back to creating a trial. So this does
    what ``ask()`` does first: drop the study's cached trial list (to see the
    other workers' trials) and pop with Optuna's own atomic
    ``_pop_waiting_trial_id`` (RUNNING only if still WAITING).
    """
    import optuna

    study._thread_local.cached_all_trials = None
    popped = study._pop_waiting_trial_id()
    return None if popped is None else optuna.Trial(study, popped)


def start_waiting_trial(study: Any, frozen: Any) -> Any | None:
    """Take this WAITING trial of the study (RUNNING only if still WAITING); None if another took it.

    Public ``study.ask()`` pops the oldest WAITING trial, whichever it is; a
    retry must start itself (not a grid point waiting before it). So this sets
    the state through the storage, as Optuna's own ``_pop_waiting_trial_id``
    does, after dropping the study's cached trial list.
    """
    import optuna
    from optuna.trial import TrialState

    study._thread_local.cached_all_trials = None
    if not study._storage.set_trial_state_values(trial_id(frozen), state=TrialState.RUNNING):
        return None
    return optuna.Trial(study, trial_id(frozen))


def retry_of(frozen: Any) -> tuple[int | None, list[int]]:
    """For a trial enqueued by Optuna's retry callback: (the number of the original trial, the retry history).

    Public API (``RetryFailedTrialCallback.retried_trial_number`` and
    ``retry_history``), marked experimental: their warnings are silenced.
    ``(None, [])`` for a trial that retries none.
    """
    import optuna
    from optuna.storages import RetryFailedTrialCallback

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return (RetryFailedTrialCallback.retried_trial_number(frozen),
                list(RetryFailedTrialCallback.retry_history(frozen) or []))


def prune_as_of(trial: Any, step: int) -> bool:
    """The study's pruner's verdict on the live ``trial`` as it stands at ``step``, its later steps unseen.

    A trial can hold intermediate values beyond the step it is at: a race
    seed group (docs/seeds.md) reports seed ``k``'s steps 1..T after seed
    ``k-1`` reported up to T, and a restored trial runs its steps after the
    checkpoint again. Optuna's pruners judge ``trial.last_step`` (the
    highest step reported) and, for the percentile/median pruners, the best
    value over every step; successive halving (ASHA, Hyperband) records each
    rung a trial passed (``completed_rung_<r>`` system attrs, private) and
    never judges it again. Such a trial would be judged on its earlier run's
    values, hence not pruned mid-run. So the pruner gets a copy of the trial
    cut at ``step`` (public ``FrozenTrial`` constructor) without its rungs at
    or after ``step`` (judged again on the new values when the trial gets
    there), in the study's trials as well (a proxy of the study). Reads the
    pruner's private settings (its rung steps, Hyperband's brackets) and the
    trial's private latest copy (``_get_latest_trial``, what
    ``Trial.should_prune`` hands the pruner).
    """
    import optuna

    study = trial.study
    frozen = trial._get_latest_trial()
    if frozen.last_step is None or frozen.last_step <= step:
        return trial.should_prune()
    pruner = study.pruner
    if isinstance(pruner, optuna.pruners.HyperbandPruner) and pruner._pruners:
        bracket = pruner._get_bracket_id(study, frozen)
        study, pruner = pruner._create_bracket_study(study, bracket), pruner._pruners[bracket]
    rung_step = _rung_step(pruner)
    attrs = {k: v for k, v in dict(frozen.system_attrs).items()
             if not (rung_step is not None and k.startswith(_RUNG) and k[len(_RUNG):].isdigit()
                     and rung_step(int(k[len(_RUNG):])) >= step)}
    view = optuna.trial.FrozenTrial(
        number=frozen.number, state=frozen.state, value=None, values=frozen.values,
        datetime_start=frozen.datetime_start, datetime_complete=frozen.datetime_complete, params=frozen.params,
        distributions=frozen.distributions, user_attrs=frozen.user_attrs, system_attrs=attrs,
        intermediate_values={s: v for s, v in frozen.intermediate_values.items() if s <= step},
        trial_id=trial_id(frozen))
    return pruner.prune(_StudyAsOf(study, view), view)


_RUNG = "completed_rung_"  # Optuna's SuccessiveHalvingPruner: the value with which a trial reached rung <r>


def _rung_step(pruner: Any) -> Any:
    """``rung -> its step`` for a successive-halving pruner (from its private settings); None for another
    pruner, or one whose ``min_resource`` is not known yet."""
    import optuna

    if not isinstance(pruner, optuna.pruners.SuccessiveHalvingPruner) or pruner._min_resource is None:
        return None
    base, factor, rate = pruner._min_resource, pruner._reduction_factor, pruner._min_early_stopping_rate
    return lambda rung: base * factor ** (rate + rung)


class _StudyAsOf:
    """A study whose ``get_trials`` holds ``view`` in place of the stored trial of its number (the rest: the
    study's), so that a pruner compares the trial cut at its step with the others, not its stored self."""

    def __init__(self, study: Any, view: Any) -> None:
        self._study, self._view = study, view

    def get_trials(self, deepcopy: bool = True, states: Any = None) -> list[Any]:
        trials = self._study.get_trials(deepcopy=deepcopy, states=states)
        return [self._view if t.number == self._view.number else t for t in trials]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._study, name)
