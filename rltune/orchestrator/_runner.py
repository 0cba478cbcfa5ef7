"""Running a study: Optuna asks for trials, each trial runs in its own process, results go back to Optuna.

One thread drives everything (no locks): it fills the free slots with
trials (interrupted ones first, then Optuna's waiting grid points, then new
ones the sampler draws), waits on the trial processes' sockets, reports each
result to Optuna (``trial.report(value, step=training_iteration)``), and
answers each result with "continue" or "stop" (a stop criterion met, the
pruner said so, Ctrl-C).

States in storage: a trial is RUNNING while a process of this study owns
it; COMPLETE with the metric of its last result; PRUNED; FAIL after
``max_failures`` restarts (its traceback in ``error.txt`` and the user attr
``error``). An interrupted trial (Ctrl-C, or the orchestrator killed) stays
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
(:mod:`rltune.orchestrator._env_check`).

Study directory (``<results_dir>/<name>/``)::

    study.journal        Optuna JournalStorage (the default storage; safe with several processes)
    study.json           name and storage URL (for ``rltune studies`` / ``rltune show``)
    orchestrator.lock    flock held by the running orchestrator (its host and pid inside)
    best_config.yaml     the best trial as a ``rltune train -f`` file
    trial_00003/         params.json, result.json, output.log, error.txt, checkpoint_000010/ ...
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
import warnings
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

import cloudpickle

from rltune.env._shipping import collect_env_registrations
from rltune.errors import ConfigError, StudyLockedError
from rltune.orchestrator._env_check import check_study_envs
from rltune.orchestrator._reporter import json_safe, latest_checkpoint
from rltune.orchestrator._search_space import decode_params, encode_point, resolve_config, suggest
from rltune._metrics import finite
from rltune.orchestrator._spec import StudyPlan
from rltune._secrets import redact_text, redact_url, resolve_url
from rltune.orchestrator._storage import (
    BUDGET_ATTR, JOURNAL_FILE, is_shared, open_storage, pop_waiting_trial)
from rltune.orchestrator._stop import _MISSING, StopCriteria, lookup
from rltune.orchestrator._study_lock import StudyLock, clear_stale_journal_lock
from rltune.orchestrator._trial import default_results_dir

logger = logging.getLogger(__name__)

STUDY_FILE = "study.json"
BEST_CONFIG_FILE = "best_config.yaml"
ERROR_FILE = "error.txt"
OUTPUT_FILE = "output.log"
TRACKING_LOG = "tracking.log"  # the tracking process's own output (MLflow's messages)
PARAMS_FILE = "params.json"
STOP_GRACE_S = 120.0  # after Ctrl-C, trials get this long to finish their iteration and checkpoint
HEARTBEAT_S = 30.0  # how often the running trials' heartbeat user attr is written
HEARTBEAT_GRACE_S = 180.0  # a trial of another machine without a heartbeat for this long is interrupted
BUDGET_WAIT_S = 60.0  # a worker joining a shared study waits this long for its creator to enqueue the budget
SHARED_POLL_S = 1.0  # an idle worker of a shared study looks for work (and stale trials) this often


# -- storage ------------------------------------------------------------------------------------
def study_dir_of(results_dir: str | None, name: str) -> Path:
    root = Path(os.path.expanduser(results_dir)) if results_dir else default_results_dir()
    return root / name


def _quiet_optuna() -> None:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)


# -- owners: who runs a RUNNING trial ---------------------------------------------------------
def _process_start(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def make_owner(run_id: str) -> dict[str, Any]:
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


# -- the running trials -------------------------------------------------------------------------
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
    proc: subprocess.Popen | None = None
    conn: Connection | None = None
    attempt_start: float = 0.0
    started: float = field(default_factory=time.time)
    last_result: dict[str, Any] | None = None
    checkpoint: str | None = None
    checkpoint_iteration: int = 0
    iteration: int = 0
    failures: int = 0
    outcome: str | None = None  # "complete" | "pruned" | "interrupted" once decided
    reason: str | None = None
    reported_steps: set[int] = field(default_factory=set)
    finished: bool = False
    tracking: Any = None  # its TrialTracker (MLflow run) when the study is tracked


@dataclass
class TrialEnd:
    """How a trial ended in this run (for the display)."""

    number: int
    state: str
    value: float | None
    reason: str | None


class StudyRunner:
    """Runs one study to its end (or until interrupted); see the module docstring."""

    def __init__(
        self,
        plan: StudyPlan,
        *,
        resume: bool = False,
        display: Any = None,
        max_concurrent: int | None = None,
        cpu_count: int | None = None,
        stop_grace_s: float = STOP_GRACE_S,
    ) -> None:
        self.plan = plan
        self.spec = plan.spec
        self.resume = resume
        self.display = display
        self.max_concurrent = max_concurrent if max_concurrent is not None else self.spec.max_concurrent
        self.cpu_count = cpu_count or os.cpu_count() or 1
        self.stop_grace_s = stop_grace_s
        self.run_id = uuid.uuid4().hex
        self.study_dir = study_dir_of(self.spec.results_dir, plan.name)
        self.active: list[ActiveTrial] = []
        self.ended: list[TrialEnd] = []
        self.interrupts = 0
        self.stopping_since: float | None = None
        self.interrupted = False
        self.spec_error: ConfigError | None = None
        self.results: dict[int, dict[str, Any]] = {}  # last result of each trial run here
        self.configs: dict[int, dict[str, Any]] = {}
        self._resumable: list[Any] = []
        self._pending: list[ActiveTrial] = []
        self._started_total = 0
        self._start_time = time.monotonic()
        self._cpu_note = False
        self._last_heartbeat = 0.0
        self._last_shared_poll = 0.0
        self.shared = False  # set by open_study: an RDB storage that other workers may share
        self.storage: Any = None
        self.storage_url: str | None = None  # spec.storage with its ${...} references resolved (set by open_study)
        self.tracker: Any = None  # a TrackingProcess when the study is recorded in MLflow
        self.lock: StudyLock | None = None  # the study directory's lock (embedded storage)

    # -- setup ----------------------------------------------------------------------------
    def open_study(self) -> Any:
        """Create or load the study in its storage; in shared storage, join it as one more worker."""
        _quiet_optuna()
        self._claim_study_dir()
        try:
            return self._open_study()
        except BaseException:
            self.close()
            raise

    def _open_study(self) -> Any:
        """open_study in the claimed directory: the study's envs checked once, then its storage opened."""
        if self.plan.trainable.kind == "trainer":  # before any trial (and before a new study is stored)
            check_study_envs(self.plan)
        try:
            self.storage = open_storage(self.storage_url, self.study_dir,
                                        heartbeat_interval_s=self.spec.heartbeat_interval_s if self.shared else None,
                                        grace_s=self.spec.heartbeat_grace_s)
            created = self._create_or_load()
        except ConfigError:
            raise
        except Exception as exc:  # a bad URL, an unreachable server, a missing driver
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            first = redact_text(first, self.storage_url, self.spec.storage)
            hint = ("; install the driver: pip install 'rltune[postgres]'"
                    if isinstance(exc, ModuleNotFoundError) and "psycopg" in str(exc) else "")
            raise ConfigError(f"cannot open the Optuna storage {self._storage_text()!r}: {type(exc).__name__}: "
                              f"{first}{hint}", where="storage") from None
        if created:
            self.study.set_user_attr("rltune", json_safe({
                "trainable": self.plan.trainable.name,
                "metric": self.spec.metric,
                "mode": self.spec.mode,
                "search_alg": self.plan.sampler_name,
                "scheduler": self.plan.pruner_name,
                "tracking_uri": redact_url(self.spec.tracking_uri),
                "study_dir": str(self.study_dir),
                "space": self._space_signature(),
            }))
        else:
            if self.shared:
                self._wait_for_creator()
            if self.study.direction.name.lower() != self.plan.direction:
                raise ConfigError(
                    f"study {self.plan.name!r} in storage maximizes/minimizes differently ({self.study.direction.name}) "
                    f"than mode {self.spec.mode!r}",
                    where="study",
                )
            self._check_space_unchanged()
        self._open_tracking(created)
        (self.study_dir / STUDY_FILE).write_text(json.dumps({
            "name": self.plan.name,
            "storage": redact_url(self.spec.storage) if self.shared else None,  # as given, references kept
            "journal": None if self.shared else (
                os.path.expanduser(self.storage_url) if self.storage_url else JOURNAL_FILE),
            "trainable": self.plan.trainable.name,
            "metric": self.spec.metric,
            "mode": self.spec.mode,
            "tracking_uri": redact_url(self.spec.tracking_uri),
        }, indent=2) + "\n")
        if self.shared:
            self._enqueue_budget(created)
        else:
            self._enqueue_grid()
            self._find_resumable()
        return self.study

    def _claim_study_dir(self) -> None:
        """Make the study directory; on the embedded storage, take its lock (one orchestrator per study).

        A default name (no ``name`` given, no resume) never joins another
        study: it moves on to ``<name>_1``, ``<name>_2``... past existing and
        locked ones. A study on a shared RDB storage takes no lock: its
        workers share it by design.
        """
        self.storage_url = resolve_url(self.spec.storage)  # references expanded here only; never stored
        self.shared = is_shared(self.storage_url)
        auto = not self.plan.name_given and not self.resume
        base, n = self.plan.name, 0
        while True:
            if not (auto and (self.study_dir / STUDY_FILE).exists()):
                self.study_dir.mkdir(parents=True, exist_ok=True)
                if self.shared:
                    return
                try:
                    self.lock = StudyLock.acquire(self.study_dir, self.plan.name)
                    break
                except StudyLockedError:
                    if not auto:
                        raise
            n += 1
            self.plan.spec = self.spec = self.spec.model_copy(update={"name": f"{base}_{n}"})
            self.study_dir = study_dir_of(self.spec.results_dir, self.plan.name)
        journal = Path(os.path.expanduser(self.storage_url)) if self.storage_url else self.study_dir / JOURNAL_FILE
        clear_stale_journal_lock(journal, own_journal=journal.parent.resolve() == self.study_dir.resolve(),
                                 say=self._say)

    def _say(self, text: str) -> None:
        logger.info("%s", text)
        if self.display is not None:
            self.display.message(text)

    def close(self) -> None:
        """Release the study directory's lock (the orchestrator is done with the study); idempotent."""
        if self.lock is not None:
            self.lock.release()

    def _create_or_load(self) -> bool:
        """Open ``self.study``; True if this call created it.

        Embedded storage: an existing study needs ``resume``. Shared storage:
        exactly one worker creates the study (Optuna's unique study name is
        the lock); the others join it.
        """
        import optuna

        if self.shared:
            offset = int(self.run_id[:8], 16)  # workers sample differently (random start-up trials included)
            try:
                self.study = optuna.create_study(storage=self.storage, sampler=self.plan.make_sampler(),
                                                 pruner=self.plan.make_pruner(), study_name=self.plan.name,
                                                 direction=self.plan.direction)
                return True
            except optuna.exceptions.DuplicatedStudyError:
                self.study = optuna.load_study(study_name=self.plan.name, storage=self.storage,
                                               sampler=self.plan.make_sampler(seed_offset=offset),
                                               pruner=self.plan.make_pruner())
                return False
        summaries = {s.study_name: s for s in optuna.get_all_study_summaries(self.storage, include_best_trial=False)}
        exists = self.plan.name in summaries
        if exists and not self.resume:
            raise ConfigError(
                f"study {self.plan.name!r} already exists in {self._storage_text()}; pass --resume "
                f"(tune.run(..., resume=True)) to continue it, or give another name (--name NAME)",
                where="study",
            )
        self.study = optuna.create_study(
            storage=self.storage,
            sampler=self.plan.make_sampler(seed_offset=summaries[self.plan.name].n_trials if exists else 0),
            pruner=self.plan.make_pruner(),
            study_name=self.plan.name,
            direction=self.plan.direction,
            load_if_exists=True,
        )
        return not exists

    def _space_signature(self) -> dict[str, str]:
        """The search space as text per parameter, stored with the study so that workers can compare theirs."""
        return {p.name: p.describe() for p in self.plan.space.params}

    def _check_space_unchanged(self) -> None:
        """The study file must fit the stored study: a clear error naming each parameter that differs.

        Optuna keeps one kind of distribution per parameter name, so an
        incompatible entry is an error on resume too. Workers joining a
        shared study must search exactly the space it was created with.
        """
        from optuna.distributions import check_distribution_compatibility

        from rltune.orchestrator._search_space import distribution

        stored: dict[str, Any] = {}
        for t in self.study.get_trials(deepcopy=False):
            for name, dist in t.distributions.items():
                stored.setdefault(name, dist)
        problems, named = [], set()
        stored_space = (self.study.user_attrs.get("rltune") or {}).get("space")
        if self.shared and isinstance(stored_space, dict):
            mine = self._space_signature()
            for name in sorted(set(stored_space) | set(mine)):
                if stored_space.get(name) != mine.get(name):
                    named.add(name)
                    problems.append(f"config.{name}: the study searches {stored_space.get(name) or 'no such entry'}, "
                                    f"but this study file has {mine.get(name) or 'no such entry'}; use the study's "
                                    "file, or start another study (--name NEW)")
        for p in self.plan.space.params:
            if p.name in stored and p.name not in named:
                try:
                    check_distribution_compatibility(stored[p.name], distribution(p))
                except ValueError as exc:
                    problems.append(f"config.{p.name}: the study's trials drew it from {stored[p.name]!r}, but it is "
                                    f"now {p.describe()} ({exc}); keep it, or start another study (--name NEW)")
        if problems:
            where = f"joining study {self.plan.name!r}" if self.shared else f"resume of study {self.plan.name!r}"
            raise ConfigError(problems, where=where)

    def _storage_text(self) -> str:
        url = self.storage_url or self.spec.storage
        return redact_url(url) if url else str(self.study_dir / JOURNAL_FILE)

    def _enqueue_grid(self) -> None:
        """Enqueue every (grid point, sample) not yet in storage, as a trial with fixed params."""
        from optuna.trial import TrialState

        space = self.plan.space
        if not space.grid:
            return
        seen = set()
        for t in self.study.get_trials(deepcopy=False):
            if "grid_index" in t.user_attrs:
                seen.add((t.user_attrs["grid_index"], t.user_attrs.get("sample_index", 0)))
        points = space.grid_points()
        trials = self.study.get_trials(deepcopy=False)
        budget = self.plan.total_trials - sum(1 for t in trials if t.state != TrialState.WAITING)
        waiting = sum(1 for t in trials if t.state == TrialState.WAITING)
        for sample in range(self.spec.num_samples):
            for index, point in enumerate(points):
                if (index, sample) in seen:
                    continue
                if waiting >= budget:
                    return
                self.study.enqueue_trial(encode_point(space, point), user_attrs={"grid_index": index, "sample_index": sample})
                waiting += 1

    def _wait_for_creator(self) -> None:
        """A worker joining a shared study waits (up to ``BUDGET_WAIT_S``) until its creator has stored
        the study's search space and enqueued its budget, so that the space check sees the stored one."""
        deadline = time.monotonic() + BUDGET_WAIT_S
        while BUDGET_ATTR not in self.study.user_attrs and time.monotonic() < deadline:
            time.sleep(0.5)

    def _enqueue_budget(self, created: bool) -> None:
        """Shared storage: the whole budget as WAITING trials, enqueued once (by the creator).

        Grid points carry their params; the other trials are empty, and the
        sampler fills them when a worker takes them. A joining worker waits
        (up to ``BUDGET_WAIT_S``) for the creator to finish enqueuing; if the
        creator died meanwhile, it enqueues what is missing itself.
        """
        if not created:
            budget = self.study.user_attrs.get(BUDGET_ATTR)  # _wait_for_creator waited for it
            if budget is not None:
                if budget != self.plan.total_trials:
                    logger.warning("study %r has a budget of %s trials, set by the worker that created it (this "
                                   "worker's n_trials %d is not used)", self.plan.name, budget, self.plan.total_trials)
                return
        self._enqueue_grid()
        trials = self.study.get_trials(deepcopy=False)
        slots = sum(1 for t in trials if "failed_trial" not in t.system_attrs)  # a retry takes its trial's slot
        for _ in range(self.plan.total_trials - slots):
            self.study.enqueue_trial({})
        self.study.set_user_attr(BUDGET_ATTR, self.plan.total_trials)

    def _find_resumable(self) -> None:
        from optuna.trial import TrialState

        trials = self.study.get_trials(deepcopy=False)
        self._started_total = sum(1 for t in trials if t.state != TrialState.WAITING)
        for t in trials:
            # holding the study's lock, no other orchestrator runs it: every RUNNING trial was interrupted
            # (its owner's pid or heartbeat need not be checked: one on another machine would wait for it)
            if t.state == TrialState.RUNNING and (self.lock is not None or not owner_alive(
                    t.user_attrs.get("owner"), self.run_id, t.user_attrs.get("heartbeat"))):
                self._resumable.append(t)

    # -- the loop -------------------------------------------------------------------------
    def _open_tracking(self, created: bool = True) -> None:
        """The study's MLflow experiment and parent run, recorded by a tracking process of its own.

        In shared storage only the worker that created the study creates the
        parent run; the others wait for it to appear, so the study has one.
        """
        if not self.spec.tracking or os.environ.get("RLTUNE_TRACKING", "1") == "0":
            return
        from rltune.tracking._process import TrackingProcess

        self.tracker = TrackingProcess(
            self.spec.tracking_uri,
            self.study_dir.parent,
            self.plan.name,
            self.plan.sampler_name,
            self.plan.pruner_name,
            study_params={"trainable": self.plan.trainable.name, "metric": self.spec.metric, "mode": self.spec.mode},
            log_path=self.study_dir / TRACKING_LOG,
            defaults_of=self.plan.trainable.ref if self.plan.trainable.kind == "trainer" else None,
            create_parent=created or not self.shared,
            study_dir=None if self.shared else self.study_dir,  # one orchestrator: reconciled with its trial dirs
            trial_options={"keep_checkpoints_num": self.spec.keep_checkpoints_num, "metric": self.spec.metric,
                           "mode": self.spec.mode},
        )
        if not created:
            self.tracker.reconcile(self.study, finished_only=True)  # what a killed run left unrecorded

    def _close_tracking(self) -> None:
        if self.tracker is None:
            return
        self.tracker.reconcile(self.study)
        self.tracker.refresh_study_plots(self.study)
        self.tracker.close(interrupted=self.interrupted)

    def run(self) -> None:
        """Run trials until the study has its trials (or its timeout), or until interrupted."""
        previous = self._install_signal_handlers()
        try:
            while True:
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
                        break
                    time.sleep(0.2)
                ready = wait([a.conn for a in self.active if a.conn is not None], timeout=0.2) if self.active else []
                for conn in ready:
                    active = next((a for a in self.active if a.conn is conn), None)
                    if active is not None:
                        self._guarded(active, self._drain)
                for active in list(self.active):
                    self._guarded(active, self._check_process)
                self._heartbeat()
                if self.tracker is not None:
                    self.tracker.poll()
                if self.display is not None:
                    self.display.refresh(self)
        finally:
            if self.active:  # an exception in the loop itself: do not leave trial processes behind
                self._kill_all()
            for pending in self._pending:  # asked but never started: left for resume
                self._release(pending)
            self._restore_signal_handlers(previous)
            try:
                self._close_tracking()
            except Exception:  # the storage is gone (plots need the trials): the tracking still closes
                logger.debug("final plots skipped", exc_info=True)
                if self.tracker is not None:
                    self.tracker.close(interrupted=self.interrupted)
        if self.spec_error is not None:
            raise self.spec_error

    def _wait_for_others(self) -> bool:
        """Shared storage, nothing to run here: whether to wait, because other workers still run trials.

        One of them may be lost: its trials then go stale and come back as
        WAITING retries. An idle worker keeps checking until no trial of the
        study is running or waiting (or the study's timeout passed).
        """
        if not self.shared or self.stopping_since is not None or self.spec_error is not None:
            return False
        if self.spec.timeout_s is not None and time.monotonic() - self._start_time > self.spec.timeout_s:
            return False
        now = time.monotonic()
        if now - self._last_shared_poll < SHARED_POLL_S:
            return True
        self._last_shared_poll = now
        self._fail_stale_trials()
        from optuna.trial import TrialState

        return bool(self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING, TrialState.WAITING)))

    def _fail_stale_trials(self) -> None:
        """Fail the trials of lost workers (Optuna's heartbeat); Optuna's retry callback enqueues them again."""
        import optuna

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            optuna.storages.fail_stale_trials(self.study)

    def _heartbeat(self) -> None:
        """Every heartbeat: Optuna's heartbeat of each running trial (shared storage), or its ``heartbeat`` attr."""
        if self.shared:
            now = time.monotonic()
            if now - self._last_heartbeat < self.spec.heartbeat_interval_s:
                return
            self._last_heartbeat = now
            for a in [*self.active, *self._pending]:  # a pending trial is RUNNING in storage too
                self.storage.record_heartbeat(a.trial._trial_id)
                self._guarded(a, lambda t: t.trial.set_user_attr("heartbeat", time.time()))  # for `rltune show`
            self._fail_stale_trials()
            return
        now = time.time()
        if now - self._last_heartbeat < HEARTBEAT_S:
            return
        self._last_heartbeat = now
        for a in self.active:
            a.trial.set_user_attr("heartbeat", now)

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
        if self.display is not None:
            self.display.message(
                f"{why}: {len(self.active)} running trial(s) checkpoint and stop after their current iteration "
                "(Ctrl-C again to stop them at once)" if self.active else f"{why}: stopping"
            )

    def _kill_all(self) -> None:
        for a in list(self.active):
            self._kill(a)
            a.outcome, a.reason = "interrupted", "killed"
            try:
                self._finish_interrupted(a)
            except Exception:  # noqa: BLE001 - the storage failed: the trial stays RUNNING, resumable all the same
                logger.debug("trial %d: its interruption was not recorded", a.number, exc_info=True)
                self._retire(a)

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
        if not self._cpu_note and self.display is not None:
            self._cpu_note = True
            self.display.message(
                f"n_jobs is {self._limit()}, but {self.cpu_count} CPUs hold {len(self.active)} trial(s) of "
                f"{cpus} CPU(s) (1 + num_workers) at a time; --max-concurrent N overrides the CPU budget"
            )

    def _fill(self) -> None:
        while len(self.active) < self._limit():
            if not self._pending:
                # ask Optuna only when a trial can start now (so that the sampler sees every finished trial)
                if self.active and self.max_concurrent is None and (
                    sum(a.cpus for a in self.active) + self.plan.cpus_per_trial(self.plan.config) > self.cpu_count
                ):
                    self._note_cpus(self.plan.cpus_per_trial(self.plan.config))
                    return
                candidate = self._next_trial()
                if candidate is None:
                    return
                self._pending.append(candidate)
            if not self._fits(self._pending[0]):
                return
            self._launch(self._pending.pop(0))

    def _next_trial(self) -> ActiveTrial | None:
        import optuna

        if self.spec_error is not None:
            return None
        while self._resumable:
            frozen = self._resumable.pop(0)
            trial = optuna.trial.Trial(self.study, frozen._trial_id)
            try:
                resumed = self._prepare(trial, resumed=frozen)
            except ValueError as exc:  # the study's search space changed since the trial started
                error = (f"cannot resume trial {frozen.number}: its params {frozen.params} do not fit the study's "
                         f"search space any more ({exc})")
                trial.set_user_attr("error", error)
                self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
                if self.display is not None:
                    self.display.message(error)
                continue
            if not self._complete_if_stopped(resumed):
                return resumed
        if self.spec.timeout_s is not None and time.monotonic() - self._start_time > self.spec.timeout_s:
            return None
        if self.shared:
            trial = pop_waiting_trial(self.study)
            if trial is None:
                return None
            self._started_total += 1
            self.storage.record_heartbeat(trial._trial_id)
            frozen = self.storage.get_trial(trial._trial_id)
            return self._prepare(trial, retry=frozen if "failed_trial" in frozen.system_attrs else None)
        if self._started_total >= self.plan.total_trials:
            return None
        trial = self.study.ask()
        self._started_total += 1
        return self._prepare(trial)

    def _complete_if_stopped(self, a: ActiveTrial) -> bool:
        """A resumed trial whose last recorded result met ``stop`` is COMPLETE with it, not trained once more.

        The orchestrator died after the trial reported that result (and saved
        its checkpoint) but before it told Optuna. With ``checkpoint_at_end``
        the trial must have its checkpoint at that iteration; without it, it
        trains to it again. True if the trial was completed here.
        """
        last = _last_result(a.trial_dir)
        if last is None or not a.stop:
            return False
        try:
            reason = a.stop.check(last)
        except ConfigError:  # a stop key the results lack: the trial's run reports it
            return False
        value = finite(lookup(last, self.spec.metric))
        step = last.get("training_iteration")
        if reason is None or value is None or not isinstance(step, int):
            return False
        found = latest_checkpoint(a.trial_dir)
        if self.spec.checkpoint_at_end and (found is None or found[0] != step):
            return False
        if found is not None:
            a.checkpoint_iteration, a.checkpoint = found
        self._backfill(a, upto=step)
        a.last_result, a.iteration = last, step
        self.results[a.number] = last
        a.reason = f"{reason}, met before the study was interrupted"
        self._record_progress(a)
        self._tell(a, "COMPLETE", value)
        return True

    def _prepare(self, trial: Any, resumed: Any = None, retry: Any = None) -> ActiveTrial:
        """An ActiveTrial for ``trial``: a new one, one ``resumed`` in place, or a ``retry`` of a stale trial.

        ``resumed``, ``retry``: the trial's FrozenTrial.
        """
        number = trial.number
        trial.set_user_attr("owner", make_owner(self.run_id))
        with warnings.catch_warnings():
            # a resumed trial keeps the values it drew, even if the study file's ranges changed since
            warnings.filterwarnings("ignore", message="Inconsistent parameter values", category=RuntimeWarning)
            values = suggest(trial, self.plan.space)
        config = resolve_config(self.plan.config, self.plan.space, values)
        previous = retry.user_attrs if retry is not None else {}  # the stale trial's, copied by Optuna's callback
        if isinstance(previous.get("seed"), int) and self.plan.trainable.kind == "trainer" and config.get("seed") is None:
            config["seed"] = previous["seed"]
        seed = previous["seed"] if isinstance(previous.get("seed"), int) else self._seed(number, config)
        trial_dir = self.study_dir / f"trial_{number:05d}"
        trial_dir.mkdir(parents=True, exist_ok=True)
        if resumed is None or "trial_dir" not in resumed.user_attrs:  # new, or asked just before a kill
            trial.set_user_attr("config", json_safe(config))
            trial.set_user_attr("seed", seed)
            trial.set_user_attr("trial_dir", str(trial_dir))
            (trial_dir / PARAMS_FILE).write_text(json.dumps(json_safe({
                "trial": number, "seed": seed, "params": values, "config": config}), indent=2, sort_keys=True) + "\n")
        self.configs[number] = config
        active = ActiveTrial(trial, number, values, config, seed, trial_dir, self.plan.cpus_per_trial(config),
                             StopCriteria(self.spec.stop, where="stop"))
        if self.tracker is not None:
            active.tracking = self.tracker.open_trial(
                number, {**config, "seed": seed}, values,
                keep_checkpoints_num=self.spec.keep_checkpoints_num, metric=self.spec.metric, mode=self.spec.mode,
            )
        if resumed is not None:
            active.failures = int(resumed.user_attrs.get("num_failures", 0))
            active.reported_steps = set(resumed.intermediate_values)
            if isinstance(resumed.user_attrs.get("last_result"), dict):
                active.last_result = resumed.user_attrs["last_result"]
        if retry is not None:
            self._continue_from(active, retry)
        return active

    def _continue_from(self, a: ActiveTrial, retry: Any) -> None:
        """A retried stale trial starts from its predecessor's latest checkpoint, with its results so far."""
        previous = retry.user_attrs
        history = retry.system_attrs.get("retry_history") or []
        a.reported_steps = set(retry.intermediate_values)  # inherited from the stale trial
        old_dir = Path(previous["trial_dir"]) if isinstance(previous.get("trial_dir"), str) else None
        found = latest_checkpoint(old_dir) if old_dir is not None and old_dir.is_dir() else None
        inherited = previous.get("checkpoint")
        if found is None and isinstance(inherited, str) and Path(inherited).is_dir():
            # a retry that died before its own first checkpoint: the attr still names an earlier one
            old_dir = Path(inherited).parent
            found = (_checkpoint_iteration(inherited), inherited)
        if found is None or old_dir is None:
            return
        a.checkpoint_iteration, a.checkpoint = found
        old_results = old_dir / "result.json"
        if old_results.exists() and not (a.trial_dir / "result.json").exists():
            (a.trial_dir / "result.json").write_bytes(old_results.read_bytes())  # truncated to the checkpoint at launch
        a.trial.set_user_attr("retry_of", history[-1] if history else None)
        if self.display is not None:
            self.display.message(f"trial {a.number} retries stale trial {history[-1] if history else '?'} "
                                 f"from its checkpoint at iteration {a.checkpoint_iteration}")

    def _seed(self, number: int, config: dict[str, Any]) -> int:
        base = self.spec.seed if self.spec.seed is not None else 0
        if self.plan.trainable.kind == "trainer":
            if config.get("seed") is None:
                config["seed"] = base + number
            return config["seed"]
        given = config.get("seed")
        return given if isinstance(given, int) and not isinstance(given, bool) else base + number

    def _launch(self, a: ActiveTrial) -> None:
        """Start (or restart) the trial's process, from its latest checkpoint if it has one."""
        found = latest_checkpoint(a.trial_dir)
        if found is not None:
            a.checkpoint_iteration, a.checkpoint = found
        a.iteration = a.checkpoint_iteration
        if a.checkpoint:
            self._backfill(a)
        init = {
            "kind": self.plan.trainable.kind,
            "ref": self.plan.trainable.ref,
            "config": a.config,
            "trial_dir": str(a.trial_dir),
            "trial_number": a.number,
            "seed": a.seed,
            "restore": a.checkpoint,
            "start_iteration": a.checkpoint_iteration,
            "checkpoint_freq": self.spec.checkpoint_freq,
            "keep_checkpoints_num": self.spec.keep_checkpoints_num,
            "env_registrations": collect_env_registrations(
                a.config.get("env"), (a.config.get("evaluation_config") or {}).get("env")
            ),
        }
        try:
            payload = cloudpickle.dumps(init)
        except Exception as exc:  # e.g. a register_env creator holding a lock or an open socket
            raise ConfigError(
                f"trial {a.number}: its config or the creator of env {a.config.get('env')!r} cannot be sent to "
                f"the trial process ({type(exc).__name__}: {exc})"
            ) from None
        parent_sock, child_sock = socket.socketpair()
        child_fd = child_sock.fileno()
        with open(a.trial_dir / OUTPUT_FILE, "ab") as out:
            a.proc = subprocess.Popen(
                [sys.executable, "-c",
                 f"from rltune.orchestrator._trial_process import trial_entry; trial_entry({child_fd})"],
                pass_fds=(child_fd,),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # Ctrl-C reaches the orchestrator only; it stops the trials
                env=dict(os.environ, RLTUNE_TRIAL_NUMBER=str(a.number), PYTHONUNBUFFERED="1"),
            )
        child_sock.close()
        a.conn = Connection(parent_sock.detach())
        a.attempt_start = time.monotonic()
        a.outcome = a.reason = None
        try:
            a.conn.send_bytes(pickle.dumps(list(sys.path)))
            a.conn.send_bytes(payload)
        except (BrokenPipeError, OSError):
            pass  # the process died at once: seen as a crash
        if a not in self.active:
            self.active.append(a)
        if self.display is not None:
            self.display.trial_started(a)

    def _backfill(self, a: ActiveTrial, upto: int | None = None) -> None:
        """Report to Optuna the results up to the checkpoint (or ``upto``) that it never got (the orchestrator was killed)."""
        path = a.trial_dir / "result.json"
        if not path.exists():
            return
        upto = a.checkpoint_iteration if upto is None else upto
        for line in path.read_text().splitlines():
            try:
                result = json.loads(line)
                step = int(result["training_iteration"])
            except (ValueError, KeyError, TypeError):
                continue
            value = finite(lookup(result, self.spec.metric))
            if step <= upto and step not in a.reported_steps and value is not None:
                a.trial.report(value, step=step)
                a.reported_steps.add(step)
            if step == upto:
                a.last_result = result

    # -- messages -------------------------------------------------------------------------
    def _drain(self, a: ActiveTrial) -> None:
        while a.conn is not None and not a.finished:
            try:
                if not a.conn.poll():
                    return
                message = pickle.loads(a.conn.recv_bytes())
            except (EOFError, OSError):
                self._crashed(a)
                return
            except Exception as exc:  # a result that does not unpickle here
                self._failed(a, f"a message of the trial could not be read: {exc!r}")
                return
            kind = message[0]
            if kind == "result":
                self._on_result(a, message[1])
            elif kind == "checkpoint":
                a.checkpoint, a.checkpoint_iteration = message[1], message[2]
                a.trial.set_user_attr("checkpoint", a.checkpoint)
                if a.tracking is not None:
                    a.tracking.log_checkpoint(a.checkpoint)
            elif kind == "done":
                self._done(a)
            elif kind == "error":
                self._failed(a, message[1])

    def _on_result(self, a: ActiveTrial, result: dict[str, Any]) -> None:
        if a.tracking is not None:
            a.tracking.log_result(result)
        a.last_result = result
        self.results[a.number] = result
        a.iteration = int(result.get("training_iteration", a.iteration + 1))
        decision: tuple[Any, ...] = ("continue",)
        metric = lookup(result, self.spec.metric)
        problem = None
        if metric is _MISSING:
            import difflib

            from rltune.orchestrator._stop import flatten_keys

            close = difflib.get_close_matches(self.spec.metric, flatten_keys(result), n=1, cutoff=0.5)
            hint = f"; did you mean {close[0]!r}?" if close else f" (keys: {', '.join(sorted(flatten_keys(result))[:12])})"
            problem = ConfigError(f"metric: {self.spec.metric!r} is not a key of the trial's results{hint}", where="study")
        reason = None
        if problem is None:
            try:
                reason = a.stop.check(result)
            except ConfigError as exc:
                problem = exc
        if problem is not None:
            self.spec_error = problem
            self._send(a, ("stop", "invalid study", False))
            a.outcome, a.reason = "error", str(problem)
            if self.stopping_since is None:
                self._begin_stop("invalid study")
            return
        value = finite(metric)
        if value is not None and a.iteration not in a.reported_steps:
            a.trial.report(value, step=a.iteration)
            a.reported_steps.add(a.iteration)
        if self.stopping_since is not None:
            decision = ("stop", "interrupted", True)
            a.outcome, a.reason = "interrupted", "interrupted"
        elif reason is not None:
            decision = ("stop", str(reason), self.spec.checkpoint_at_end)
            a.outcome, a.reason = "complete", str(reason)
        elif self.plan.pruner_name != "none" and value is not None and a.trial.should_prune():
            decision = ("stop", "pruned", True)
            a.outcome, a.reason = "pruned", f"pruned at iteration {a.iteration}"
        self._send(a, decision)
        if self.display is not None:
            self.display.trial_result(a)

    def _send(self, a: ActiveTrial, decision: tuple[Any, ...]) -> None:
        try:
            a.conn.send_bytes(pickle.dumps(decision))
        except (BrokenPipeError, OSError):
            pass  # seen as a crash when the socket is read

    def _done(self, a: ActiveTrial) -> None:
        """The trainable returned (or stopped when told to): record the trial's end."""
        self._reap(a)
        if a.outcome == "error":
            self._tell_fail(a, a.reason or "invalid study")
            return
        if a.outcome == "interrupted":
            self._finish_interrupted(a)
            return
        self._record_progress(a)
        if a.outcome == "pruned":
            self._tell(a, "PRUNED", None)
            return
        if a.last_result is None:
            self._tell_fail(a, "the trainable returned without reporting a result (call reporter(**result))")
            return
        value = finite(lookup(a.last_result, self.spec.metric))
        if value is None:
            self._tell_fail(a, f"metric {self.spec.metric!r} is {lookup(a.last_result, self.spec.metric)!r} "
                               "in the last result (not a finite number)")
            return
        a.reason = a.reason or "returned"
        self._tell(a, "COMPLETE", value)

    def _record_progress(self, a: ActiveTrial) -> None:
        if a.last_result is not None:
            a.trial.set_user_attr("last_result", _storable(a.last_result))
        if a.checkpoint:
            a.trial.set_user_attr("checkpoint", a.checkpoint)

    def _tell(self, a: ActiveTrial, state: str, value: float | None) -> None:
        from optuna.trial import TrialState

        import optuna

        self._retire(a)
        try:
            if state == "COMPLETE":
                self.study.tell(a.trial, value)
            else:
                self.study.tell(a.trial, state=getattr(TrialState, state))
        except optuna.exceptions.UpdateFinishedTrialError:
            self._taken_over(a)  # shared storage: failed as stale by another worker, retried there
            return
        self.ended.append(TrialEnd(a.number, state, value, a.reason))
        self._track_end(a, state)
        if self.display is not None:
            self.display.trial_ended(a, state, value)

    def _track_end(self, a: ActiveTrial, state: str) -> None:
        """Files, learning curve, policy model (trainers) and the run's end state, in the trial's MLflow run."""
        if a.tracking is None:
            return
        a.tracking.log_files(a.trial_dir / PARAMS_FILE, a.trial_dir / "result.json", a.trial_dir / ERROR_FILE)
        a.tracking.log_learning_curve()
        if state != "FAIL" and a.checkpoint and self.plan.trainable.kind == "trainer":
            a.tracking.log_policy_model(a.checkpoint)
        error = a.trial.user_attrs.get("error") if state == "FAIL" else None
        self.tracker.end_trial(a.tracking, state, reason=a.reason, error=error)
        if state == "COMPLETE":
            best = self.study.best_trial
            self.tracker.update_best(best.number, best.value, best.params)
        self.tracker.refresh_study_plots(self.study, final=False)

    def _tell_fail(self, a: ActiveTrial, error: str) -> None:
        self._record_progress(a)
        a.trial.set_user_attr("error", error[-8000:])
        a.reason = error.strip().splitlines()[-1] if error.strip() else "failed"
        self._tell(a, "FAIL", None)

    def _finish_interrupted(self, a: ActiveTrial) -> None:
        """Leave the trial RUNNING in storage, resumable from its latest checkpoint."""
        self._reap(a)
        self._record_progress(a)
        a.trial.set_user_attr("interrupted", True)
        self._retire(a)
        if a.tracking is not None:
            self.tracker.end_trial(a.tracking, "INTERRUPTED", reason=a.reason)
        self.ended.append(TrialEnd(a.number, "INTERRUPTED", None, a.reason))
        if self.display is not None:
            self.display.trial_ended(a, "INTERRUPTED", None)

    def _release(self, a: ActiveTrial) -> None:
        """A trial asked but never started stays RUNNING; mark it so that resume takes it."""
        try:
            a.trial.set_user_attr("interrupted", True)
            a.trial.set_user_attr("owner", None)
        except Exception:  # storage errors at shutdown must not hide the original one
            logger.debug("could not release trial %d", a.number, exc_info=True)

    def _retire(self, a: ActiveTrial) -> None:
        a.finished = True
        if a in self.active:
            self.active.remove(a)
        if a.conn is not None:
            try:
                a.conn.close()
            except OSError:
                pass
            a.conn = None

    # -- failures -------------------------------------------------------------------------
    def _failed(self, a: ActiveTrial, error: str) -> None:
        """The trainable raised, the process crashed or timed out: retry from the checkpoint, or FAIL."""
        self._reap(a)
        a.failures += 1
        with open(a.trial_dir / ERROR_FILE, "a") as f:
            f.write(f"--- trial {a.number}, attempt {a.failures}, {time.strftime('%Y-%m-%d %H:%M:%S')} ---\n{error.rstrip()}\n")
        a.trial.set_user_attr("num_failures", a.failures)
        a.trial.set_user_attr("error", error[-8000:])
        if a.outcome == "interrupted":  # it failed while checkpointing for Ctrl-C: resumable all the same
            self._finish_interrupted(a)
            return
        if a.failures <= self.spec.max_failures and self.stopping_since is None:
            if a.conn is not None:
                try:
                    a.conn.close()
                except OSError:
                    pass
                a.conn = None
            if self.display is not None:
                self.display.message(f"trial {a.number} failed (attempt {a.failures}); restarting it "
                                     f"from {'its last checkpoint' if latest_checkpoint(a.trial_dir) else 'scratch'}")
            self._launch(a)
            return
        self._tell_fail(a, error)

    def _crashed(self, a: ActiveTrial) -> None:
        code = None
        if a.proc is not None:
            try:
                code = a.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._kill(a)
                code = a.proc.returncode
        if code is not None and code < 0:
            try:
                how = f"was killed by signal {signal.Signals(-code).name}"
            except ValueError:
                how = f"was killed by signal {-code}"
        else:
            how = f"exited with code {code}"
        self._failed(a, f"the trial process (pid {a.proc.pid if a.proc else '?'}) {how} without reporting an error "
                        f"(a crash, os._exit or a killed process)\n{_tail(a.trial_dir / OUTPUT_FILE)}")

    def _check_process(self, a: ActiveTrial) -> None:
        """Time out a hung trial; notice one whose process died without a word."""
        if a.finished or a.proc is None:
            return
        now = time.monotonic()
        timeout = self.spec.trial_timeout_s
        if timeout is not None and now - a.attempt_start > timeout:
            self._kill(a)
            self._failed(a, f"the trial timed out: it ran {now - a.attempt_start:.1f}s, longer than "
                            f"trial_timeout_s = {timeout:g}s; it was killed")
            return
        if a.proc.poll() is not None and a.conn is not None and not a.conn.poll():
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
            self._taken_over(a)

    def _taken_over(self, a: ActiveTrial) -> None:
        if a.proc is not None and a.proc.poll() is None:
            self._kill(a)
            self._reap(a)
        self._retire(a)
        message = (f"trial {a.number} was failed as stale by another worker (this worker's heartbeat lapsed) and "
                   "is retried there; what it did here after that is not recorded")
        logger.warning("%s", message)
        if self.display is not None:
            self.display.message(message)
        self.ended.append(TrialEnd(a.number, "FAIL", None, "stale: retried by another worker"))
        if a.tracking is not None:
            self.tracker.end_trial(a.tracking, "FAIL", reason="stale: its worker's heartbeat lapsed; retried "
                                                              "by another worker")

    def _kill(self, a: ActiveTrial) -> None:
        if a.proc is None:
            return
        if a.proc.poll() is None:
            try:
                os.killpg(a.proc.pid, signal.SIGKILL)  # the trial and its rollout workers
            except (ProcessLookupError, PermissionError):
                a.proc.kill()
        try:
            a.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            logger.warning("trial %d (pid %d) did not exit after SIGKILL", a.number, a.proc.pid)

    def _reap(self, a: ActiveTrial) -> None:
        if a.proc is None:
            return
        try:
            a.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._kill(a)


