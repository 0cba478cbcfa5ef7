"""Failed trials retried from their last checkpoints when a study is resumed; a retried trial is counted once.

Optuna never moves a finished trial back to RUNNING, so a retry is a new
trial: the failed trial's params, seed and config, and a ``retry_of`` user
attr with its number, started from the failed trial's latest checkpoint (its
results up to there copied into the retry's directory). Which failed trials
a resume retries is decided on the ``failure_kind`` user attr the runner
records (``"no_space"``: a full disk; ``"error"``, ``"crash"``,
``"timeout"``, ...), never on the error's text: ``--resume`` retries those
that failed for lack of space, ``--retry-failed`` every one.

A failed trial that a later trial retries is *superseded*: the analysis,
``rltune show`` and ``rltune studies`` report it once, by its retry, and the
study's budget counts it once (a retry takes its trial's slot). The shared
storage's retries of stale trials (Optuna's ``RetryFailedTrialCallback``,
its retry history) follow the same rule.
"""

from __future__ import annotations

from typing import Any, Iterable

from rltune._disk import NO_SPACE
from rltune.orchestrator._optuna_compat import retry_of, start_waiting_trial

RETRY_OF = "retry_of"  # user attr of a retry: the number of the trial it retries
FAILURE_KIND = "failure_kind"  # user attr of a failed trial: why (NO_SPACE, "error", "crash", "timeout", ...)
# What a retry takes over from the trial it retries (where to restore from is read from that trial).
INHERITED = ("seed", "config", "grid_index", "sample_index")


def predecessor(frozen: Any) -> int | None:
    """The number of the trial that ``frozen`` retries, or None (it retries none)."""
    history = retry_of(frozen)[1]  # a stale trial's retry on a shared storage (its user attrs are the stale one's)
    if history:
        return history[-1]
    number = frozen.user_attrs.get(RETRY_OF)
    return number if isinstance(number, int) and not isinstance(number, bool) else None


def superseded(trials: Iterable[Any], *, started_only: bool = False) -> set[int]:
    """The numbers of the trials that another trial retries (``started_only``: a retry no longer WAITING)."""
    from optuna.trial import TrialState

    return {number for t in trials if (number := predecessor(t)) is not None
            and not (started_only and t.state == TrialState.WAITING)}


def live_trials(trials: Iterable[Any]) -> list[Any]:
    """The trials but those superseded by a retry that started: each configuration of the study once."""
    trials = list(trials)
    hidden = superseded(trials, started_only=True)
    return [t for t in trials if t.number not in hidden]


def retries_to_start(trials: Iterable[Any], retry_failed: bool) -> list[Any]:
    """What a resume retries: retries created but never started, then the failed trials not yet retried
    that failed for lack of space (every one with ``retry_failed``)."""
    from optuna.trial import TrialState

    trials = list(trials)
    hidden = superseded(trials)
    waiting = [t for t in trials if t.state == TrialState.WAITING and predecessor(t) is not None]
    failed = [t for t in trials if t.state == TrialState.FAIL and t.number not in hidden
              and (retry_failed or t.user_attrs.get(FAILURE_KIND) == NO_SPACE)]
    return waiting + failed


def start_retry(study: Any, frozen: Any) -> tuple[Any, Any] | None:
    """Start the retry ``frozen`` names (a WAITING retry, or a failed trial to retry): ``(trial, its FrozenTrial)``.

    A failed trial gets its retry first: a WAITING trial with its params,
    distributions and :data:`INHERITED` user attrs. None if the retry was
    taken meanwhile.
    """
    from optuna.trial import TrialState, create_trial

    if frozen.state == TrialState.FAIL:
        attrs = {key: frozen.user_attrs[key] for key in INHERITED if key in frozen.user_attrs}
        study.add_trial(create_trial(state=TrialState.WAITING, params=frozen.params,
                                     distributions=frozen.distributions, user_attrs={**attrs, RETRY_OF: frozen.number}))
        frozen = next(t for t in reversed(study.get_trials(deepcopy=False, states=(TrialState.WAITING,)))
                      if t.user_attrs.get(RETRY_OF) == frozen.number)
    trial = start_waiting_trial(study, frozen)
    return None if trial is None else (trial, frozen)


def is_retry(frozen: Any) -> bool:
    """Whether ``frozen`` retries another trial (it takes that trial's slot of the budget)."""
    return predecessor(frozen) is not None
