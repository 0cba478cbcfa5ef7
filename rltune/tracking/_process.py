"""The study's MLflow tracking in a process of its own, fed by the orchestrator.

Why a process and not a thread: MLflow's calls (SQLAlchemy on the embedded
store, HTTP to a server, matplotlib for the plots, a policy exported as a
pyfunc model) are Python-heavy. On a thread of the orchestrator they hold its
GIL, and every trial waits on the orchestrator after each result (the
pruner's decision), so every iteration of every trial paid for them. In a
process they cost the orchestrator one pickled message per call (the
messages of :mod:`rltune._ipc`), and the
orchestrator never imports mlflow (nor torch, for the policy export) at all.

The orchestrator side, :class:`TrackingProcess`, offers what the study's
loop calls (``open_trial`` -> a :class:`TrialHandle`, ``end_trial``,
``update_best``, ``refresh_study_plots``, ``close``). Messages go through an
unbounded queue and a sender thread, so a busy tracking process never blocks
the loop. What the tracking process uploads later is copied first, in the
orchestrator, when the call is made (checkpoints are hard-linked): the trial
may delete or rewrite its files meanwhile.

The tracking process (:func:`rltune.tracking._server.tracking_entry`) runs a :class:`StudyTracker` inline
and handles the messages in order per trial; a trial's results go in one
MLflow call per second or so (MLflow's cost is per call), and of several
queued plot refreshes only the latest is drawn. Its warnings (what could not
be recorded) come back to the orchestrator's log; MLflow's own output goes
to ``tracking.log`` in the study directory. If the tracking process dies,
the study goes on and reports what was not recorded.

Keeping up (backpressure): the tracking process tells how far it got
(:class:`rltune._ipc.Progress`), so :meth:`TrackingProcess.lag` knows the
age of the oldest call not yet recorded and how many are queued. The
orchestrator shows it when the tracking falls behind, and sets the tracking
process's priority from it on every turn of its loop
(:meth:`TrackingProcess.yield_to_trials`, :class:`._priority.Priority`):
it yields to the trials while it keeps up, and gets its fair share when its
oldest call is over 2 s old. A trial's run is created with the trial's own
start time, and ended with its own end time, however late it is recorded.

The study's end: :meth:`~TrackingProcess.finish_study` ends the parent run
right after the final plots; ``close`` then waits for the rest of the queue
(at most ``drain_timeout_s``), saying what it waits for every few seconds
through its ``say`` callback, and returns what was not recorded.

Kills: with ``study_dir`` (a study of one orchestrator), the tracking
process is one per study at a time (a lock file; a new one waits for the
one a killed orchestrator left to finish its queue, or exits if its own
orchestrator dies meanwhile), removes the upload copies killed sessions
left, and ``reconcile`` (at the start of a resume and at the end of every
run) brings every trial's run in line with its directory and Optuna's state
(``StudyTracker.reconcile``): whatever a kill lost from the queue, a later
run records. The queue itself stays in memory, off the study's hot path.
"""

from __future__ import annotations

import logging
import os
import queue
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter, deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from rltune._ipc import (Channel, ChannelClosed, Closed, CloseTracking, DrawPlots, EndTrial, FinishStudy, LogCheckpoint,
                         LogCurve, LogFiles, LogLine, LogModel, LogResult, LogSeedRuns, OpenTrial, PICKLE, Progress, Reconcile,
                         TagTrial,
                         Reconciled, TrackingInit, UpdateBest, spawn)
from rltune._trial_files import json_safe
from rltune.tracking._failures import Failures
from rltune.tracking._keys import flatten_params
from rltune.tracking._priority import Priority, set_autogroup_nice
from rltune.tracking._server import RESULT_HOLD_S
from rltune.tracking._staging import remove_staging, snapshot, snapshot_files
from rltune.tracking._store import resolve_tracking_uri

logger = logging.getLogger("rltune.tracking")

SAY_AFTER_S = 2.0  # the study's end says what it waits for once the wait is this long...
SAY_EVERY_S = 5.0  # ...and again this often


