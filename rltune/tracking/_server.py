"""The study's tracking process: a :class:`StudyTracker` serving the orchestrator's messages, in order.

Started by :class:`rltune.tracking._process.TrackingProcess` (see there for
why a process), one per study at a time (a lock file), at the priority of
:mod:`._priority` (the orchestrator lifts it when the tracking falls behind).

Batching: MLflow's cost is per call far more than per metric, so a trial's
results go in as few calls as fit. A result waits until it is
``result_hold_s`` (1 s) old, and the trial's results that arrived meanwhile
go with it in one ``log_batch`` call (:meth:`TrialTracker.log_results`);
results queued while the process was busy go together the same way. A
trial's other messages keep their order against its results.

Progress: the process counts the messages it receives (the init is message
0) and tells the orchestrator (:class:`rltune._ipc.Progress`) below which
one every message has been handled, whenever that changes (at most every
``PROGRESS_S`` while busy, at once when it has nothing left), so that the
orchestrator knows how far behind the tracking is.
"""

from __future__ import annotations

import importlib
import logging
import os
import pickle
import sys
import time
from collections import deque
from pathlib import Path
from typing import Any, Mapping

from rltune._ipc import (Channel, ChannelClosed, Closed, CloseTracking, DrawPlots, EndTrial, FinishStudy, LogCheckpoint,
                         LogCurve, LogFiles, LogLine, LogModel, LogResult, LogSeedRuns, OpenTrial, Progress, Reconcile, Reconciled,
                         TagTrial, UpdateBest)
from rltune.tracking._keys import flatten_params, with_defaults
from rltune.tracking._priority import NICE, autogroup_nice, is_tracking_process, lower_priority, set_autogroup_nice
from rltune.tracking._staging import remove, remove_staging

LOCK_WAIT_S = 300.0  # a tracking process waits this long for the one a killed orchestrator left to finish
LOCK_FILE = ".tracking.lock"  # in the study directory: held by the study's tracking process
PARENT_WAIT_S = 60.0  # a worker joining a shared study waits this long for the creator's parent run
RESULT_HOLD_S = 1.0  # a result waits this long for more of its trial's results, to go in one call
PROGRESS_S = 0.5  # while busy, the orchestrator hears of the progress at most this often


class _Forward(logging.Handler):
    """Sends the tracker's warnings to the orchestrator, which logs them where the user looks."""

    def __init__(self, conn: Channel) -> None:
        super().__init__(logging.WARNING)
        self.conn = conn

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.conn.send(LogLine(record.levelno, record.getMessage()))
        except Exception:  # noqa: BLE001 - the orchestrator is gone; the message stays in tracking.log
            pass


def _detach_forwarding() -> None:
    root = logging.getLogger("rltune")
    for handler in [h for h in root.handlers if isinstance(h, _Forward)]:
        root.removeHandler(handler)


def tracking_entry(fd: int) -> None:
    """Entry point of the tracking process: serve the orchestrator's messages until ``close`` or EOF."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    conn = Channel.from_fd(fd)
    try:
        init = conn.receive().options  # TrackingInit
    except ChannelClosed:
        os._exit(1)
    sys.path[:] = init["sys_path"]
    lower_priority(init.get("nice", NICE))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    received: list[bytes] = []
    lock = None
    study_dir = Path(init["study_dir"]) if init.get("study_dir") else None
    if study_dir is not None:
        lock, alive = _take_lock(study_dir, conn, received)
        if not alive:  # the orchestrator died while an earlier tracking process ran: a resume reconciles
            os._exit(0)
        remove_staging(study_dir, keep_tag=init["staging_tag"])
    logging.getLogger("rltune").addHandler(_Forward(conn))
    from rltune.tracking._study import StudyTracker

    tracker = StudyTracker(init["tracking_uri"], init["results_dir"], init["study_name"], init["sampler_name"],
                           init["pruner_name"], study_params=init["study_params"] or None,
                           parent_wait_s=0.0 if init.get("create_parent", True) else PARENT_WAIT_S,
                           start_time_ms=init.get("start_time_ms"))
    server = _Server(conn, tracker, init.get("defaults_of"), study_dir=study_dir,
                     trial_options=init.get("trial_options"), policy_model=bool(init.get("policy_model")),
                     result_hold_s=init.get("result_hold_s", RESULT_HOLD_S))
    for data in received:
        server._unpickle(data)
    code = server.serve()
    if lock is not None:
        lock.close()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _take_lock(study_dir: Path, conn: Channel, received: list[bytes]) -> tuple[Any, bool]:
    """The study's tracking lock (the open lock file, or None), and whether the orchestrator is still there.

    While a tracking process of a killed orchestrator finishes its queue,
    this one waits (at most ``LOCK_WAIT_S``), keeping the messages that
    arrive in ``received``: two processes logging one trial would log its
    steps twice. The lock goes with the process (``flock``); its holder's
    pid is in the file. The waiting one hands the holder its own autogroup
    nice (see :mod:`._priority`): its orchestrator's trials are what both
    yield to, and the study's end waits for both.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        return None, True
    study_dir.mkdir(parents=True, exist_ok=True)
    lock = open(study_dir / LOCK_FILE, "a")
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            lock.truncate(0)
            lock.write(f"{os.getpid()}\n")
            lock.flush()
            return lock, True
        except OSError:
            pass
        _share_nice_with_holder(study_dir / LOCK_FILE)
        if time.monotonic() > deadline:
            logging.getLogger("rltune.tracking").warning(
                "MLflow tracking: an earlier tracking process of this study still runs after %.0f s; "
                "going on beside it", LOCK_WAIT_S)
            return lock, True
        try:
            if conn.poll(0.2):
                for _ in range(1000):  # then the lock again, however fast messages come
                    received.append(conn.receive_bytes())
                    if not conn.poll():
                        break
        except ChannelClosed:
            return lock, False


