"""Running a study: Optuna asks for trials, each trial runs in its own process, results go back to Optuna.

One thread drives everything (no locks): it fills the free slots with
trials (interrupted ones first, then Optuna's waiting grid points, then new
ones the sampler draws), waits on the trial processes' sockets, reports each
result to Optuna (``trial.report(value, step=training_iteration)``; a step
the trial runs again after restoring a checkpoint replaces its earlier
value, in Optuna and MLflow: :func:`._intermediate.report`), and answers each
result with "continue" or "stop" (a stop criterion met, the pruner said so,
Ctrl-C).

States in storage: a trial is RUNNING while a process of this study owns
it; COMPLETE with the metric of its last result; PRUNED; FAIL after
``max_failures`` restarts (its traceback in ``error.txt`` and the user attr
``error``, why in ``failure_kind``; one that found the disk full is not
restarted, no new trial starts, and a resume retries it: :mod:`._retry`). An interrupted trial (Ctrl-C, or the orchestrator killed) stays
RUNNING with an ``owner`` user attr (host, pid, process start time, run id)
that no live orchestrator matches (on another machine, whose pids cannot be
checked: a ``heartbeat`` user attr older than HEARTBEAT_GRACE_S): ``resume``
continues it from its latest checkpoint in the same Optuna trial. Grid points are enqueued once each
(user attrs ``grid_index`` and ``sample_index``), so a resumed study never
runs a point twice.

On the journal storage one orchestrator runs a study at a time: it holds
the study directory's lock (:mod:`rltune.orchestrator._study_lock`) from
``open_study`` to ``close``, so every RUNNING trial it finds was interrupted.
A trainer study's envs are built and checked once before the first trial
(:mod:`rltune.orchestrator._env_check`). The parts of the runner are listed
in :class:`StudyRunner`'s docstring.

Study directory (``<results_dir>/<name>/``)::

    study.journal        Optuna JournalStorage (the default storage; safe with several processes)
    study.json           name and storage URL (for ``rltune studies`` / ``rltune show``)
    orchestrator.lock    flock held by the running orchestrator (its host and pid inside)
    best_config.yaml     the best trial as a ``rltune train -f`` file
    trial_00003/         params.json, result.json, output.log, error.txt, checkpoint_000010/ ...
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
import uuid
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any

from rltune._disk import NO_SPACE, disk_error
from rltune._ipc import ChannelClosed, CheckpointSaved, Done, Failed, Result, TrialInit
from rltune.env._shipping import collect_env_registrations
from rltune.errors import ConfigError
from rltune.orchestrator import _trial_host as host
from rltune.orchestrator._decision import Outcome
from rltune.orchestrator._events import Observers
from rltune.orchestrator._intermediate import backfill
from rltune.orchestrator._on_result import on_result, release_held
from rltune.orchestrator._pbt import make_scheduler, restart_checkpoint
from rltune.orchestrator._ownership import Heartbeats, fail_stale_trials
from rltune.orchestrator._reporter import latest_checkpoint
from rltune.orchestrator._retry import FAILURE_KIND
from rltune.orchestrator._spec import StudyPlan
from rltune.orchestrator._study_setup import StudyOpener, study_dir_of
from rltune.orchestrator._study_state import StudyState
from rltune.orchestrator._trial_end import TrialEnding
from rltune.orchestrator._trial_host import ActiveTrial
from rltune.orchestrator._trial_setup import TrialSetup

logger = logging.getLogger(__name__)

BEST_CONFIG_FILE = "best_config.yaml"
STOP_GRACE_S = 120.0  # after Ctrl-C, trials get this long to finish their iteration and checkpoint
SHARED_POLL_S = 1.0  # an idle worker of a shared study looks for work (and stale trials) this often


class StudyRunner:
    """Runs one study to its end (or until interrupted); see the module docstring.

    It keeps the loop (starting trials, their messages, failures) and is
    built from collaborators sharing a :class:`~._study_state.StudyState`:
    :class:`~._study_setup.StudyOpener` (open, create or join the study,
    resume discovery), :class:`~._trial_setup.TrialSetup` (the next trial,
    its config and seed), :class:`~._trial_end.TrialEnding` (a trial's end
    told to Optuna, or left to resume), :mod:`._trial_host` (trial
    processes), :mod:`._ownership` (heartbeats, stale trials) and
    :mod:`._decision` (what a result means). Observers
    (:class:`~rltune.orchestrator._events.Observer`: the display, MLflow
    tracking) get the loop's events: ``self.observers.<event>(...)``.
    """

    def __init__(
        self,
        plan: StudyPlan,
        *,
        resume: bool | str = False,
        retry_failed: bool | str = False,
        display: Any = None,
        max_concurrent: int | None = None,
        cpu_count: int | None = None,
        stop_grace_s: float = STOP_GRACE_S,
    ) -> None:
        self.observers = Observers()  # tracking first (set by open_study), the display last
        self.state = StudyState(plan, self.observers, uuid.uuid4().hex, study_dir_of(plan.spec.results_dir, plan.name))
        self._opener = StudyOpener(self.state, resume=resume, retry_failed=retry_failed)
        self._ending = TrialEnding(self.state)
        self._setup: TrialSetup | None = None  # set by open_study, with what it found to run first
        self._display: Any = None
        self.display = display
        self.max_concurrent = max_concurrent if max_concurrent is not None else self.spec.max_concurrent
        self.cpu_count = cpu_count or os.cpu_count() or 1
        self.stop_grace_s = stop_grace_s
        self.interrupts = 0
        self.stopping_since: float | None = None
        self.interrupted = False
        self.spec_error: ConfigError | None = None
        self._pending: list[ActiveTrial] = []
        self.start_time = time.monotonic()  # the clock of the study's timeout_s
        self._cpu_note = False
        self._heartbeats: Heartbeats | None = None
        self._last_shared_poll = 0.0

    # -- what the display and the analysis read ---------------------------------------------
    @property
    def plan(self) -> StudyPlan:
        """The study's plan (its spec renamed when a default name moved past a held study)."""
        return self.state.plan

    @property
    def spec(self) -> Any:
        """The study's spec."""
        return self.state.spec

    @property
    def study(self) -> Any:
        """The Optuna study, once open."""
        return self.state.study

    @property
    def study_dir(self) -> Path:
        """The study's directory."""
        return self.state.study_dir

    @property
    def shared(self) -> bool:
        """Whether the study is on an RDB storage that other workers may share (known once open)."""
        return self.state.shared

    @property
    def active(self) -> list[ActiveTrial]:
        """The trials running here."""
        return self.state.active

    @active.setter
    def active(self, active: list[ActiveTrial]) -> None:
        self.state.active = active

    @property
    def tracker(self) -> Any:
        """The TrackingProcess when the study is recorded in MLflow (set by open_study)."""
        return self._opener.tracker

    @property
    def resumable(self) -> list[Any]:
        """The interrupted trials still to continue (found by open_study)."""
        return self._setup.resumable if self._setup is not None else self._opener.resumable

    @property
    def retries(self) -> list[Any]:
        """The failed trials still to retry (found by open_study)."""
        return self._setup.retries if self._setup is not None else self._opener.retries

    @property
    def display(self) -> Any:
        """The live display or plain lines (None: silent); an observer, told after the others."""
        return self._display

    @display.setter
    def display(self, display: Any) -> None:
        previous = self._display
        if display is not None:
            self.observers.append(display)  # checked first: a display that is no observer changes nothing
        if previous is not None:
            self.observers.remove(previous)
        self._display = display

    # -- the study ------------------------------------------------------------------------
    def open_study(self) -> Any:
        """Create or load the study in its storage (:class:`StudyOpener`); in shared storage, join it."""
        study = self._opener.open_study()
        self.state.scheduler = make_scheduler(self.state)  # pbt: None without a scheduler beside the pruner
        self._setup = TrialSetup(self.state, self._ending, resumable=self._opener.resumable,
                                 retries=self._opener.retries, started_total=self._opener.started_total,
                                 start_time=self.start_time, restart=self._opener.retry_failed == "restart")
        return study

    def close(self) -> None:
        """Release the study directory's lock (the orchestrator is done with the study); idempotent."""
        self._opener.close()

    # -- the loop -------------------------------------------------------------------------
    def run(self) -> None:
        """Run trials until the study has its trials (or its timeout), or until interrupted."""
        previous = self._install_signal_handlers()
        self._heartbeats = Heartbeats(self.shared, self.state.storage, self.spec.heartbeat_interval_s)
        try:
            while self._turn():
                pass
        finally:
            if self.active:  # an exception in the loop itself: do not leave trial processes behind
                self._kill_all()
            for pending in self._pending:  # asked but never started: left for resume
                self._ending.release(pending)
            self._restore_signal_handlers(previous)
            try:
                self._close_tracking()
            except Exception:  # the storage is gone (plots need the trials): the tracking still closes
                logger.debug("final plots skipped", exc_info=True)
                if self.tracker is not None:
                    self.tracker.close(interrupted=self.interrupted)
        if self.spec_error is not None:
            raise self.spec_error

    def _turn(self) -> bool:
        """One turn of the loop: stop or fill, read the trials' messages, check their processes; False when done."""
        if self.interrupts and self.stopping_since is None:
            self._begin_stop("interrupted")
        if self.interrupts >= 2 or (
            self.stopping_since is not None and time.monotonic() - self.stopping_since > self.stop_grace_s
        ):
            self._kill_all()
        if self.stopping_since is None:
            self._fill()
        if not self.active:
            if not self._wait_for_others():
                return False
            time.sleep(0.2)
        ready = wait([a.conn for a in self.active if a.conn is not None], timeout=0.2) if self.active else []
        for conn in ready:
            active = next((a for a in self.active if a.conn is conn), None)
            if active is not None:
                self._guarded(active, self._drain)
        for active in list(self.active):
            self._guarded(active, self._check_process)
        if self.state.scheduler is not None:
            release_held(self)  # synchronous PBT: members waiting for the population
        self._heartbeat()
        self.observers.refresh(self)
        return True

    def _close_tracking(self) -> None:
        """The study's end in MLflow: final plots and the parent run's end first, then the reconciliation."""
        if self.tracker is None:
            return
        self.tracker.refresh_study_plots(self.study)
        self.tracker.finish_study(interrupted=self.interrupted)
        self.tracker.reconcile(self.study)
        self.tracker.close(interrupted=self.interrupted, say=self.state.say)
        if self.tracker.repaired:
            self.state.say(f"MLflow tracking: recorded what an earlier run left out in the runs of trial(s) "
                      f"{', '.join(map(str, self.tracker.repaired))}")

    def _wait_for_others(self) -> bool:
        """Shared storage, nothing to run here: whether to wait, because other workers still run trials.

        One of them may be lost: its trials then go stale and come back as
        WAITING retries. An idle worker keeps checking until no trial of the
        study is running or waiting (or the study's timeout passed).
        """
        if not self.shared or self.stopping_since is not None or self.spec_error is not None:
            return False
        if self.spec.timeout_s is not None and time.monotonic() - self.start_time > self.spec.timeout_s:
            return False
        now = time.monotonic()
        if now - self._last_shared_poll < SHARED_POLL_S:
            return True
        self._last_shared_poll = now
        fail_stale_trials(self.study)
        from optuna.trial import TrialState

        return bool(self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING, TrialState.WAITING)))

    def _heartbeat(self) -> None:
        """The running trials' heartbeats (a pending trial is RUNNING in a shared storage too)."""
        self._heartbeats.beat(self.study, [*self.active, *self._pending] if self.shared else self.active,
                              self._guarded)

    def _install_signal_handlers(self) -> dict[int, Any]:
        if threading.current_thread() is not threading.main_thread():
            return {}

        def handler(signum: int, frame: Any) -> None:
            self.interrupts += 1

        previous = {}
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, handler)
        return previous

    @staticmethod
    def _restore_signal_handlers(previous: dict[int, Any]) -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

    def _begin_stop(self, why: str) -> None:
        self.stopping_since = time.monotonic()
        if why == "interrupted":
            self.interrupted = True
        self.observers.message(
            f"{why}: {len(self.active)} running trial(s) checkpoint and stop after their current iteration "
            "(Ctrl-C again to stop them at once)" if self.active else f"{why}: stopping")

    def _kill_all(self) -> None:
        for a in list(self.active):
            host.kill(a)
            a.outcome, a.reason = Outcome.INTERRUPTED, "killed"
            try:
                self._ending.finish_interrupted(a)
            except Exception:  # noqa: BLE001 - the storage failed: the trial stays RUNNING, resumable all the same
                logger.debug("trial %d: its interruption was not recorded", a.number, exc_info=True)
                self._ending.retire(a)

    # -- starting trials ------------------------------------------------------------------
    def _limit(self) -> int:
        return self.max_concurrent if self.max_concurrent is not None else self.spec.n_jobs

    def _fits(self, candidate: ActiveTrial) -> bool:
        if len(self.active) >= self._limit():
            return False
        if self.max_concurrent is not None or not self.active:
            return True
        used = sum(a.cpus for a in self.active)
        if used + candidate.cpus <= self.cpu_count:
            return True
        self._note_cpus(candidate.cpus)
        return False

    def _note_cpus(self, cpus: int) -> None:
        if not self._cpu_note:
            self._cpu_note = True
            self.observers.message(
                f"n_jobs is {self._limit()}, but {self.cpu_count} CPUs hold {len(self.active)} trial(s) of "
                f"{cpus} CPU(s) (1 + num_workers, or resources_per_trial) at a time; --max-concurrent N overrides "
                "the CPU budget")

    def _fill(self) -> None:
        while len(self.active) < self._limit():
            if not self._pending:
                # ask Optuna only when a trial can start now (so that the sampler sees every finished trial)
                if self.active and self.max_concurrent is None and (
                    sum(a.cpus for a in self.active) + self.plan.cpus_per_trial(self.plan.config) > self.cpu_count
                ):
                    self._note_cpus(self.plan.cpus_per_trial(self.plan.config))
                    return
                candidate = self._setup.next_trial() if self.spec_error is None else None
                if candidate is None:
                    return
                self._pending.append(candidate)
            if not self._fits(self._pending[0]):
                return
            self._launch(self._pending.pop(0))

    def _launch(self, a: ActiveTrial) -> None:
        """Start (or restart) the trial's process, from its latest checkpoint if it has one."""
        found = restart_checkpoint(a) if self.state.scheduler is not None else latest_checkpoint(a.trial_dir)
        if found is not None:
            a.checkpoint_iteration, a.checkpoint = found
        a.iteration = a.checkpoint_iteration
        if a.checkpoint:
            backfill(a, self.spec.metric)
        try:
            self._start_process(a)
        except OSError as exc:  # its output.log cannot be opened: a full or read-only disk
            error = disk_error(exc, a.trial_dir / host.OUTPUT_FILE, "the trial's output")
            self._failed(a, str(error), error.kind or "error")
            return
        if a not in self.active:
            self.active.append(a)
        self.observers.trial_started(a)

    def _start_process(self, a: ActiveTrial) -> None:
        host.start_process(a, TrialInit(
            kind=self.plan.trainable.kind,
            ref=self.plan.trainable.ref,
            config=a.config,
            trial_dir=str(a.trial_dir),
            trial_number=a.number,
            seed=a.seed,
            restore=a.checkpoint,
            start_iteration=a.checkpoint_iteration,
            checkpoint_freq=self.spec.checkpoint_freq,
            keep_checkpoints_num=self.spec.keep_checkpoints_num,
            tensorboard=self.spec.tensorboard,
            env_registrations=collect_env_registrations(
                a.config.get("env"), (a.config.get("evaluation_config") or {}).get("env")
            ),
        ))

    # -- messages -------------------------------------------------------------------------
    def _drain(self, a: ActiveTrial) -> None:
        while a.conn is not None and not a.finished:
            if not a.conn.poll():
                return
            try:
                message = a.conn.receive()
            except ChannelClosed:
                self._crashed(a)
                return
            except Exception as exc:  # a result that does not unpickle here
                self._failed(a, f"a message of the trial could not be read: {exc!r}")
                return
            if isinstance(message, Result):
                self._on_result(a, message.result)
            elif isinstance(message, CheckpointSaved):
                a.checkpoint, a.checkpoint_iteration = message.path, message.iteration
                a.trial.set_user_attr("checkpoint", a.checkpoint)
                self.observers.checkpoint_saved(a)
            elif isinstance(message, Done):
                self._ending.done(a)
            elif isinstance(message, Failed):
                self._failed(a, message.traceback, message.kind or "error")

    def _on_result(self, a: ActiveTrial, result: dict[str, Any]) -> None:
        """Report the result to Optuna and answer the trial (:func:`._on_result.on_result`)."""
        on_result(self, a, result)

    # -- failures -------------------------------------------------------------------------
    def _failed(self, a: ActiveTrial, error: str, kind: str = "error") -> None:
        """The trainable raised, the process crashed or timed out: retry from the checkpoint, or FAIL.

        ``kind`` (the ``failure_kind`` user attr): "error", "crash", "timeout",
        or a disk error's kind. A trial that found the disk full is not
        restarted, and no new trial starts (``--resume`` retries it later).
        """
        host.reap(a)
        a.failures += 1
        self._ending.append_error(a, error)
        a.trial.set_user_attr("num_failures", a.failures)
        a.trial.set_user_attr("error", error[-8000:])
        a.trial.set_user_attr(FAILURE_KIND, kind)
        if a.outcome is Outcome.INTERRUPTED:  # it failed while checkpointing for Ctrl-C: resumable all the same
            self._ending.finish_interrupted(a)
            return
        if a.outcome in (Outcome.COMPLETE, Outcome.PRUNED) and self._ending.end_as_decided(a):  # died as it stopped: not trained on
            return
        if kind == NO_SPACE:
            self._ending.out_of_space(a.number, error)
        elif a.failures <= self.spec.max_failures and self.stopping_since is None:
            host.close_conn(a)
            self.observers.message(f"trial {a.number} failed (attempt {a.failures}); restarting it "
                                   f"from {'its last checkpoint' if latest_checkpoint(a.trial_dir) else 'scratch'}")
            self._launch(a)
            return
        self._ending.tell_fail(a, error)

    def _crashed(self, a: ActiveTrial) -> None:
        self._failed(a, host.crash_text(a), "crash")

    def _check_process(self, a: ActiveTrial) -> None:
        """Time out a hung trial; notice one whose process died without a word."""
        if a.finished or a.proc is None:
            return
        timeout = host.timed_out(a, self.spec.trial_timeout_s)
        if timeout is not None:
            host.kill(a)
            self._failed(a, timeout, "timeout")
            return
        if host.died_silently(a):
            self._crashed(a)

    def _guarded(self, a: ActiveTrial, step: Any) -> None:
        """``step(a)``; if the trial was finished meanwhile by another worker (shared storage), let it go.

        Another worker fails a trial as stale when this worker's heartbeat
        lapsed (a suspended machine, a database outage longer than the
        grace period); the retry it enqueued is the trial now.
        """
        import optuna

        try:
            step(a)
        except optuna.exceptions.UpdateFinishedTrialError:
            self._ending.taken_over(a)
