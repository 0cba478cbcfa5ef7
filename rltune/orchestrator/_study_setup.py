"""Study setup: the study directory (and its lock), the storage, the study created, loaded or joined.

Checks that the study file fits the stored study (direction, search space),
enqueues grid points (and, on a shared storage, the whole budget) once, and
finds the interrupted trials to resume. :class:`StudyOpener` is a collaborator of
:class:`rltune.orchestrator._runner.StudyRunner`: it works on the shared
:class:`~rltune.orchestrator._study_state.StudyState` and holds the lock and
the tracker itself.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Any

from rltune._disk import MISSING, check_writable_dir, ensure_dir, writing
from rltune._results_dir import default_results_dir
from rltune._secrets import redact_text, redact_url, resolve_url
from rltune.errors import ConfigError, DiskError, StudyLockedError
from rltune.orchestrator._child import prestart
from rltune.orchestrator._env_check import check_study_envs
from rltune.orchestrator._events import TrackingObserver
from rltune.orchestrator._optuna_compat import retry_of
from rltune.orchestrator._ownership import owner_alive
from rltune.orchestrator._reporter import json_safe
from rltune.orchestrator._retry import is_retry, retries_to_start
from rltune.orchestrator._search_space import encode_point
from rltune.orchestrator._storage import (
    BUDGET_ATTR,
    JOURNAL_FILE,
    is_shared,
    open_storage,
)
from rltune.orchestrator._study_lock import StudyLock, clear_stale_journal_lock
from rltune.orchestrator._study_state import StudyState

logger = logging.getLogger(__name__)

STUDY_FILE = "study.json"
TRACKING_LOG = "tracking.log"  # the tracking process's own output (MLflow's messages)
BUDGET_WAIT_S = 60.0  # a worker joining a shared study waits this long for its creator to enqueue the budget


def study_dir_of(results_dir: str | None, name: str) -> Path:
    root = Path(os.path.expanduser(results_dir)) if results_dir else default_results_dir()
    return root / name


def _quiet_optuna() -> None:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)



class StudyOpener:
    """Opens the study of a :class:`~rltune.orchestrator._runner.StudyRunner`: its directory, storage and tracking.

    It fills the shared :class:`~._study_state.StudyState` (``study``,
    ``storage``, ``shared``, ``study_dir``; a default name moved past a held
    study changes the plan's spec) and holds what is its own: the study
    directory's lock (:meth:`close` releases it), the MLflow ``tracker``,
    and what a resume found to run first (``resumable``, ``retries``,
    ``started_total``: the trials started before).
    """

    def __init__(self, state: StudyState, *, resume: bool | str = False, retry_failed: bool | str = False) -> None:
        self.state = state
        self.resume = resume  # True: the study must exist; "auto": continued if it exists, else started
        self.retry_failed = retry_failed  # resume: retry every FAILed trial, not only those that ran out of space
        # ("restart": from scratch, not from their last checkpoints)
        self.storage_url: str | None = None  # spec.storage with its ${...} references resolved (set by open_study)
        self.lock: StudyLock | None = None  # the study directory's lock (embedded storage)
        self.tracker: Any = None  # a TrackingProcess when the study is recorded in MLflow
        self.resumable: list[Any] = []  # interrupted trials (FrozenTrial), continued first
        self.retries: list[Any] = []  # failed trials to retry (or their retries, created but not started)
        self.started_total = 0  # trials of the study started so far (a retry takes its trial's slot)

    def open_study(self) -> Any:
        """Create or load the study in its storage; in shared storage, join it as one more worker."""
        _quiet_optuna()
        self._claim_study_dir()
        prestart(self.state.plan.trainable.kind)  # the trials' warm template imports meanwhile (part "fast")
        try:
            return self._open_study()
        except BaseException:
            self.close()
            raise

    def _open_study(self) -> Any:
        """open_study in the claimed directory: the study's envs checked once, then its storage opened."""
        if self.state.plan.trainable.kind == "trainer":  # before any trial (and before a new study is stored)
            check_study_envs(self.state.plan)
        try:
            self.state.storage = open_storage(self.storage_url, self.state.study_dir,
                                        heartbeat_interval_s=self.state.spec.heartbeat_interval_s if self.state.shared else None,
                                        grace_s=self.state.spec.heartbeat_grace_s)
            created = self._create_or_load()
        except (ConfigError, DiskError):
            raise
        except Exception as exc:  # a bad URL, an unreachable server, a missing driver
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            first = redact_text(first, self.storage_url, self.state.spec.storage)
            hint = ("; install the driver: pip install 'rltune[postgres]'"
                    if isinstance(exc, ModuleNotFoundError) and "psycopg" in str(exc) else "")
            raise ConfigError(f"cannot open the Optuna storage {self._storage_text()!r}: {type(exc).__name__}: "
                              f"{first}{hint}", where="storage") from None
        if created:
            self.state.study.set_user_attr("rltune", json_safe({
                "trainable": self.state.plan.trainable.name,
                "metric": self.state.spec.metric,
                "mode": self.state.spec.mode,
                "search_alg": self.state.plan.sampler_name,
                "scheduler": self.state.plan.pruner_name,
                "tracking_uri": redact_url(self.state.spec.tracking_uri),
                "study_dir": str(self.state.study_dir),
                "space": self._space_signature(),
            }))
        else:
            if self.state.shared:
                self._wait_for_creator()
            stored = [d.name.lower() for d in self.state.study.directions]
            if stored != self.state.plan.directions:
                raise ConfigError(
                    f"study {self.state.plan.name!r} in storage maximizes/minimizes differently "
                    f"({', '.join(d.upper() for d in stored)}) than mode {self.state.spec.mode!r}",
                    where="study",
                )
            self._check_space_unchanged()
        self._open_tracking(created)
        info = json.dumps({
            "name": self.state.plan.name,
            "storage": redact_url(self.state.spec.storage) if self.state.shared else None,  # as given, references kept
            "journal": None if self.state.shared else (
                os.path.expanduser(self.storage_url) if self.storage_url else JOURNAL_FILE),
            "trainable": self.state.plan.trainable.name,
            "metric": self.state.spec.metric,
            "mode": self.state.spec.mode,
            "tracking_uri": redact_url(self.state.spec.tracking_uri),
        }, indent=2) + "\n"
        with writing(self.state.study_dir / STUDY_FILE, "the study file"):
            (self.state.study_dir / STUDY_FILE).write_text(info)
        if self.state.shared:
            self._enqueue_budget(created)
        else:
            self._enqueue_grid()
            self._find_resumable()
            self._say_if_finished()
        return self.state.study

    def _say_if_finished(self) -> None:
        """A resume of a study that ran all its trials trains nothing: say so, and what it does instead."""
        if not self.resume or self.resumable or self.retries or self.started_total < self.state.plan.total_trials:
            return
        done = f"study {self.state.plan.name!r} has run all its {self.state.plan.total_trials} trial(s), so no trial is trained"
        if self.tracker is not None:
            self.state.say(f"{done}: this resume brings its MLflow runs up to date with the trial directories (what an "
                      "earlier run left unrecorded), then ends; a larger n_trials (--n-trials N) runs more trials")
        else:
            self.state.say(f"{done}; a larger n_trials (--n-trials N) runs more trials")

    def _claim_study_dir(self) -> None:
        """Make the study directory; on the embedded storage, take its lock (one orchestrator per study).

        A default name (no ``name`` given, no resume) never joins another
        study: it moves on to ``<name>_1``, ``<name>_2``... past existing and
        locked ones. A study on a shared RDB storage takes no lock: its
        workers share it by design.
        """
        self.storage_url = resolve_url(self.state.spec.storage)  # references expanded here only; never stored
        self.state.shared = is_shared(self.storage_url)
        self._check_study_dir()
        auto = not self.state.plan.name_given and not self.resume
        base, n = self.state.plan.name, 0
        while True:
            if not (auto and (self.state.study_dir / STUDY_FILE).exists()):
                ensure_dir(self.state.study_dir, "the study directory")
                if self.state.shared:
                    return
                try:
                    self.lock = StudyLock.acquire(self.state.study_dir, self.state.plan.name)
                    break
                except StudyLockedError:
                    if not auto:
                        raise
            n += 1
            self.state.plan.spec = self.state.spec.model_copy(update={"name": f"{base}_{n}"})
            self.state.study_dir = study_dir_of(self.state.spec.results_dir, self.state.plan.name)
        journal = Path(os.path.expanduser(self.storage_url)) if self.storage_url else self.state.study_dir / JOURNAL_FILE
        clear_stale_journal_lock(journal, own_journal=journal.parent.resolve() == self.state.study_dir.resolve(),
                                 say=self.state.say)

    def _check_study_dir(self) -> None:
        """Before any work: the study directory can be written, and, for ``resume=True``, exists.

        A ``--resume`` of a study whose directory is missing (a mistyped name
        or results directory) is refused rather than started afresh; a shared
        storage's workers join without it, and ``resume="auto"`` starts it.
        ``retry_failed`` is for the journal storage: refused on a shared one.
        """
        if self.retry_failed and self.state.shared:
            raise ConfigError("--retry-failed (retry_failed=True) retries the failed trials of a study on its journal "
                              "storage; on a shared storage, trials whose worker was lost are retried by the workers "
                              "themselves", where="study")
        hint = ("; make it writable to continue the study" if self.state.study_dir.is_dir() else
                "; choose another results directory (--results-dir / results_dir=...)")
        if self.resume is True and not self.state.shared and not self.state.study_dir.is_dir():
            raise DiskError(f"study {self.state.plan.name!r} does not exist: its directory {str(self.state.study_dir)!r} is missing "
                            "(--resume / resume=True continues a study that was started; check its name and results "
                            "directory, or start it without --resume)", path=self.state.study_dir, kind=MISSING)
        check_writable_dir(self.state.study_dir, "the study directory", hint=hint)

    def close(self) -> None:
        """Release the study directory's lock (the orchestrator is done with the study); idempotent."""
        if self.lock is not None:
            self.lock.release()

    def _create_or_load(self) -> bool:
        """Open ``self.state.study``; True if this call created it.

        Embedded storage: an existing study needs ``resume``. Shared storage:
        exactly one worker creates the study (Optuna's unique study name is
        the lock); the others join it.
        """
        import optuna

        if self.state.shared:
            offset = int(self.state.run_id[:8], 16)  # workers sample differently (random start-up trials included)
            try:
                self.state.study = optuna.create_study(storage=self.state.storage, sampler=self.state.plan.make_sampler(),
                                                 pruner=self.state.plan.make_pruner(), study_name=self.state.plan.name,
                                                 directions=self.state.plan.directions)
                return True
            except optuna.exceptions.DuplicatedStudyError:
                self.state.study = optuna.load_study(study_name=self.state.plan.name, storage=self.state.storage,
                                               sampler=self.state.plan.make_sampler(seed_offset=offset),
                                               pruner=self.state.plan.make_pruner())
                return False
        summaries = {s.study_name: s for s in optuna.get_all_study_summaries(self.state.storage, include_best_trial=False)}
        exists = self.state.plan.name in summaries
        if exists and not self.resume:
            raise ConfigError(
                f"study {self.state.plan.name!r} already exists in {self._storage_text()}; pass --resume "
                f"(tune.run(..., resume=True)) to continue it, or give another name (--name NAME)",
                where="study",
            )
        self.state.study = optuna.create_study(
            storage=self.state.storage,
            sampler=self.state.plan.make_sampler(seed_offset=summaries[self.state.plan.name].n_trials if exists else 0),
            pruner=self.state.plan.make_pruner(),
            study_name=self.state.plan.name,
            directions=self.state.plan.directions,
            load_if_exists=True,
        )
        return not exists

    def _space_signature(self) -> dict[str, str]:
        """The search space as text per parameter, stored with the study so that workers can compare theirs."""
        return {p.name: p.describe() for p in self.state.plan.space.params}

    def _check_space_unchanged(self) -> None:
        """The study file must fit the stored study: a clear error naming each parameter that differs.

        Optuna keeps one kind of distribution per parameter name, so an
        incompatible entry is an error on resume too. Workers joining a
        shared study must search exactly the space it was created with.
        """
        from optuna.distributions import check_distribution_compatibility

        from rltune.orchestrator._search_space import distribution

        stored: dict[str, Any] = {}
        for t in self.state.study.get_trials(deepcopy=False):
            for name, dist in t.distributions.items():
                stored.setdefault(name, dist)
        problems, named = [], set()
        stored_space = (self.state.study.user_attrs.get("rltune") or {}).get("space")
        if self.state.shared and isinstance(stored_space, dict):
            mine = self._space_signature()
            for name in sorted(set(stored_space) | set(mine)):
                if stored_space.get(name) != mine.get(name):
                    named.add(name)
                    problems.append(f"config.{name}: the study searches {stored_space.get(name) or 'no such entry'}, "
                                    f"but this study file has {mine.get(name) or 'no such entry'}; use the study's "
                                    "file, or start another study (--name NEW)")
        for p in self.state.plan.space.params:
            if p.name in stored and p.name not in named:
                try:
                    check_distribution_compatibility(stored[p.name], distribution(p))
                except ValueError as exc:
                    problems.append(f"config.{p.name}: the study's trials drew it from {stored[p.name]!r}, but it is "
                                    f"now {p.describe()} ({exc}); keep it, or start another study (--name NEW)")
        if problems:
            where = f"joining study {self.state.plan.name!r}" if self.state.shared else f"resume of study {self.state.plan.name!r}"
            raise ConfigError(problems, where=where)

    def _storage_text(self) -> str:
        url = self.storage_url or self.state.spec.storage
        return redact_url(url) if url else str(self.state.study_dir / JOURNAL_FILE)

    def _enqueue_grid(self) -> None:
        """Enqueue every (grid point, sample) not yet in storage, as a trial with fixed params."""
        from optuna.trial import TrialState

        space = self.state.plan.space
        if not space.grid:
            return
        seen = set()
        for t in self.state.study.get_trials(deepcopy=False):
            if "grid_index" in t.user_attrs:
                seen.add((t.user_attrs["grid_index"], t.user_attrs.get("sample_index", 0)))
        points = space.grid_points()
        trials = [t for t in self.state.study.get_trials(deepcopy=False) if not is_retry(t)]  # a retry takes its trial's slot
        budget = self.state.plan.total_trials - sum(1 for t in trials if t.state != TrialState.WAITING)
        waiting = sum(1 for t in trials if t.state == TrialState.WAITING)
        for sample in range(self.state.spec.num_samples):
            for index, point in enumerate(points):
                if (index, sample) in seen:
                    continue
                if waiting >= budget:
                    return
                self.state.study.enqueue_trial(encode_point(space, point), user_attrs={"grid_index": index, "sample_index": sample})
                waiting += 1

    def _wait_for_creator(self) -> None:
        """A worker joining a shared study waits (up to ``BUDGET_WAIT_S``) until its creator has stored
        the study's search space and enqueued its budget, so that the space check sees the stored one."""
        deadline = time.monotonic() + BUDGET_WAIT_S
        while BUDGET_ATTR not in self.state.study.user_attrs and time.monotonic() < deadline:
            time.sleep(0.5)

    def _enqueue_budget(self, created: bool) -> None:
        """Shared storage: the whole budget as WAITING trials, enqueued once (by the creator).

        Grid points carry their params; the other trials are empty, and the
        sampler fills them when a worker takes them. A joining worker waits
        (up to ``BUDGET_WAIT_S``) for the creator to finish enqueuing; if the
        creator died meanwhile, it enqueues what is missing itself.
        """
        if not created:
            budget = self.state.study.user_attrs.get(BUDGET_ATTR)  # _wait_for_creator waited for it
            if budget is not None:
                if budget != self.state.plan.total_trials:
                    logger.warning("study %r has a budget of %s trials, set by the worker that created it (this "
                                   "worker's n_trials %d is not used)", self.state.plan.name, budget, self.state.plan.total_trials)
                return
        self._enqueue_grid()
        trials = self.state.study.get_trials(deepcopy=False)
        slots = sum(1 for t in trials if retry_of(t)[0] is None)  # a retry takes its trial's slot
        for _ in range(self.state.plan.total_trials - slots):
            self.state.study.enqueue_trial({})
        self.state.study.set_user_attr(BUDGET_ATTR, self.state.plan.total_trials)

    def _find_resumable(self) -> None:
        from optuna.trial import TrialState

        trials = self.state.study.get_trials(deepcopy=False)
        self.started_total = sum(1 for t in trials if t.state != TrialState.WAITING and not is_retry(t))
        self.retries = retries_to_start(trials, self.retry_failed)
        for t in trials:
            # holding the study's lock, no other orchestrator runs it: every RUNNING trial was interrupted
            # (its owner's pid or heartbeat need not be checked: one on another machine would wait for it)
            if t.state == TrialState.RUNNING and (self.lock is not None or not owner_alive(
                    t.user_attrs.get("owner"), self.state.run_id, t.user_attrs.get("heartbeat"))):
                self.resumable.append(t)

    # -- tracking --------------------------------------------------------------------------
    def _open_tracking(self, created: bool = True) -> None:
        """The study's MLflow experiment and parent run, recorded by a tracking process of its own.

        In shared storage only the worker that created the study creates the
        parent run; the others wait for it to appear, so the study has one.
        """
        if not self.state.spec.tracking or os.environ.get("RLTUNE_TRACKING", "1") == "0":
            return
        from rltune.tracking._process import TrackingProcess

        self.tracker = TrackingProcess(
            self.state.spec.tracking_uri,
            self.state.study_dir.parent,
            self.state.plan.name,
            self.state.plan.sampler_name,
            self.state.plan.pruner_name,
            study_params={"trainable": self.state.plan.trainable.name, "metric": self.state.spec.metric, "mode": self.state.spec.mode},
            log_path=self.state.study_dir / TRACKING_LOG,
            defaults_of=self.state.plan.trainable.ref if self.state.plan.trainable.kind == "trainer" else None,
            create_parent=created or not self.state.shared,
            study_dir=None if self.state.shared else self.state.study_dir,  # one orchestrator: reconciled with its trial dirs
            trial_options={"keep_checkpoints_num": self.state.spec.keep_checkpoints_num, "metric": self.state.spec.metric,
                           "mode": self.state.spec.mode},
        )
        self.state.observers.insert(0, TrackingObserver(self.tracker, self.state))  # the runs end before the display says so
        if not created:
            self.tracker.reconcile(self.state.study, finished_only=True)  # what a killed run left unrecorded