def _checkpoint_iteration(path: str) -> int:
    """The iteration in a checkpoint directory's name (``checkpoint_000012``), 0 if none."""
    digits = Path(path).name.rpartition("_")[2]
    return int(digits) if digits.isdigit() else 0


def _last_result(trial_dir: Path) -> dict[str, Any] | None:
    """The last complete line of the trial's ``result.json``, or None."""
    try:
        lines = (trial_dir / "result.json").read_text().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        try:
            result = json.loads(line)
        except ValueError:  # a line cut short by a kill
            continue
        return result if isinstance(result, dict) else None
    return None


def _storable(result: dict[str, Any]) -> dict[str, Any]:
    """A result as a trial user attr: JSON-safe, without the per-episode lists (hist_stats)."""
    slim = {k: v for k, v in result.items() if k != "hist_stats"}
    return _nan_to_none(json_safe(slim))


def _nan_to_none(value: Any) -> Any:
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, dict):
        return {k: _nan_to_none(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_nan_to_none(v) for v in value]
    return value


def _tail(path: Path, lines: int = 30) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return ""
    return (f"--- last lines of {path} ---\n" + "\n".join(text)) if text else ""


def decode_trial_config(plan: StudyPlan, frozen: Any) -> dict[str, Any]:
    """The config a stored trial ran with (its params decoded into the plan's config)."""
    values = decode_params(plan.space, frozen.params)
    config = resolve_config(plan.config, plan.space, values)
    seed = frozen.user_attrs.get("seed")
    if plan.trainable.kind == "trainer" and config.get("seed") is None and seed is not None:
        config["seed"] = seed
    return config