def _share_nice_with_holder(path: Path) -> None:
    """Give the tracking process holding the lock at ``path`` this process's autogroup nice."""
    try:
        pid = int(path.read_text().strip() or 0)
    except (OSError, ValueError):
        return
    mine = autogroup_nice()
    if pid > 0 and mine is not None and is_tracking_process(pid):
        set_autogroup_nice(pid, mine)


def _warm_up_steps(policy_model: bool) -> list[str]:
    """What the first trial's end needs, to import while the process has nothing else to do (one at a time).

    matplotlib for the plots; Optuna's importance module, which imports
    scikit-learn (over a second here); the model export's torch and pyfunc
    only for a trainer's study.
    """
    steps = ["optuna.importance", "optuna.visualization.matplotlib", "matplotlib.pyplot"]
    return ["mlflow.pyfunc", "torch", *steps] if policy_model else steps


def _warm_up(module: str) -> None:
    try:
        if module == "matplotlib.pyplot":
            from rltune.tracking import _plots

            _plots._pyplot()
        else:
            importlib.import_module(module)
    except Exception:  # noqa: BLE001 - only an optimisation; the real call reports a real problem
        logging.getLogger(__name__).debug("warm-up of %s failed", module, exc_info=True)


class _Server:
    """The tracking process's loop: messages in order per trial, results batched, progress told."""

    def __init__(self, conn: Channel, tracker: Any, defaults_of: bytes | None = None, *,
                 study_dir: Path | None = None, trial_options: Mapping[str, Any] | None = None,
                 policy_model: bool = False, result_hold_s: float = RESULT_HOLD_S) -> None:
        self.conn = conn
        self.tracker = tracker
        self.study_dir = study_dir
        self.trial_options = dict(trial_options or {})
        self.policy_model = policy_model
        self.result_hold_s = result_hold_s
        self._defaults_of = defaults_of
        self._defaults: dict[str, Any] | None = None
        self.trials: dict[int, Any] = {}
        self.pending: deque[tuple[int, Any]] = deque()  # (number, message of rltune._ipc), in number order
        self.received = 1  # messages received, the init (message 0) included
        self._told = 0  # the last Progress sent (none yet: the init is handled once the tracker is open)
        self._told_at = 0.0
        self._warm_up = _warm_up_steps(policy_model)

    def _receive(self, wait: float | None) -> bool:
        """Move what the orchestrator sent into ``pending``, after waiting up to ``wait`` s for a first message
        (None: until one comes); False at EOF (the orchestrator is gone)."""
        try:
            if wait is None or wait > 0:
                self.conn.poll(wait)
            while self.conn.poll():
                self._unpickle(self.conn.receive_bytes())
        except ChannelClosed:
            return False
        return True

    def _unpickle(self, data: bytes) -> None:
        number = self.received
        self.received += 1
        try:
            self.pending.append((number, pickle.loads(data)))
        except Exception:  # noqa: BLE001 - e.g. a result object of a class this process cannot import
            logging.getLogger("rltune.tracking").warning(
                "MLflow tracking: a message could not be read here and is not recorded", exc_info=True)

    def _hold(self) -> float:
        """How long the first pending message waits for more results of its trial (0: handle it now)."""
        head = self.pending[0][1]
        if self.result_hold_s <= 0 or not isinstance(head, LogResult):
            return 0.0
        left = head.timestamp_ms / 1000 + self.result_hold_s - time.time()
        if left <= 0 or any(isinstance(m, (FinishStudy, CloseTracking)) for _, m in self.pending):
            return 0.0  # the study ends: nothing more comes to batch
        return left

    def _progress(self) -> None:
        """Tell the orchestrator below which message all are handled (when it changed; see the module docstring)."""
        recorded = self.pending[0][0] if self.pending else self.received
        now = time.monotonic()
        if recorded == self._told or (self.pending and now - self._told_at < PROGRESS_S):
            return
        self._told, self._told_at = recorded, now
        try:
            self.conn.send(Progress(recorded))
        except ChannelClosed:
            pass

    def serve(self) -> int:
        alive = True
        self._progress()  # the tracker is open: the init is handled
        while True:
            idle = not self.pending or (alive and self._hold() > 0)  # nothing due (a result held is not)
            if alive and idle and self._warm_up and not self.conn.poll():
                _warm_up(self._warm_up.pop(0))  # while the first trials run, rather than when the first one ends
                continue
            if alive:
                alive = self._receive(None if not self.pending else self._hold())
            if not self.pending:
                if alive:
                    continue  # a message that could not be read
                # EOF with nothing left: the orchestrator died without closing; its study is resumable
                self.tracker.close(interrupted=True)
                return 0
            if alive and self._hold() > 0:
                continue  # more results of the trial may come
            _, message = self.pending.popleft()
            if isinstance(message, CloseTracking):
                # the orchestrator logs the summary of what was lost; the tracker's own would repeat it
                _detach_forwarding()
                self.tracker.close(interrupted=bool(message.interrupted))
                try:
                    self.conn.send(Closed(self.tracker.unrecorded, self.tracker.failure_counts))
                except ChannelClosed:
                    pass
                return 0
            try:
                self._handle(message)
            except Exception:  # noqa: BLE001 - a bug here must not end the tracking of the study
                logging.getLogger(__name__).exception("tracking message %r failed", getattr(message, "kind", message))
            self._progress()

    def _trainer_defaults(self) -> dict[str, Any]:
        """The trainer's default config (logged under the trial's own keys); {} for a function trainable."""
        if self._defaults is None:
            self._defaults = {}
            if self._defaults_of is not None:
                try:
                    import cloudpickle

                    from rltune.trainers import get_trainer_class

                    self._defaults = get_trainer_class(cloudpickle.loads(self._defaults_of)).get_default_config().to_dict()
                except Exception:  # noqa: BLE001 - defaults are a convenience in the params, never a failure
                    logging.getLogger(__name__).debug("no trainer defaults", exc_info=True)
        return self._defaults

    def _take_results(self, number: int, replace: bool = False) -> list[tuple[dict[str, Any], int]]:
        """The trial's results (of this ``replace``) queued before its next other message (other trials' stay)."""
        taken, kept = [], deque()
        while self.pending:
            entry = self.pending.popleft()
            message = entry[1]
            if isinstance(message, LogResult) and message.number == number and message.replace == replace:
                taken.append((message.result, message.timestamp_ms))
                continue
            kept.append(entry)
            if getattr(message, "number", None) == number:
                break
        kept.extend(self.pending)
        self.pending = kept
        return taken

    def _handle(self, message: Any) -> None:
        if isinstance(message, OpenTrial):
            params = with_defaults(flatten_params(self._trainer_defaults()), message.params)
            self.trials[message.number] = self.tracker.open_trial(message.number, params, message.key_params,
                                                                  start_time_ms=message.start_time_ms,
                                                                  **message.options)
        elif isinstance(message, LogResult):
            batch = [(message.result, message.timestamp_ms), *self._take_results(message.number, message.replace)]
            self.trials[message.number].log_results([r for r, _ in batch], timestamp_ms=batch[-1][1],
                                                    replace=message.replace)
        elif isinstance(message, LogCheckpoint):
            try:
                self.trials[message.number].log_checkpoint(message.copy, name=message.name)
            finally:
                remove(Path(message.copy))
        elif isinstance(message, LogFiles):
            try:
                self.trials[message.number].log_files(*message.copies)
            finally:
                remove(Path(message.staging))
        elif isinstance(message, LogCurve):
            self.trials[message.number].log_learning_curve()
        elif isinstance(message, TagTrial):
            self.trials[message.number].set_tags(message.tags)
        elif isinstance(message, LogModel):
            try:
                self.trials[message.number].log_policy_model(message.copy)
            finally:
                remove(Path(message.copy))
        elif isinstance(message, LogSeedRuns):
            self.tracker.log_seed_runs(message.number, message.runs, message.state)
        elif isinstance(message, EndTrial):
            self.tracker.end_trial(self.trials.get(message.number), message.state, reason=message.reason,
                                   error=message.error, end_time_ms=message.end_time_ms)
        elif isinstance(message, UpdateBest):
            self.tracker.update_best(message.number, message.value, message.params)
        elif isinstance(message, FinishStudy):
            self.tracker.finish(interrupted=bool(message.interrupted), end_time_ms=message.end_time_ms)
        elif isinstance(message, Reconcile):
            self._reconcile(message)
        elif isinstance(message, DrawPlots):
            if any(isinstance(m, DrawPlots) for _, m in self.pending):
                return  # a newer copy of the trials is queued: draw that one
            self.tracker.draw_study_plots(message.trials, message.directions)

    def _reconcile(self, message: Reconcile) -> None:
        if self.study_dir is None:
            return
        repaired = self.tracker.reconcile(message.trials, self.study_dir, finished_only=bool(message.finished_only),
                                          policy_model=self.policy_model, **self.trial_options)
        if repaired:
            try:
                self.conn.send(Reconciled(list(repaired)))
            except ChannelClosed:
                pass