@dataclass(frozen=True)
class Lag:
    """How far the tracking is behind: the age of the oldest call not yet recorded, and how many are queued.

    ``waiting_for``: the queued calls by kind (``result``, ``checkpoint``, ``plots``...).
    """

    seconds: float
    queued: int
    waiting_for: dict[str, int]

    def describe(self) -> str:
        """``12 call(s) (result x10, checkpoint x2), the oldest made 8 s ago``."""
        kinds = ", ".join(f"{kind} x{n}" if n > 1 else kind for kind, n in self.waiting_for.items())
        return f"{self.queued} call(s){f' ({kinds})' if kinds else ''}, the oldest made {self.seconds:.0f} s ago"


def _open_log(log_path: str | os.PathLike[str] | None) -> Any:
    """The tracking process's log file; its output is dropped if the file cannot be opened (a full disk)."""
    if log_path is None:
        return subprocess.DEVNULL
    try:
        return open(log_path, "ab")
    except OSError as exc:
        logger.warning("MLflow tracking: its log %s cannot be written (%s); MLflow's own output is dropped",
                       log_path, exc.strerror or exc)
        return subprocess.DEVNULL


class TrialHandle:
    """One trial's run, as seen from the orchestrator: each call is a message to the tracking process."""

    def __init__(self, owner: "TrackingProcess", number: int) -> None:
        self._owner = owner
        self.number = number

    def log_result(self, result: Mapping[str, Any], *, replace: bool = False) -> None:
        """Every numeric entry of ``result`` at ``step = training_iteration`` (see ``TrialTracker.log_result``)."""
        self._owner._post(LogResult(self.number, dict(result), int(time.time() * 1000), replace))

    def log_seed_runs(self, runs: list[dict[str, Any]], state: str) -> None:
        """Each seed of a seeds_per_trial trial as a run nested under this one (``{index, seed, results}``)."""
        self._owner._post(LogSeedRuns(self.number, runs, state))

    def log_checkpoint(self, path: str | os.PathLike[str]) -> None:
        """Upload a checkpoint directory as ``checkpoints/<name>`` (hard-linked copy taken now)."""
        path = Path(path)
        copy = self._owner._copy(f"checkpoint {path.name} of trial {self.number}",
                                 lambda: snapshot(path, self._owner.staging_tag))
        if copy is not None:
            self._owner._post(LogCheckpoint(self.number, str(copy), path.name))

    def log_files(self, *paths: str | os.PathLike[str]) -> None:
        """Upload files (``params.json``, ``result.json``, ``error.txt``; missing ones skipped), copied now."""
        files = [Path(p) for p in paths if Path(p).is_file()]
        if not files:
            return
        copied = self._owner._copy(f"the files of trial {self.number}",
                                   lambda: snapshot_files(files, self._owner.staging_tag, files[0].parent))
        if copied is not None:
            staging, copies = copied
            self._owner._post(LogFiles(self.number, str(staging), [str(c) for c in copies]))

    def log_learning_curve(self) -> None:
        """The learning-curve PNG of the results logged so far."""
        self._owner._post(LogCurve(self.number))

    def set_tags(self, tags: Mapping[str, str]) -> None:
        """Set tags on the trial's run (PBT's ancestry)."""
        self._owner._post(TagTrial(self.number, dict(tags)))

    def log_policy_model(self, checkpoint: str | os.PathLike[str]) -> None:
        """The policy of ``checkpoint`` as an MLflow pyfunc model (exported in the tracking process)."""
        path = Path(checkpoint)
        copy = self._owner._copy(f"the policy model of trial {self.number}",
                                 lambda: snapshot(path, self._owner.staging_tag))
        if copy is not None:
            self._owner._post(LogModel(self.number, str(copy)))


