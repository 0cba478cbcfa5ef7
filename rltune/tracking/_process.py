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

The tracking process (:func:`rltune.tracking._server.tracking_entry`) runs a :class:`StudyTracker` inline,
at a lower CPU priority than the trials, and handles the messages in order
per trial; results of a trial that queued up while it was busy are logged
together (MLflow's cost is per call), and of several queued plot refreshes
only the latest is drawn. Its warnings (what could not be recorded) come back
to the orchestrator's log; MLflow's own output goes to ``tracking.log`` in
the study directory. ``close`` waits for the queue (at most
``drain_timeout_s``) and returns what was not recorded. If the tracking
process dies, the study goes on and reports what was not recorded.

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
from pathlib import Path
from typing import Any, Mapping

from rltune._ipc import (Channel, ChannelClosed, Closed, CloseTracking, DrawPlots, EndTrial, LogCheckpoint, LogCurve,
                         LogFiles, LogLine, LogModel, LogResult, OpenTrial, PICKLE, Reconcile, TrackingInit, UpdateBest,
                         spawn)
from rltune._trial_files import json_safe
from rltune.tracking._failures import Failures
from rltune.tracking._keys import flatten_params
from rltune.tracking._priority import NICE, set_autogroup_nice
from rltune.tracking._staging import remove_staging, snapshot, snapshot_files
from rltune.tracking._store import resolve_tracking_uri

logger = logging.getLogger("rltune.tracking")



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
    ) -> None:
        import cloudpickle

        self.tracking_uri = resolve_tracking_uri(tracking_uri, results_dir)
        self.study_name = study_name
        self.plot_interval_s = plot_interval_s
        self.drain_timeout_s = drain_timeout_s
        self.study_dir = Path(study_dir) if study_dir is not None else None
        self.staging_tag = uuid.uuid4().hex[:8]  # in the names of this session's upload copies
        self._failures = Failures(f"study {study_name!r}")  # what was not recorded, here and there
        self._lost: str | None = None  # why the process is gone, once it is
        self._closed = False
        self._last_plots = time.monotonic()
        self._outbox: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
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

    def yield_to_trials(self, yielding: bool) -> None:
        """Keep the tracking process at nice 19 while trials run (``yielding``), else at 0 (see ``_priority``)."""
        if self.proc.poll() is None:
            set_autogroup_nice(self.proc.pid, NICE if yielding else 0)

    def _handle_reply(self, message: Any) -> None:
        if isinstance(message, LogLine):
            logger.log(message.level, "%s", message.text)

    # -- the tracker's interface -----------------------------------------------------------
    def open_trial(self, trial_number: int, params: Mapping[str, Any], key_params: Mapping[str, Any],
                   **trial_options: Any) -> TrialHandle:
        """Create (or reopen, for a resumed trial) the trial's nested run; the handle to log into it."""
        # as text: a config may hold what pickle cannot carry (lambdas) or the tracking process cannot
        # import (classes of the user's __main__)
        self._post(OpenTrial(trial_number, flatten_params(params), json_safe(dict(key_params)), trial_options))
        return TrialHandle(self, trial_number)

    def end_trial(self, run: TrialHandle, state: str, *, reason: str | None = None, error: str | None = None) -> None:
        """End the trial's run in ``state`` (COMPLETE, PRUNED, FAIL, INTERRUPTED), with why and the traceback."""
        self._post(EndTrial(run.number, state, reason, error))

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

    def close(self, *, interrupted: bool = False) -> None:
        """End the parent run (KILLED when interrupted), wait for the queue (at most ``drain_timeout_s``).

        What could not be recorded is then in ``unrecorded`` and ``failure_counts``, and logged in one line.
        A second call does nothing (the study's end may close the tracking twice: the summary is logged once).
        """
        if self._closed:
            return
        self._closed = True
        self._post(CloseTracking(interrupted))
        self._outbox.put(None)
        deadline = time.monotonic() + self.drain_timeout_s
        closed = False
        while self.conn is not None and self._lost is None:
            self.yield_to_trials(False)  # the study's end waits for the queue (again: a change may come too soon)
            left = deadline - time.monotonic()
            try:
                if left <= 0 or not self.conn.poll(min(left, 1.0)):
                    if left <= 0:
                        self._record("close", f"tracking calls still queued after {self.drain_timeout_s:.0f} s "
                                              "(cancelled)")
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


