"""Who runs a RUNNING trial: owners, their liveness, heartbeats, and stale trials of lost workers.

A trial this orchestrator runs carries an ``owner`` user attr (host, pid,
process start time, run id). It is interrupted when no live orchestrator
matches it: on this machine by its pid and start time, on another machine
(whose pids cannot be checked) by a ``heartbeat`` user attr older than
:data:`HEARTBEAT_GRACE_S`. On a shared RDB storage, Optuna's own heartbeat
decides: a trial whose worker was lost is failed as stale and retried.
"""

from __future__ import annotations

import os
import socket
import time
import warnings
from typing import Any, Callable, Iterable

from rltune.orchestrator._optuna_compat import trial_id

HEARTBEAT_S = 30.0  # how often the running trials' heartbeat user attr is written
HEARTBEAT_GRACE_S = 180.0  # a trial of another machine without a heartbeat for this long is interrupted


def _process_start(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def make_owner(run_id: str) -> dict[str, Any]:
    """The ``owner`` user attr of a trial this process runs (``run_id``: this orchestrator's run)."""
    return {"host": socket.gethostname(), "pid": os.getpid(), "pid_start": _process_start(os.getpid()), "run": run_id}


def owner_alive(owner: Any, run_id: str, heartbeat: Any = None) -> bool:
    """Whether the orchestrator that owns a RUNNING trial still runs (False: the trial was interrupted).

    On this machine: its pid runs with the same start time (and, for this
    very process, the same run id). On another machine: its trial's
    ``heartbeat`` user attr is younger than :data:`HEARTBEAT_GRACE_S`.
    """
    if not isinstance(owner, dict):
        return False
    if owner.get("host") != socket.gethostname():
        return isinstance(heartbeat, (int, float)) and time.time() - heartbeat < HEARTBEAT_GRACE_S
    pid = owner.get("pid")
    if pid == os.getpid():
        return owner.get("run") == run_id
    if not isinstance(pid, int):
        return False
    start = _process_start(pid)
    if start is not None:
        return owner.get("pid_start") in (None, start)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not os.path.isdir("/proc")


def fail_stale_trials(study: Any) -> None:
    """Fail the trials of lost workers (Optuna's heartbeat); Optuna's retry callback enqueues them again."""
    import optuna

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optuna.storages.fail_stale_trials(study)


class Heartbeats:
    """The running trials' heartbeats, written at most once per interval.

    Shared storage: Optuna's heartbeat of each trial (and a ``heartbeat``
    user attr for ``rltune show``), then stale trials of lost workers failed.
    Embedded storage: the ``heartbeat`` user attr every :data:`HEARTBEAT_S`.
    """

    def __init__(self, shared: bool, storage: Any, interval_s: float) -> None:
        self.shared = shared
        self.storage = storage
        self.interval_s = interval_s if shared else HEARTBEAT_S
        self._last = 0.0

    def beat(self, study: Any, trials: Iterable[Any], guarded: Callable[[Any, Callable[[Any], None]], None]) -> None:
        """Heartbeat ``trials`` (ActiveTrials) if the interval passed; ``guarded(a, step)`` runs a trial's step."""
        if self.shared:
            now = time.monotonic()
            if now - self._last < self.interval_s:
                return
            self._last = now
            for a in trials:
                self.storage.record_heartbeat(trial_id(a.trial))
                guarded(a, lambda t: t.trial.set_user_attr("heartbeat", time.time()))
            fail_stale_trials(study)
            return
        now = time.time()
        if now - self._last < self.interval_s:
            return
        self._last = now
        for a in trials:
            a.trial.set_user_attr("heartbeat", now)