class TrackingProcess:
    """The study's tracking (a :class:`StudyTracker` in a child process), with the tracker's interface.

    ``log_path``: where the process's own output goes (MLflow's messages).
    ``defaults_of``: a trainer (name, class or import string) whose default
    config is logged under each trial's own keys; the tracking process
    imports it, so the orchestrator never imports torch for it.
    ``create_parent`` False: wait for another worker of the study to create
    the parent run (see ``StudyTracker``'s ``parent_wait_s``).
    ``plot_interval_s``: while the study runs, Optuna's plots are redrawn at
    most this often, the first time this long after the start.
    ``study_dir``: the study's directory when this orchestrator is the
    study's only one (not a worker of a shared study): one tracking process
    at a time, leftovers of killed ones removed, :meth:`reconcile` enabled.
    ``trial_options``: ``keep_checkpoints_num``, ``metric``, ``mode`` for
    reconciled trials (as ``open_trial`` takes them).
    ``priority``: when the tracking process yields to the trials
    (:class:`~rltune.tracking._priority.Priority`); ``result_hold_s``: how
    long a result waits for more of its trial's results, to go in one
    MLflow call (0: each result at once).
    """

    def __init__(
        self,
        tracking_uri: str | None,
        results_dir: str | os.PathLike[str],
        study_name: str,
        sampler_name: str,
        pruner_name: str,
        *,
        study_params: Mapping[str, Any] | None = None,
        log_path: str | os.PathLike[str] | None = None,
        plot_interval_s: float = 30.0,
        drain_timeout_s: float = 300.0,
        defaults_of: Any = None,
        create_parent: bool = True,
        study_dir: str | os.PathLike[str] | None = None,
        trial_options: Mapping[str, Any] | None = None,
        priority: Priority = Priority(),
        result_hold_s: float = RESULT_HOLD_S,
    ) -> None:
        import cloudpickle

        self.tracking_uri = resolve_tracking_uri(tracking_uri, results_dir)
        self.study_name = study_name
        self.plot_interval_s = plot_interval_s
        self.drain_timeout_s = drain_timeout_s
        self.priority = priority
        self.study_dir = Path(study_dir) if study_dir is not None else None
        self.staging_tag = uuid.uuid4().hex[:8]  # in the names of this session's upload copies
        self._failures = Failures(f"study {study_name!r}")  # what was not recorded, here and there
        self._lost: str | None = None  # why the process is gone, once it is
        self._closed = False
        self._last_plots = time.monotonic()
        self._outbox: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._posted: deque[tuple[int, float, str]] = deque()  # calls not yet recorded: (number, when, kind)
        self._next = 0  # the number of the next message (the init is 0, as the tracking process counts)
        self.repaired: list[int] = []  # trials whose runs a reconciliation completed (an earlier run's losses)
        out = _open_log(log_path)
        try:
            self.proc, channel = spawn(
                "rltune.tracking._server:tracking_entry", stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                new_session=True,  # Ctrl-C goes to the orchestrator, which closes the tracking in order
                outlive_parent=True,  # a killed orchestrator's queue is still recorded: it exits at the EOF after
            )
        finally:
            if out is not subprocess.DEVNULL:
                out.close()
        self.conn: Channel | None = channel
        self._sender = threading.Thread(target=self._send_loop, name="rltune-tracking-send", daemon=True)
        self._sender.start()
        init = {
            "sys_path": list(sys.path),
            "tracking_uri": self.tracking_uri,
            "results_dir": str(results_dir),
            "study_name": study_name,
            "sampler_name": sampler_name,
            "pruner_name": pruner_name,
            "study_params": dict(study_params or {}),
            "defaults_of": cloudpickle.dumps(defaults_of) if defaults_of is not None else None,
            "create_parent": create_parent,
            "study_dir": str(self.study_dir) if self.study_dir is not None else None,
            "staging_tag": self.staging_tag,
            "trial_options": dict(trial_options or {}),
            "policy_model": defaults_of is not None,
            "start_time_ms": int(time.time() * 1000),  # a new parent run starts with the study
            "nice": priority.nice,
            "result_hold_s": result_hold_s,
        }
        self._post(TrackingInit(init))

    # -- messages to the process -----------------------------------------------------------
    def _post(self, message: Any) -> None:
        """Queue ``message`` (pickled now, in the caller's thread) for the sender thread."""
        if self._lost is not None:
            self._record("tracking", f"{message.kind} (the tracking process is gone: {self._lost})")
            return
        try:
            data = PICKLE(message)
        except Exception as exc:  # noqa: BLE001 - e.g. a result holding a lambda: that call is not recorded
            self._record(message.kind, f"{message.kind} of trial {getattr(message, 'number', '?')} "
                                       f"(cannot be sent: {exc!r})")
            return
        self._posted.append((self._next, time.monotonic(), message.kind))
        self._next += 1
        self._outbox.put(data)

    def _send_loop(self) -> None:
        while True:
            data = self._outbox.get()
            if data is None or self.conn is None:
                return
            try:
                self.conn.send_bytes(data)
            except ChannelClosed:
                self._lose("it stopped reading (it ended)")
                return

    def _copy(self, what: str, fn: Any) -> Any:
        """A copy of files to upload later; None (recorded) when it cannot be made."""
        if self._lost is not None:
            self._record("tracking", f"{what} (the tracking process is gone: {self._lost})")
            return None
        try:
            return fn()
        except OSError as exc:
            self._record("files", f"{what} (copy failed: {exc})")
            return None

    def _record(self, kind: str, what: str) -> None:
        self._failures.record(kind, what)

    @property
    def unrecorded(self) -> list[str]:
        """What could not be recorded (here, or in the tracking process as it reported at its close)."""
        return self._failures.unrecorded

    @property
    def failure_counts(self) -> dict[str, int]:
        """Calls not recorded, by kind."""
        return dict(self._failures.counts)

    def _lose(self, why: str) -> None:
        if self._lost is None:
            self._lost = why
            code = self.proc.poll()
            detail = f" (exit status {code})" if code is not None else ""
            logger.warning("MLflow tracking (study %r): the tracking process ended%s: %s; the study goes on "
                           "and what follows is not recorded", self.study_name, detail, why)

    def poll(self) -> None:
        """Between trial events: log the tracking process's warnings; notice when it died."""
        while self.conn is not None and self._lost is None:
            if not self.conn.poll():
                break
            try:
                message = self.conn.receive()
            except ChannelClosed:
                self._lose("its connection closed")
                break
            self._handle_reply(message)
        if self._lost is None and self.proc.poll() is not None:
            self._lose("it exited")

    def lag(self) -> Lag:
        """How far behind the tracking is (nothing queued once the process is gone: it records nothing more)."""
        if not self._posted or self._lost is not None:
            return Lag(0.0, 0, {})
        kinds = Counter(kind for _, _, kind in self._posted)
        return Lag(time.monotonic() - self._posted[0][1], len(self._posted), dict(kinds.most_common()))

    def yield_to_trials(self, trials_running: bool) -> None:
        """Set the tracking process's priority: it yields while trials run and it keeps up (see ``_priority``)."""
        if self.proc.poll() is None:
            set_autogroup_nice(self.proc.pid, self.priority.nice_for(trials_running, self.lag().seconds))

    def _handle_reply(self, message: Any) -> None:
        if isinstance(message, Progress):
            while self._posted and self._posted[0][0] < message.recorded:
                self._posted.popleft()
        elif isinstance(message, Reconciled):
            self.repaired = sorted(set(self.repaired) | set(message.repaired))
        elif isinstance(message, LogLine):
            logger.log(message.level, "%s", message.text)

    # -- the tracker's interface -----------------------------------------------------------
    def open_trial(self, trial_number: int, params: Mapping[str, Any], key_params: Mapping[str, Any], *,
                   start_time_ms: int | None = None, **trial_options: Any) -> TrialHandle:
        """Create (or reopen, for a resumed trial) the trial's nested run; the handle to log into it.

        ``start_time_ms``: the trial's own start (default: when the tracking process creates the run).
        """
        # as text: a config may hold what pickle cannot carry (lambdas) or the tracking process cannot
        # import (classes of the user's __main__)
        self._post(OpenTrial(trial_number, flatten_params(params), json_safe(dict(key_params)), trial_options,
                             start_time_ms))
        return TrialHandle(self, trial_number)

    def end_trial(self, run: TrialHandle, state: str, *, reason: str | None = None, error: str | None = None,
                  end_time_ms: int | None = None) -> None:
        """End the trial's run in ``state`` (COMPLETE, PRUNED, FAIL, INTERRUPTED), with why and the traceback.

        ``end_time_ms``: the trial's own end (default: when the tracking process records it).
        """
        self._post(EndTrial(run.number, state, reason, error, end_time_ms))

    def finish_study(self, *, interrupted: bool = False) -> None:
        """End the parent run now (FINISHED, or KILLED when interrupted), before the rest of the queue's end."""
        self._post(FinishStudy(interrupted, int(time.time() * 1000)))

    def update_best(self, trial_number: int, value: float, params: Mapping[str, Any]) -> None:
        """The best trial so far, on the parent run."""
        self._post(UpdateBest(trial_number, float(value), dict(params)))

    def refresh_study_plots(self, study: Any, *, final: bool = True) -> None:
        """Redraw trials.csv and Optuna's plots from a copy of the trials (throttled unless ``final``)."""
        now = time.monotonic()
        if not final and now - self._last_plots < self.plot_interval_s:
            return
        self._last_plots = now
        try:
            trials = study.get_trials(deepcopy=True)
            directions = list(study.directions)
        except Exception as exc:  # noqa: BLE001 - an unreadable study storage: nothing to draw
            self._record("plots", f"the study's trials (for the plots): {exc!r}")
            return
        self._post(DrawPlots(trials, directions))

    def reconcile(self, study: Any, *, finished_only: bool = False) -> None:
        """Bring every trial's run in line with its directory and Optuna's state (only with ``study_dir``).

        See ``StudyTracker.reconcile``; ``finished_only`` at the start of a
        resume (its interrupted trials are about to be continued).
        """
        if self.study_dir is None:
            return
        try:
            trials = study.get_trials(deepcopy=True)
        except Exception as exc:  # noqa: BLE001 - an unreadable study storage
            self._record("reconcile", f"the study's trials (to reconcile): {exc!r}")
            return
        self._post(Reconcile(trials, finished_only))

    def close(self, *, interrupted: bool = False, say: Callable[[str], None] | None = None) -> None:
        """End the parent run (KILLED when interrupted), wait for the queue (at most ``drain_timeout_s``).

        ``say``: told what the wait is for, once it is over ``SAY_AFTER_S``
        and then every ``SAY_EVERY_S`` (the calls queued, the oldest's age,
        how many were recorded meanwhile), so that no wait is silent.
        What could not be recorded is then in ``unrecorded`` and ``failure_counts``, and logged in one line.
        A second call does nothing (the study's end may close the tracking twice: the summary is logged once).
        """
        if self._closed:
            return
        self._closed = True
        self._post(CloseTracking(interrupted))
        self._outbox.put(None)
        start = time.monotonic()
        deadline, next_say, queued = start + self.drain_timeout_s, start + SAY_AFTER_S, self.lag().queued
        closed = False
        while self.conn is not None and self._lost is None:
            self.yield_to_trials(False)  # the study's end waits for the queue (again: a change may come too soon)
            now = time.monotonic()
            if say is not None and now >= next_say:
                lag = self.lag()
                say(f"MLflow tracking: recording the study's last {lag.describe()}; {queued - lag.queued} recorded "
                    f"in the last {now - start:.0f} s, giving up in {deadline - now:.0f} s")
                next_say = now + SAY_EVERY_S
            left = deadline - now
            try:
                if left <= 0 or not self.conn.poll(min(left, 1.0)):
                    if left <= 0:
                        lag = self.lag()
                        self._failures.merge([f"{lag.describe()}: still queued after {self.drain_timeout_s:.0f} s "
                                              "(cancelled)"], lag.waiting_for or {"close": 1})
                        break
                    if self.proc.poll() is not None:
                        self._lose("it exited before closing")
                    continue
                message = self.conn.receive()
            except ChannelClosed:
                self._lose("its connection closed before closing")
                break
            if isinstance(message, Closed):
                closed = True
                self._failures.merge(message.unrecorded, message.failure_counts)
                break
            self._handle_reply(message)
        self._stop_process(wait=closed)
        if self.study_dir is not None:
            remove_staging(self.study_dir, tag=self.staging_tag)  # copies of calls it never made
        summary = self.summary()
        if summary:
            logger.warning("%s", summary)

    def _stop_process(self, *, wait: bool) -> None:
        try:
            self.proc.wait(timeout=10 if wait else 0.1)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def summary(self) -> str | None:
        """One line on what was not recorded (``MLflow tracking (...): N call(s) not recorded (...)``), or None."""
        return self._failures.summary()


