"""Study setup: the study directory (and its lock), the storage, the study created, loaded or joined.

Checks that the study file fits the stored study (direction, search space),
enqueues grid points (and, on a shared storage, the whole budget) once, and
finds the interrupted trials to resume. :class:`StudySetup` is a part of
:class:`rltune.orchestrator._runner.StudyRunner`; its state lives there.
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



class StudySetup:
    """Opening a study for :class:`~rltune.orchestrator._runner.StudyRunner` (a part of it: its attributes are the runner's)."""

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
        except (ConfigError, DiskError):
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
        info = json.dumps({
            "name": self.plan.name,
            "storage": redact_url(self.spec.storage) if self.shared else None,  # as given, references kept
            "journal": None if self.shared else (
                os.path.expanduser(self.storage_url) if self.storage_url else JOURNAL_FILE),
            "trainable": self.plan.trainable.name,
            "metric": self.spec.metric,
            "mode": self.spec.mode,
            "tracking_uri": redact_url(self.spec.tracking_uri),
        }, indent=2) + "\n"
        with writing(self.study_dir / STUDY_FILE, "the study file"):
            (self.study_dir / STUDY_FILE).write_text(info)
        if self.shared:
            self._enqueue_budget(created)
        else:
            self._enqueue_grid()
            self._find_resumable()
            self._say_if_finished()
        return self.study

    def _say_if_finished(self) -> None:
        """A resume of a study that ran all its trials trains nothing: say so, and what it does instead."""
        if not self.resume or self._resumable or self._retries or self._started_total < self.plan.total_trials:
            return
        done = f"study {self.plan.name!r} has run all its {self.plan.total_trials} trial(s), so no trial is trained"
        if self.tracker is not None:
            self._say(f"{done}: this resume brings its MLflow runs up to date with the trial directories (what an "
                      "earlier run left unrecorded), then ends; a larger n_trials (--n-trials N) runs more trials")
        else:
            self._say(f"{done}; a larger n_trials (--n-trials N) runs more trials")

    def _claim_study_dir(self) -> None:
        """Make the study directory; on the embedded storage, take its lock (one orchestrator per study).

        A default name (no ``name`` given, no resume) never joins another
        study: it moves on to ``<name>_1``, ``<name>_2``... past existing and
        locked ones. A study on a shared RDB storage takes no lock: its
        workers share it by design.
        """
        self.storage_url = resolve_url(self.spec.storage)  # references expanded here only; never stored
        self.shared = is_shared(self.storage_url)
        self._check_study_dir()
        auto = not self.plan.name_given and not self.resume
        base, n = self.plan.name, 0
        while True:
            if not (auto and (self.study_dir / STUDY_FILE).exists()):
                ensure_dir(self.study_dir, "the study directory")
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

    def _check_study_dir(self) -> None:
        """Before any work: the study directory can be written, and, for ``resume=True``, exists.

        A ``--resume`` of a study whose directory is missing (a mistyped name
        or results directory) is refused rather than started afresh; a shared
        storage's workers join without it, and ``resume="auto"`` starts it.
        ``retry_failed`` is for the journal storage: refused on a shared one.
        """
        if self.retry_failed and self.shared:
            raise ConfigError("--retry-failed (retry_failed=True) retries the failed trials of a study on its journal "
                              "storage; on a shared storage, trials whose worker was lost are retried by the workers "
                              "themselves", where="study")
        hint = ("; make it writable to continue the study" if self.study_dir.is_dir() else
                "; choose another results directory (--results-dir / results_dir=...)")
        if self.resume is True and not self.shared and not self.study_dir.is_dir():
            raise DiskError(f"study {self.plan.name!r} does not exist: its directory {str(self.study_dir)!r} is missing "
                            "(--resume / resume=True continues a study that was started; check its name and results "
                            "directory, or start it without --resume)", path=self.study_dir, kind=MISSING)
        check_writable_dir(self.study_dir, "the study directory", hint=hint)

    def _say(self, text: str) -> None:
        logger.info("%s", text)
        self.observers.message(text)

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
        trials = [t for t in self.study.get_trials(deepcopy=False) if not is_retry(t)]  # a retry takes its trial's slot
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
        slots = sum(1 for t in trials if retry_of(t)[0] is None)  # a retry takes its trial's slot
        for _ in range(self.plan.total_trials - slots):
            self.study.enqueue_trial({})
        self.study.set_user_attr(BUDGET_ATTR, self.plan.total_trials)

    def _find_resumable(self) -> None:
        from optuna.trial import TrialState

        trials = self.study.get_trials(deepcopy=False)
        self._started_total = sum(1 for t in trials if t.state != TrialState.WAITING and not is_retry(t))
        self._retries = retries_to_start(trials, self.retry_failed)
        for t in trials:
            # holding the study's lock, no other orchestrator runs it: every RUNNING trial was interrupted
            # (its owner's pid or heartbeat need not be checked: one on another machine would wait for it)
            if t.state == TrialState.RUNNING and (self.lock is not None or not owner_alive(
                    t.user_attrs.get("owner"), self.run_id, t.user_attrs.get("heartbeat"))):
                self._resumable.append(t)

    # -- tracking --------------------------------------------------------------------------
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
        self.observers.insert(0, TrackingObserver(self.tracker, self))  # the runs end before the display says so
        if not created:
            self.tracker.reconcile(self.study, finished_only=True)  # what a killed run left unrecorded
