"""Hosting trial processes: launch, messages, kill, reap, and telling a crash or a timeout.

Each trial runs in a process of its own (:mod:`rltune.orchestrator._trial_process`),
in a session of its own (Ctrl-C reaches the orchestrator only), connected by a
socket pair. Nothing here knows Optuna: the runner decides what a trial's
end means.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cloudpickle

from rltune._ipc import Channel, ChannelClosed, Continue, Stop, TrialInit
from rltune.errors import ConfigError
from rltune.orchestrator._child import preload_for, send_init, spawn
from rltune.orchestrator._decision import Outcome
from rltune.orchestrator._stop import StopCriteria

logger = logging.getLogger(__name__)

OUTPUT_FILE = "output.log"


@dataclass
class ActiveTrial:
    """A trial this orchestrator runs: its Optuna trial, config, process and progress."""

    trial: Any  # optuna.trial.Trial
    number: int
    values: dict[str, Any]
    config: dict[str, Any]
    seed: int | None
    trial_dir: Path
    cpus: int
    stop: StopCriteria
    proc: Any = None  # subprocess.Popen or rltune._warm.WarmProcess
    conn: Channel | None = None
    attempt_start: float = 0.0
    started: float = field(default_factory=time.time)
    last_result: dict[str, Any] | None = None
    checkpoint: str | None = None
    checkpoint_iteration: int = 0
    iteration: int = 0
    failures: int = 0
    outcome: Outcome | None = None  # once decided (a stop met, pruned, interrupted, an invalid study)
    reason: str | None = None
    reported: dict[int, float] = field(default_factory=dict)  # the intermediate values Optuna holds, by step
    finished: bool = False
    tracking: Any = None  # its TrialTracker (MLflow run) when the study is tracked
    ended_ms: int | None = None  # when it ended (Optuna's datetime_complete), in ms since the epoch
    retry_of: int | None = None  # the number of the failed trial this one retries
    seed_group: Any = None  # seeds_per_trial > 1: the _ipc.SeedGroup its process runs
    held_at: int | None = None  # synchronous PBT: the interval it waits at, unanswered (._on_result.release_held)


@dataclass
class TrialEnd:
    """How a trial ended in this run (for the display)."""

    number: int
    state: str
    value: float | None
    reason: str | None


def start_process(a: ActiveTrial, init: TrialInit) -> None:
    """Start the trial's process and send it ``init`` (its trainable, config, checkpoint to restore...).

    Raises ConfigError if ``init`` cannot be pickled (e.g. a register_env
    creator holding a lock). A process that dies at once is seen as a crash
    when its socket is read.
    """
    a.held_at = None  # a new process: nothing it waits for
    if a.seed_group is not None:
        init = dataclasses.replace(init, seed_group=a.seed_group)
    try:
        payload = cloudpickle.dumps(init)
    except Exception as exc:
        raise ConfigError(
            f"trial {a.number}: its config or the creator of env {a.config.get('env')!r} cannot be sent to "
            f"the trial process ({type(exc).__name__}: {exc})"
        ) from None
    with open(a.trial_dir / OUTPUT_FILE, "ab") as out:  # Ctrl-C reaches the orchestrator only; it stops the trials
        a.proc, a.conn = spawn("rltune.orchestrator._trial_process:trial_entry", stdout=out,
                               env=dict(os.environ, RLTUNE_TRIAL_NUMBER=str(a.number), PYTHONUNBUFFERED="1"),
                               worker_template=True, preload=preload_for(init.kind))  # its workers start warm too
    a.attempt_start = time.monotonic()
    a.outcome = a.reason = None
    send_init(a.conn, payload)


def send(a: ActiveTrial, message: Continue | Stop) -> None:
    """Answer the trial (a broken socket is seen as a crash when it is read)."""
    try:
        a.conn.send(message)
    except ChannelClosed:
        pass


def close_conn(a: ActiveTrial) -> None:
    if a.conn is not None:
        a.conn.close()
        a.conn = None


def kill(a: ActiveTrial) -> None:
    """SIGKILL the trial's process group (the trial and its rollout workers) and wait for it."""
    if a.proc is None:
        return
    if a.proc.poll() is None:
        try:
            os.killpg(a.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            a.proc.kill()
    try:
        a.proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        logger.warning("trial %d (pid %d) did not exit after SIGKILL", a.number, a.proc.pid)


def reap(a: ActiveTrial) -> None:
    """Wait for the trial's process to exit (it was told to stop, or returned); kill it after 30 s."""
    if a.proc is None:
        return
    try:
        a.proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        kill(a)


def crash_text(a: ActiveTrial) -> str:
    """The error of a trial whose process ended without a word: how it ended and its last output lines."""
    code = None
    if a.proc is not None:
        try:
            code = a.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            kill(a)
            code = a.proc.returncode
    if code is not None and code < 0:
        try:
            how = f"was killed by signal {signal.Signals(-code).name}"
        except ValueError:
            how = f"was killed by signal {-code}"
    else:
        how = f"exited with code {code}"
    return (f"the trial process (pid {a.proc.pid if a.proc else '?'}) {how} without reporting an error "
            f"(a crash, os._exit or a killed process)\n{_tail(a.trial_dir / OUTPUT_FILE)}")


def timed_out(a: ActiveTrial, timeout_s: float | None) -> str | None:
    """The error of a trial that ran longer than ``timeout_s`` this attempt, or None."""
    ran = time.monotonic() - a.attempt_start
    if timeout_s is not None and ran > timeout_s:
        return f"the trial timed out: it ran {ran:.1f}s, longer than trial_timeout_s = {timeout_s:g}s; it was killed"
    return None


def died_silently(a: ActiveTrial) -> bool:
    """Whether the trial's process exited with nothing left to read on its socket."""
    return a.proc.poll() is not None and a.conn is not None and not a.conn.poll()


def _tail(path: Path, lines: int = 30) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return ""
    return (f"--- last lines of {path} ---\n" + "\n".join(text)) if text else ""
