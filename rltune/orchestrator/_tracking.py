"""MLflow tracking of studies: one experiment and one parent run per study, one nested run per trial.

Two classes, one per process role, both over :class:`mlflow.MlflowClient`
with explicit run ids (never the fluent API's global active run):

- :class:`StudyTracker` lives in the orchestrator. It opens (or creates) the
  study's experiment and its parent run, starts and ends one nested run per
  trial, and keeps the parent run's summary up to date: the best trial, a
  CSV table of every trial and Optuna's plots as PNG.
- :class:`TrialTracker` writes into one trial's run: every numeric result
  entry at ``step = training_iteration`` (one batched call per iteration),
  checkpoints, files, a learning curve and the trained policy as an MLflow
  pyfunc model. It is built from a run id and a tracking URI, so it works in
  the trial's own process (``TrialTracker(**study_tracker.trial_tracker_args(run_id))``)
  as well as in the orchestrator (``study_tracker.open_trial(...)`` or
  ``study_tracker.trial(run_id)``, sharing the study tracker's client).

Threads: by default every call runs in the caller's thread. With
``StudyTracker(..., background=True)`` the study tracker and the trial
trackers it makes queue their MLflow calls on one tracking thread, run in
order, so the orchestrator's loop never waits on MLflow (opening a new
SQLite store takes seconds; a slow server more); what is uploaded later
(checkpoint directories, files, a policy exported from a checkpoint) is
snapshotted when the call is made. ``close()`` waits for the queue.

Store: ``tracking_uri`` if given, else ``$MLFLOW_TRACKING_URI``, else an
embedded SQLite store ``sqlite:///<results_dir>/mlflow.db`` with artifacts
under ``<results_dir>/mlartifacts/<study>/`` (no server needed);
``rltune ui`` (:func:`rltune.orchestrator._ui.run_ui`) browses it.

Layout in MLflow::

    experiment <study name>                 tags rltune.study, rltune.sampler, rltune.pruner
      run <study name> (parent)             tags rltune.role=study, rltune.best_trial, rltune.best_value, best.<param>
                                            metric best_value (step = trial number); artifacts trials.csv, plots/*.png
        run trial_00003 lr=0.001 ...        tags mlflow.parentRunId, rltune.trial, rltune.state, rltune.sampler, rltune.pruner
                                            params: the trial's config, dotted keys; metrics: results, '/' keys
                                            artifacts: checkpoints/<name>/, params.json, result.json, error.txt,
                                            plots/learning_curve.png, policy_model/ (pyfunc)

Invariants:

- Nothing here raises into training or into the study's loop. Every MLflow
  call is guarded: a failure is logged once per kind (a warning), counted,
  and described in ``unrecorded``; after a failure that looks like an
  unavailable store the tracker skips calls for a few seconds (growing up
  to a minute) instead of waiting on every call, and records what it
  skipped. A tracker that could not open its store tries again on its next
  call. Only a caller's programming error (an unknown trial state) raises.
- Resuming: the parent run is found again by its tags, a trial's run by its
  trial number, and both are set RUNNING again; params already logged are
  not logged again. A step is logged once per run: a trial restarted from
  a checkpoint does not log again the steps its run already has (MLflow
  would keep both values; the first stays, ``result.json`` has the latest).
- Reconciling (:meth:`StudyTracker.reconcile`): the trial directories hold
  the truth (``result.json``, ``checkpoint_*``, ``error.txt``) and Optuna
  the trials' states. Reconciling compares each trial's run with them and
  logs only what is missing: the steps the run lacks, the checkpoints on
  disk it lacks (and drops those the trial dropped, the best one kept),
  its end state, its files, learning curve and policy model. It is
  idempotent, so it repairs whatever a killed orchestrator left undone.
- Remote servers get short HTTP timeouts and few retries
  (``MLFLOW_HTTP_REQUEST_TIMEOUT`` = 10 s, ``MLFLOW_HTTP_REQUEST_MAX_RETRIES`` = 2,
  ``MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR`` = 1), set in the process before a
  client is created unless the user set them.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import logging
import math
import numbers
import os
import re
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FuturesTimeout
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, NamedTuple, Sequence, TypeVar

logger = logging.getLogger(__name__)

T = TypeVar("T")

DB_FILE = "mlflow.db"
ARTIFACTS_DIR = "mlartifacts"

# rltune trial states -> MLflow run statuses (the state itself is in the rltune.state tag)
RUN_STATUS = {
    "RUNNING": "RUNNING",
    "COMPLETE": "FINISHED",
    "PRUNED": "KILLED",
    "FAIL": "FAILED",
    "INTERRUPTED": "KILLED",  # Ctrl-C or a killed orchestrator: resumable, set RUNNING again on resume
}

# Short timeouts and few retries for remote servers: a dead server must not stall training.
HTTP_DEFAULTS = {
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "10",
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
}

TAG_ROLE = "rltune.role"
TAG_STUDY = "rltune.study"
TAG_TRIAL = "rltune.trial"
TAG_STATE = "rltune.state"
TAG_SAMPLER = "rltune.sampler"
TAG_PRUNER = "rltune.pruner"
TAG_PARENT = "mlflow.parentRunId"
TAG_TRUNCATED = "rltune.note.truncated_params"
# MLflow 3's UI opens an experiment on its runs table (not the GenAI overview) for this kind
EXPERIMENT_KIND = ("mlflow.experimentKind", "custom_model_development")

TAG_SYNCED = "rltune.reconciled"  # a digest of the trial directory and state a run was last reconciled with
STEP_KEY = "training_iteration"  # every result has it: its metric history says which steps a run holds
STAGING = ".mlflow-"  # in the names of the copies waiting for upload: ``.<name>.mlflow-<tag>-<random>``
_SKIP_RESULT_KEYS = frozenset({"config", "hist_stats"})  # config: not a metric; hist_stats: per-episode lists


# MLflow's limits (mlflow 2.12 to 3.x; tests check them against mlflow.utils.validation). Keys are
# shortened with these in the caller's thread, which must not import mlflow (background mode).
MAX_ENTITY_KEY_LENGTH = 250
MAX_TAG_VAL_LENGTH = 8000


class _Limits(NamedTuple):
    param_value: int
    tag_value: int
    key: int
    metrics_per_batch: int
    params_tags_per_batch: int
    entities_per_batch: int


@functools.lru_cache(maxsize=1)
def _limits() -> _Limits:
    """MLflow's limits as the installed mlflow states them (called where mlflow is imported anyway)."""
    defaults = _Limits(6000, MAX_TAG_VAL_LENGTH, MAX_ENTITY_KEY_LENGTH, 1000, 100, 1000)
    try:
        from mlflow.utils import validation as v
    except ImportError:  # pragma: no cover
        return defaults
    return _Limits(*(getattr(v, name, default) for name, default in zip(
        ("MAX_PARAM_VAL_LENGTH", "MAX_TAG_VAL_LENGTH", "MAX_ENTITY_KEY_LENGTH", "MAX_METRICS_PER_BATCH",
         "MAX_PARAMS_TAGS_PER_BATCH", "MAX_ENTITIES_PER_BATCH"), defaults)))


# -- where the store is ----------------------------------------------------------------------
def resolve_tracking_uri(tracking_uri: str | None, results_dir: str | os.PathLike[str]) -> str:
    """The tracking URI: ``tracking_uri``, else ``$MLFLOW_TRACKING_URI``, else ``sqlite:///<results_dir>/mlflow.db``.

    ``${NAME}`` / ``${file:PATH}`` references in ``tracking_uri`` are resolved
    here (see :mod:`rltune.orchestrator._secrets`); show the result only
    through ``redact_url``.
    """
    if tracking_uri:
        from rltune.orchestrator._secrets import resolve_url

        return str(resolve_url(str(tracking_uri), where="tracking_uri"))
    env = os.environ.get("MLFLOW_TRACKING_URI")
    if env:
        return env
    return f"sqlite:///{Path(os.path.expanduser(str(results_dir))).resolve() / DB_FILE}"


def artifact_root(results_dir: str | os.PathLike[str]) -> Path:
    """Where the embedded store keeps artifacts: ``<results_dir>/mlartifacts``."""
    return Path(os.path.expanduser(str(results_dir))).resolve() / ARTIFACTS_DIR


def is_remote(tracking_uri: str) -> bool:
    """Whether the store is a tracking server (HTTP), which holds its own artifact root."""
    return tracking_uri.startswith(("http://", "https://")) or tracking_uri.startswith("databricks")


def make_client(tracking_uri: str) -> Any:
    """An :class:`mlflow.MlflowClient` for ``tracking_uri``, with short HTTP timeouts for servers."""
    if is_remote(tracking_uri):
        for name, value in HTTP_DEFAULTS.items():
            os.environ.setdefault(name, value)
    elif tracking_uri.startswith("sqlite:///"):
        Path(tracking_uri[len("sqlite:///"):]).parent.mkdir(parents=True, exist_ok=True)
    from mlflow import MlflowClient

    return MlflowClient(tracking_uri=tracking_uri)


# -- flattening ------------------------------------------------------------------------------
_BAD_KEY_CHARS = re.compile(r"[^/\w.\- :]")


def clean_key(key: str, limit: int | None = None) -> str:
    """A metric/param/tag key MLflow accepts: odd characters as '_', no empty or '.'/'..' parts, at most 250 chars."""
    key = _BAD_KEY_CHARS.sub("_", key)
    parts = [p if p not in ("", ".", "..") else "_" for p in key.split("/")]
    key = "/".join(parts) or "_"
    limit = limit or MAX_ENTITY_KEY_LENGTH
    if len(key) > limit:
        import hashlib

        digest = hashlib.sha1(key.encode()).hexdigest()[:8]
        key = key[: limit - 9] + "-" + digest
    return key


def flatten_params(config: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """A nested config as ``{"model.fcnet_hiddens": "[64, 64]", ...}``: dotted keys, values as text.

    Lists are JSON, functions and classes ``module:qualname`` (as in params.json), an empty dict ``{}``.
    """
    from rltune.orchestrator._reporter import json_safe

    out: dict[str, str] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(flatten_params(value, name + "."))
            continue
        safe = json_safe(value)
        out[name] = safe if isinstance(safe, str) else json.dumps(safe, sort_keys=True, default=repr)
    return out


def _number(value: Any) -> float | None:
    """A finite float for bools (0/1), ints, floats and numpy scalars; None for anything else (NaN included)."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, numbers.Real):
        number = float(value)
        return number if math.isfinite(number) else None
    item = getattr(value, "item", None)  # numpy bool_ and 0-d arrays
    if callable(item) and getattr(value, "shape", None) == ():
        try:
            return _number(item())
        except (TypeError, ValueError):
            return None
    return None


def flatten_metrics(result: Mapping[str, Any], prefix: str = "") -> dict[str, float]:
    """The numeric leaves of a result as ``{"info/learner/default_policy/entropy": 0.69, ...}``.

    Bools are 0/1; NaN, infinities, strings, lists (``hist_stats``) and the
    ``config`` entry are left out.
    """
    out: dict[str, float] = {}
    for key, value in result.items():
        if not prefix and key in _SKIP_RESULT_KEYS:
            continue
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten_metrics(value, name + "/"))
            continue
        number = _number(value)
        if number is not None:
            out[clean_key(name)] = number
    return out


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_fmt(v) for v in value) + "]"
    return str(value)


def run_name(trial_number: int, key_params: Mapping[str, Any]) -> str:
    """``trial_00003 lr=0.0003 num_sgd_iter=10`` (at most 250 characters)."""
    parts = [f"trial_{trial_number:05d}"] + [f"{k.rsplit('.', 1)[-1]}={_fmt(v)}" for k, v in key_params.items()]
    return " ".join(parts)[:250]


# -- failures --------------------------------------------------------------------------------
_DATA_ERRORS = {"INVALID_PARAMETER_VALUE", "RESOURCE_ALREADY_EXISTS", "RESOURCE_DOES_NOT_EXIST", "BAD_REQUEST"}
MAX_UNRECORDED = 1000  # descriptions kept; the counts go on


class _Failures:
    """What could not be recorded: one warning per kind, counts, descriptions, and a pause after an outage.

    ``attempt(kind, what, fn)`` runs ``fn()``; on an exception it logs one
    warning per ``kind`` (later ones at DEBUG), counts it and appends
    ``what`` to ``unrecorded``. After a failure that is not a rejected value
    (the store or server is unavailable) calls are skipped for ``pause`` s
    (5 s, doubling up to 60 s) and recorded as skipped; a success resets it.
    """

    def __init__(self, owner: str) -> None:
        self.owner = owner
        self.unrecorded: list[str] = []
        self.counts: Counter[str] = Counter()
        self._warned: set[str] = set()
        self._down_until = 0.0
        self._pause = 0.0

    def attempt(self, kind: str, what: str, fn: Callable[[], T]) -> tuple[bool, T | None]:
        if time.monotonic() < self._down_until:
            self._record(kind, f"{what} (skipped: the tracking store was unavailable)")
            return False, None
        try:
            value = fn()
        except Exception as exc:  # noqa: BLE001 - tracking never raises into training
            self._failed(kind, what, exc)
            return False, None
        self._pause = 0.0
        return True, value

    def _failed(self, kind: str, what: str, exc: Exception) -> None:
        code = getattr(exc, "error_code", None)
        outage = code not in _DATA_ERRORS
        if outage:
            self._pause = min(60.0, self._pause * 2 if self._pause else 5.0)
            self._down_until = time.monotonic() + self._pause
        self._record(kind, what)
        from rltune.orchestrator._secrets import redact_text  # MLflow's messages name the URL, user:password@ too

        first_line = redact_text((str(exc).strip().splitlines() or [""])[0][:300])
        if kind not in self._warned:
            self._warned.add(kind)
            later = f"; tracking calls pause {self._pause:.0f} s" if outage else ""
            logger.warning("MLflow tracking (%s): could not record %s: %s: %s%s (further %r failures are "
                           "logged at DEBUG and listed in the tracker's unrecorded)",
                           self.owner, what, type(exc).__name__, first_line, later, kind)
        else:
            logger.debug("MLflow tracking (%s): could not record %s: %s", self.owner, what, redact_text(repr(exc)))

    def _record(self, kind: str, what: str) -> None:
        self.counts[kind] += 1
        if len(self.unrecorded) < MAX_UNRECORDED:
            self.unrecorded.append(what)

    def merge(self, unrecorded: list[str], counts: Mapping[str, int]) -> None:
        """Add what another process's failure log holds (the tracking process's, at its close)."""
        self.counts.update(counts)
        self.unrecorded.extend(unrecorded[:max(0, MAX_UNRECORDED - len(self.unrecorded))])

    def summary(self) -> str | None:
        """One line such as ``MLflow tracking (study 'x'): 12 call(s) not recorded (metrics x10, checkpoint x2)``; None when all went well."""
        if not self.counts:
            return None
        kinds = ", ".join(f"{k} x{n}" for k, n in self.counts.most_common())
        return f"MLflow tracking ({self.owner}): {sum(self.counts.values())} call(s) not recorded ({kinds})"


class _Shared:
    """What a study tracker shares with the trial trackers it makes: the client, the failure log, the thread.

    Inline mode (``executor`` None): every task runs in the caller's thread.
    Background mode: tasks run one at a time, in submission order, on one
    thread (``rltune-mlflow``), so the caller never waits on MLflow.
    """

    def __init__(self, tracking_uri: str, owner: str, background: bool) -> None:
        self.tracking_uri = tracking_uri
        self.failures = _Failures(owner)
        self.client: Any = None
        self.executor: ThreadPoolExecutor | None = (
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="rltune-mlflow") if background else None)

    @property
    def background(self) -> bool:
        return self.executor is not None

    def get_client(self) -> Any:
        if self.client is None:
            self.client = make_client(self.tracking_uri)
        return self.client

    def run(self, task: Callable[[], T], *, wait: bool = False) -> T | None:
        """Run ``task`` now (inline) or queue it (background); ``wait``: block for its result."""
        if self.executor is None or threading.current_thread().name.startswith("rltune-mlflow"):
            return _guarded(task)  # inline, also for a task that a queued task makes (reconciling)
        future = self.executor.submit(_guarded, task)
        return future.result() if wait else None

    def drain(self, timeout_s: float) -> None:
        """Background mode: wait for the queued tasks (at most ``timeout_s``), cancel the rest, go inline."""
        executor, self.executor = self.executor, None
        if executor is None:
            return
        try:
            executor.submit(lambda: None).result(timeout=timeout_s)
        except FuturesTimeout:
            self.failures._record("close", f"tracking calls still queued after {timeout_s:.0f} s (cancelled)")
            logger.warning("MLflow tracking (%s): calls still queued after %.0f s were cancelled",
                           self.failures.owner, timeout_s)
        executor.shutdown(wait=False, cancel_futures=True)


def _guarded(task: Callable[[], T]) -> T | None:
    """Tasks account for MLflow failures themselves; anything else escaping one is a bug, logged, never raised."""
    try:
        return task()
    except Exception:  # noqa: BLE001
        logger.exception("MLflow tracking: a tracking task failed unexpectedly")
        return None


class _Tracker:
    """The parts both trackers share: the client, the failure log and how tasks run."""

    def __init__(self, shared: _Shared) -> None:
        self._shared = shared

    @property
    def tracking_uri(self) -> str:
        return self._shared.tracking_uri

    @property
    def background(self) -> bool:
        """Whether MLflow calls run on the tracking thread (methods return before they are done)."""
        return self._shared.background

    @property
    def unrecorded(self) -> list[str]:
        """What could not be recorded (or was skipped while the store was unavailable), in order."""
        return self._shared.failures.unrecorded

    @property
    def failure_counts(self) -> dict[str, int]:
        """Failed or skipped calls by kind (``metrics``, ``checkpoint``, ``open`` ...)."""
        return dict(self._shared.failures.counts)

    def summary(self) -> str | None:
        """A one-line summary of what was not recorded, or None (``close()`` logs it)."""
        return self._shared.failures.summary()

    @property
    def client(self) -> Any:
        return self._shared.get_client()

    def _attempt(self, kind: str, what: str, fn: Callable[[], T]) -> tuple[bool, T | None]:
        return self._shared.failures.attempt(kind, what, fn)


# -- the orchestrator side ---------------------------------------------------------------------
class StudyTracker(_Tracker):
    """The study's experiment and parent run, and one nested run per trial (orchestrator process).

    Call order (one thread): ``StudyTracker(...)``; per trial ``start_trial``
    (or ``open_trial``), the trial's logging through a :class:`TrialTracker`,
    then ``end_trial``; ``refresh_study_plots(study, final=False)`` as trials
    end and ``refresh_study_plots(study)`` at the end; ``close()``. Every
    method returns normally even when MLflow fails (see the module docstring).

    ``background=True``: MLflow calls (opening the store included: importing
    mlflow and creating a new store take seconds) run in order on one
    tracking thread and methods return at once, except ``start_trial``,
    which waits for its run id (``open_trial`` does not). ``close()`` waits
    for the queue, at most ``drain_timeout_s``.
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
        plot_interval_s: float = 30.0,
        background: bool = False,
        drain_timeout_s: float = 300.0,
        parent_wait_s: float = 0.0,
    ) -> None:
        uri = resolve_tracking_uri(tracking_uri, results_dir)
        super().__init__(_Shared(uri, f"study {study_name!r}", background))
        self.results_dir = Path(os.path.expanduser(str(results_dir)))
        self.study_name = study_name
        self.sampler_name = sampler_name
        self.pruner_name = pruner_name
        self.study_params = flatten_params({"study": dict(study_params)}) if study_params else {}
        self.plot_interval_s = plot_interval_s
        self.drain_timeout_s = drain_timeout_s
        self.parent_wait_s = parent_wait_s
        self.experiment_id: str | None = None
        self.parent_run_id: str | None = None
        self.trial_runs: dict[int, str] = {}  # trial number -> run id
        self._trackers: dict[int, TrialTracker] = {}  # trial number -> its tracker (open_trial)
        self._last_plots = -math.inf
        self._shared.run(self._ensure_open)

    # -- opening (tasks) --------------------------------------------------------------
    def _ensure_open(self) -> bool:
        if self.parent_run_id is not None:
            return True
        ok, _ = self._attempt("open", f"the experiment and parent run of study {self.study_name!r}", self._open)
        return ok

    def _open(self) -> None:
        client = self.client
        self.experiment_id = self._experiment(client)
        self.parent_run_id = self._parent_run(client)
        for run in self._search(f"tags.`{TAG_ROLE}` = 'trial'"):
            number = run.data.tags.get(TAG_TRIAL, "")
            if number.isdigit() and run.data.tags.get(TAG_PARENT) == self.parent_run_id:
                self.trial_runs.setdefault(int(number), run.info.run_id)

    def _experiment(self, client: Any) -> str:
        from mlflow.exceptions import MlflowException

        found = client.get_experiment_by_name(self.study_name)
        if found is None:
            location = None
            if not is_remote(self.tracking_uri):
                safe = re.sub(r"[^\w.\-]", "_", self.study_name) or "study"
                location = (artifact_root(self.results_dir) / safe).as_uri()
            try:
                experiment_id = client.create_experiment(self.study_name, artifact_location=location, tags={
                    EXPERIMENT_KIND[0]: EXPERIMENT_KIND[1], TAG_STUDY: self.study_name,
                    TAG_SAMPLER: self.sampler_name, TAG_PRUNER: self.pruner_name,
                    "mlflow.note.content": f"rltune study {self.study_name!r}: search {self.sampler_name}, "
                                           f"pruner {self.pruner_name}. The parent run holds the best trial, "
                                           "trials.csv and the study's plots; each trial is a nested run.",
                })
                return str(experiment_id)
            except MlflowException as exc:  # created by another process meanwhile
                found = client.get_experiment_by_name(self.study_name)
                if found is None:
                    raise exc
        if found.lifecycle_stage == "deleted":
            client.restore_experiment(found.experiment_id)
        if EXPERIMENT_KIND[0] not in found.tags:
            client.set_experiment_tag(found.experiment_id, *EXPERIMENT_KIND)
        return str(found.experiment_id)

    def _parent_run(self, client: Any) -> str:
        deadline = time.monotonic() + self.parent_wait_s  # another worker of a shared study creates it
        while True:
            for run in self._search(f"tags.`{TAG_ROLE}` = 'study'"):
                if run.data.tags.get(TAG_STUDY) == self.study_name:
                    if run.info.status != "RUNNING":
                        client.update_run(run.info.run_id, status="RUNNING")
                    return run.info.run_id
            if time.monotonic() >= deadline:
                break
            time.sleep(1.0)
        run = client.create_run(self.experiment_id, run_name=self.study_name, tags={
            TAG_ROLE: "study", TAG_STUDY: self.study_name, TAG_SAMPLER: self.sampler_name, TAG_PRUNER: self.pruner_name,
        })
        if self.study_params:
            _log_params(client, run.info.run_id, self.study_params, existing={})
        return run.info.run_id

    def _search(self, filter_string: str) -> list[Any]:
        from mlflow.entities import ViewType

        runs, token = [], None
        while True:
            page = self.client.search_runs([self.experiment_id], filter_string=filter_string,
                                           run_view_type=ViewType.ACTIVE_ONLY, max_results=1000,
                                           order_by=["attributes.start_time ASC"], page_token=token)
            runs.extend(page)
            token = page.token
            if not token:
                return runs

    # -- trials -----------------------------------------------------------------------
    def start_trial(self, trial_number: int, params: Mapping[str, Any], key_params: Mapping[str, Any]) -> str | None:
        """Create (or, for a resumed trial, reopen) the trial's nested run; its run id, None if MLflow failed.

        ``params``: the trial's full config (logged flattened with dotted keys);
        ``key_params``: the values the sampler chose (they name the run).
        Waits for the run id in background mode (see :meth:`open_trial`).
        """
        flat = flatten_params(params)
        return self._shared.run(lambda: self._start_trial(trial_number, flat, dict(key_params)), wait=True)

    def open_trial(self, trial_number: int, params: Mapping[str, Any], key_params: Mapping[str, Any],
                   **trial_options: Any) -> "TrialTracker":
        """:meth:`start_trial` and a :class:`TrialTracker` on the run, in this process; never waits.

        In background mode the run is created on the tracking thread before
        any call made through the returned tracker. ``trial_options``:
        ``keep_checkpoints_num``, ``metric``, ``mode`` of :class:`TrialTracker`.
        """
        tracker = TrialTracker(None, self.tracking_uri, _shared=self._shared, _label=f"trial {trial_number}",
                               **trial_options)
        flat = flatten_params(params)

        def start() -> None:
            reopened = trial_number in self.trial_runs
            tracker.run_id = self._start_trial(trial_number, flat, dict(key_params))
            if reopened and tracker.run_id is not None:
                self._load_steps(tracker)
            self._trackers[trial_number] = tracker

        self._shared.run(start)
        return tracker

    def _load_steps(self, tracker: "TrialTracker") -> None:
        ok, steps = tracker._logged("metrics", "the steps already logged",
                                    lambda: {m.step for m in self.client.get_metric_history(tracker.run_id, STEP_KEY)})
        if ok:
            tracker.logged_steps |= steps

    def _start_trial(self, number: int, flat_params: dict[str, str], key_params: dict[str, Any]) -> str | None:
        if not self._ensure_open():
            self._shared.failures._record("trial", f"the run of trial {number} (no parent run)")
            return None
        ok, run_id = self._attempt("trial", f"the run of trial {number}",
                                   lambda: self._create_or_reopen(number, key_params))
        if ok and run_id is not None:
            self.trial_runs[number] = run_id
            self._attempt("params", f"the params of trial {number}", lambda: self._trial_params(run_id, flat_params))
        return run_id

    def _create_or_reopen(self, number: int, key_params: Mapping[str, Any]) -> str:
        client = self.client
        run_id = self.trial_runs.get(number)
        if run_id is not None:  # resumed: the same run goes on
            client.update_run(run_id, status="RUNNING")
            client.set_tag(run_id, TAG_STATE, "RUNNING")
            return run_id
        tags = {TAG_ROLE: "trial", TAG_STUDY: self.study_name, TAG_TRIAL: str(number), TAG_STATE: "RUNNING",
                TAG_SAMPLER: self.sampler_name, TAG_PRUNER: self.pruner_name, TAG_PARENT: self.parent_run_id}
        return client.create_run(self.experiment_id, run_name=run_name(number, key_params), tags=tags).info.run_id

    def _trial_params(self, run_id: str, flat_params: dict[str, str]) -> None:
        client = self.client
        existing = client.get_run(run_id).data.params
        truncated = _log_params(client, run_id, flat_params, existing)
        if truncated:
            limits = _limits()
            note = f"values cut to MLflow's limit of {limits.param_value} characters: " + ", ".join(truncated)
            client.set_tag(run_id, TAG_TRUNCATED, note[:limits.tag_value])

    def end_trial(self, run: "str | TrialTracker | None", state: str, *, reason: str | None = None,
                  error: str | None = None) -> None:
        """End the trial's run: COMPLETE -> FINISHED, PRUNED -> KILLED, FAIL -> FAILED, INTERRUPTED -> KILLED.

        ``run``: its run id or the :class:`TrialTracker` from :meth:`open_trial`.
        The rltune state goes to the ``rltune.state`` tag, ``reason`` (why it
        stopped) to ``rltune.reason``, and the tail of a failed trial's
        traceback to ``rltune.error``. A trial without run (MLflow failed when
        it started) is a no-op.
        """
        if state not in RUN_STATUS:
            raise ValueError(f"state must be one of {sorted(RUN_STATUS)}, but got {state=!r}")

        def end() -> None:
            run_id = run.run_id if isinstance(run, TrialTracker) else run
            if run_id is None:
                return
            from mlflow.entities import RunTag

            max_tag = _limits().tag_value

            tags = [RunTag(TAG_STATE, state)]
            if reason:
                tags.append(RunTag("rltune.reason", reason[:max_tag]))
            if error:
                tags.append(RunTag("rltune.error", error.strip()[-max_tag:]))

            def log() -> None:
                self.client.log_batch(run_id, tags=tags, synchronous=True)
                if RUN_STATUS[state] == "RUNNING":
                    self.client.update_run(run_id, status="RUNNING")
                else:
                    self.client.set_terminated(run_id, status=RUN_STATUS[state])

            self._attempt("trial", f"the end ({state}) of run {run_id}", log)

        self._shared.run(end)

    def trial(self, run_id: str | None, **trial_options: Any) -> "TrialTracker":
        """A :class:`TrialTracker` on a trial's run in this process, sharing this tracker's client and thread."""
        return TrialTracker(run_id, self.tracking_uri, _shared=self._shared, _label=f"run {run_id}", **trial_options)

    def trial_tracker_args(self, run_id: str | None) -> dict[str, Any]:
        """Picklable arguments of ``TrialTracker(**args)`` for the trial's own process."""
        return {"run_id": run_id, "tracking_uri": self.tracking_uri}

    # -- reconciling with the trial directories ----------------------------------------
    def reconcile(self, trials: Sequence[Any], study_dir: str | os.PathLike[str], *, finished_only: bool = False,
                  policy_model: bool = False, **trial_options: Any) -> None:
        """Bring each trial's run in line with its directory and Optuna's state: log only what is missing.

        ``trials``: Optuna's trials (``FrozenTrial``); ``study_dir``: where their
        ``trial_<number>`` directories are. Per trial with a directory: the
        steps of ``result.json`` the run lacks (each once), the checkpoints on
        disk it lacks, and no checkpoint the trial dropped from disk (with
        ``keep_checkpoints_num`` the best one stays); the run's end state from
        Optuna's (RUNNING: an interrupted trial, KILLED); for a finished trial
        ``params.json``, ``result.json`` and ``error.txt`` as on disk, and a
        learning curve and (``policy_model``: a trainer's checkpoints) a policy
        model where missing. A trial without run gets one. ``finished_only``:
        leave RUNNING trials alone (a resume is about to continue them). A run
        reconciled before with the same files and state is skipped (its
        ``rltune.reconciled`` tag). ``trial_options``: as for :meth:`open_trial`.
        """
        trials = list(trials)
        self._shared.run(lambda: self._reconcile(trials, Path(study_dir), finished_only, policy_model,
                                                 dict(trial_options)))

    def _reconcile(self, trials: list[Any], study_dir: Path, finished_only: bool, policy_model: bool,
                   options: dict[str, Any]) -> None:
        if not self._ensure_open():
            return
        for t in trials:
            state = t.state.name
            if state == "RUNNING" and not finished_only:
                state = "INTERRUPTED"
            trial_dir = study_dir / f"trial_{t.number:05d}"
            if state not in RUN_STATUS or state == "RUNNING" or not trial_dir.is_dir():
                continue
            try:
                self._reconcile_trial(t, state, trial_dir, policy_model, options)
            except Exception as exc:  # noqa: BLE001 - e.g. an unreadable trial directory
                self._shared.failures._failed("reconcile", f"the reconciliation of trial {t.number}", exc)

    def _reconcile_trial(self, t: Any, state: str, trial_dir: Path, policy_model: bool,
                         options: dict[str, Any]) -> None:
        import hashlib

        from rltune.orchestrator._reporter import RESULT_FILE, list_checkpoints

        number = t.number
        files = [trial_dir / name for name in ("params.json", RESULT_FILE, "error.txt")]  # as _runner writes them
        results = _read_results(trial_dir / RESULT_FILE)
        checkpoints = {path.name: (iteration, path) for iteration, path in list_checkpoints(trial_dir)}
        finished = state != "INTERRUPTED"
        digest = hashlib.sha1(json.dumps([
            state, [(p.name, p.stat().st_size) for p in files if p.is_file()], sorted(checkpoints),
            policy_model and finished]).encode()).hexdigest()
        run_id = self.trial_runs.get(number)
        if run_id is None:  # its "open" never reached the tracking
            given = _read_json(trial_dir / "params.json")
            config = {**(given.get("config") or {}), "seed": given.get("seed")}
            run_id = self._start_trial(number, flatten_params(config), dict(given.get("params") or {}))
            if run_id is None:
                return
        failures = sum(self._shared.failures.counts.values())
        ok, run = self._attempt("reconcile", f"the run of trial {number}", lambda: self.client.get_run(run_id))
        if not ok:
            return
        if run.data.tags.get(TAG_SYNCED) == digest and run.info.status == RUN_STATUS[state]:
            return
        tracker = self._trackers.get(number)
        if tracker is None or tracker.run_id != run_id:
            tracker = self._trackers[number] = TrialTracker(run_id, self.tracking_uri, _shared=self._shared,
                                                            _label=f"trial {number}", **options)
        ok, logged = tracker._logged("metrics", "the steps already logged", lambda: {
            m.step for m in self.client.get_metric_history(run_id, STEP_KEY)})
        if ok:
            tracker.logged_steps |= logged
            missing = [r for i, r in enumerate(results) if _step(r, i + 1) not in logged]
            if missing:
                tracker.log_results(missing)
        self._reconcile_checkpoints(tracker, checkpoints, results)
        if run.info.status != RUN_STATUS[state] or run.data.tags.get(TAG_STATE) != state:
            self.end_trial(run_id, state, error=t.user_attrs.get("error") if state == "FAIL" else None)
        if finished:
            ok, listed = tracker._logged("files", "the list of the run's artifacts", lambda: {
                a.path: a.file_size for a in self.client.list_artifacts(run_id)})
            if ok:
                changed = [p for p in files if p.is_file() and listed.get(p.name) != p.stat().st_size]
                if changed:
                    tracker.log_files(*changed)
                if "plots" not in listed and results:
                    tracker.log_learning_curve(results)
                if policy_model and state != "FAIL" and "policy_model" not in listed and checkpoints:
                    tracker.log_policy_model(str(max(checkpoints.values())[1]))
        if sum(self._shared.failures.counts.values()) == failures:  # all done: skipped next time
            self._attempt("reconcile", f"the reconciliation mark of trial {number}",
                          lambda: self.client.set_tag(run_id, TAG_SYNCED, digest))

    def _reconcile_checkpoints(self, tracker: "TrialTracker", on_disk: dict[str, tuple[int, Path]],
                               results: list[dict[str, Any]]) -> None:
        """Upload the checkpoints on disk that the run lacks; drop those the trial dropped but the best."""
        ok, listed = tracker._logged("checkpoint", "the run's checkpoints", lambda: [
            a.path.rsplit("/", 1)[-1] for a in self.client.list_artifacts(tracker.run_id, "checkpoints")])
        if not ok:
            return
        scores = {point["iteration"]: point["metric"]
                  for point in (_curve_point(r, _step(r, i + 1), tracker.metric) for i, r in enumerate(results))}

        def score(name: str) -> float | None:
            digits = name.rpartition("_")[2]
            return scores.get(int(digits)) if digits.isdigit() else None

        for name in sorted(set(on_disk) - set(listed)):
            tracker._logged("checkpoint", f"checkpoint {name}", lambda: self.client.log_artifacts(
                tracker.run_id, str(on_disk[name][1]), f"checkpoints/{name}"))
        kept = sorted(set(on_disk) | set(listed))
        tracker.checkpoints = [(name, score(name)) for name in kept]
        dropped = [name for name in listed if name not in on_disk]
        if dropped and tracker.keep_checkpoints_num:
            scored = [(s, n) for n, s in tracker.checkpoints if s is not None and math.isfinite(s)]
            best = (max(scored) if tracker.mode == "max" else min(scored))[1] if scored else None
            for name in dropped:
                if name != best:
                    tracker._delete_checkpoint(name)

    # -- the parent run's summary -------------------------------------------------------
    def update_best(self, trial_number: int, value: float, params: Mapping[str, Any]) -> None:
        """Record the best trial so far on the parent run: tags and the ``best_value`` metric (step = trial number)."""
        flat = flatten_params(params)
        self._shared.run(lambda: self._update_best(trial_number, float(value), flat))

    def _update_best(self, trial_number: int, value: float, flat_params: dict[str, str]) -> None:
        if not self._ensure_open():
            return
        from mlflow.entities import Metric, RunTag

        limits = _limits()
        tags = [RunTag("rltune.best_trial", str(trial_number)), RunTag("rltune.best_value", repr(value))]
        if trial_number in self.trial_runs:
            tags.append(RunTag("rltune.best_run_id", self.trial_runs[trial_number]))
        tags += [RunTag(clean_key(f"best.{key}"), text[:limits.tag_value]) for key, text in flat_params.items()]
        metrics = [Metric("best_value", value, int(time.time() * 1000), int(trial_number))] if math.isfinite(value) else []
        per_batch = limits.params_tags_per_batch

        def log() -> None:
            for i in range(0, len(tags), per_batch):
                self.client.log_batch(self.parent_run_id, metrics=metrics if i == 0 else [],
                                      tags=tags[i:i + per_batch], synchronous=True)

        self._attempt("best", f"the best trial ({trial_number})", log)

    def refresh_study_plots(self, study: Any, *, final: bool = True) -> None:
        """Upload ``trials.csv``, the best trial and Optuna's plots (PNG) to the parent run.

        ``final=False`` (while the study runs) does it at most every
        ``plot_interval_s`` seconds. A plot that needs more trials (param
        importances need two complete trials) is left out until it can be
        drawn. The trials are copied when this is called; drawing and
        uploading happen on the tracking thread in background mode.
        """
        now = time.monotonic()
        if not final and now - self._last_plots < self.plot_interval_s:
            return
        self._last_plots = now
        try:
            trials = study.get_trials(deepcopy=True)
            directions = list(study.directions)
        except Exception as exc:  # noqa: BLE001 - an unreadable study storage: nothing to draw
            self._shared.failures._failed("plots", "the study's trials (for the plots)", exc)
            return
        self._shared.run(lambda: self._refresh(trials, directions))

    def draw_study_plots(self, trials: list[Any], directions: list[Any]) -> None:
        """:meth:`refresh_study_plots` from copies of the study's trials (``FrozenTrial``) and directions.

        For a tracker in another process than the study (the tracking process
        gets the trials pickled); never throttled.
        """
        self._shared.run(lambda: self._refresh(trials, directions))

    def _refresh(self, trials: list[Any], directions: list[Any]) -> None:
        if not self._ensure_open():
            return
        complete = [t for t in trials if t.state.name == "COMPLETE" and t.values]
        if complete:
            best = (max if directions[0].name == "MAXIMIZE" else min)(complete, key=lambda t: t.values[0])
            self._update_best(best.number, float(best.values[0]), flatten_params(best.params))
        with tempfile.TemporaryDirectory(prefix="rltune_plots_") as tmp:
            csv_path = Path(tmp) / "trials.csv"
            csv_path.write_text(trials_csv(trials, self.trial_runs))
            self._attempt("plots", "trials.csv", lambda: self.client.log_artifact(self.parent_run_id, str(csv_path)))
            from rltune.orchestrator import _plots

            plot_dir = Path(tmp) / "plots"
            plot_dir.mkdir()
            try:
                snapshot = _study_snapshot(trials, directions)
            except Exception as exc:  # noqa: BLE001
                self._shared.failures._failed("plots", "a copy of the study for the plots", exc)
                return
            for name, problem in _plots.study_plots(snapshot, trials, plot_dir).items():
                self._shared.failures._failed("plots", f"plot {name}", problem)
            if any(plot_dir.iterdir()):
                self._attempt("plots", "the study's plots",
                              lambda: self.client.log_artifacts(self.parent_run_id, str(plot_dir), "plots"))

    def close(self, *, interrupted: bool = False) -> None:
        """End the parent run (FINISHED, or KILLED when interrupted: a resume reopens it); log what was lost.

        In background mode this first waits for the queued calls (at most
        ``drain_timeout_s``); the tracker works inline afterwards.
        """
        status = "KILLED" if interrupted else "FINISHED"

        def end() -> None:
            if self.parent_run_id is not None:
                self._attempt("study", f"the end ({status}) of the study's parent run",
                              lambda: self.client.set_terminated(self.parent_run_id, status=status))

        self._shared.run(end)
        self._shared.drain(self.drain_timeout_s)
        summary = self.summary()
        if summary:
            logger.warning("%s", summary)


def _log_params(client: Any, run_id: str, params: Mapping[str, str], existing: Mapping[str, str]) -> list[str]:
    """Log params not yet in ``existing``, values cut to MLflow's limit; the keys that were cut."""
    from mlflow.entities import Param

    limits = _limits()
    max_value, per_batch = limits.param_value, limits.params_tags_per_batch
    entries, truncated = [], []
    for key, value in params.items():
        key = clean_key(key, limits.key)
        if len(value) > max_value:
            suffix = f"... ({len(value)} chars in all)"
            value = value[: max_value - len(suffix)] + suffix
            truncated.append(key)
        if key not in existing:
            entries.append(Param(key, value))
    for i in range(0, len(entries), per_batch):
        client.log_batch(run_id, params=entries[i:i + per_batch], synchronous=True)
    return truncated


def _study_snapshot(trials: list[Any], directions: list[Any]) -> Any:
    """An in-memory copy of a study's trials for plotting (another thread may change the real study)."""
    import optuna

    storage = optuna.storages.InMemoryStorage()
    storage.create_new_study(directions=directions, study_name="snapshot")
    snapshot = optuna.Study(study_name="snapshot", storage=storage)
    snapshot.add_trials([t for t in trials if t.state.is_finished()])
    return snapshot


def trials_csv(trials: Sequence[Any], run_ids: Mapping[int, str] | None = None) -> str:
    """A CSV table of Optuna trials: number, state, value, times, each param, the MLflow run id."""
    names: list[str] = []
    for t in trials:
        for name in t.params:
            if name not in names:
                names.append(name)
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["number", "state", "value", "datetime_start", "datetime_complete", "duration_s",
                     *[f"params_{n}" for n in names], "mlflow_run_id"])
    for t in trials:
        duration = (t.datetime_complete - t.datetime_start).total_seconds() if t.datetime_complete and t.datetime_start else None
        writer.writerow([t.number, t.state.name, "" if t.value is None else t.value,
                         t.datetime_start.isoformat(timespec="seconds") if t.datetime_start else "",
                         t.datetime_complete.isoformat(timespec="seconds") if t.datetime_complete else "",
                         "" if duration is None else f"{duration:.1f}",
                         *[_csv_value(t.params.get(n, "")) for n in names], (run_ids or {}).get(t.number, "")])
    return out.getvalue()


def _csv_value(value: Any) -> Any:
    return json.dumps(value) if isinstance(value, (list, tuple, dict)) else value


# -- the trial side ----------------------------------------------------------------------------
class TrialTracker(_Tracker):
    """One trial's run: results, checkpoints, files, learning curve, policy model.

    Built from a run id and a tracking URI (the parent passes them down), so
    it may live in the trial's own process; or made by a
    :class:`StudyTracker` (``open_trial``, ``trial``) in the orchestrator,
    sharing its client, failure log and (background mode) tracking thread.
    ``run_id`` None (the orchestrator could not create the run) makes every
    call a no-op recorded in ``unrecorded``.

    Checkpoints: with ``keep_checkpoints_num`` N, the run keeps the N latest
    uploaded checkpoints plus the best one (by ``metric`` in ``mode`` of the
    result logged before it, or the ``score`` given); others are deleted
    from the run's artifacts as new ones arrive. In background mode what is
    uploaded later (checkpoint directories, files) is snapshotted when the
    call is made, so the caller may change or delete it afterwards.
    """

    def __init__(
        self,
        run_id: str | None,
        tracking_uri: str,
        *,
        keep_checkpoints_num: int | None = None,
        metric: str = "episode_reward_mean",
        mode: str = "max",
        _shared: _Shared | None = None,
        _label: str = "",
    ) -> None:
        super().__init__(_shared or _Shared(tracking_uri, f"run {run_id}", background=False))
        if mode not in ("max", "min"):
            raise ValueError(f"mode must be 'max' or 'min', but got {mode=!r}")
        self.run_id = run_id
        self.keep_checkpoints_num = keep_checkpoints_num
        self.metric = metric
        self.mode = mode
        self.history: list[dict[str, Any]] = []  # per result: iteration, timesteps, metric, curriculum phase/task
        self.checkpoints: list[tuple[str, float | None]] = []  # uploaded (name, score), oldest first
        self.logged_steps: set[int] = set()  # steps the run holds (loaded when a run is reopened)
        self._history_steps: set[int] = set()
        self._prefix = f"{_label}: " if _label else ""
        self._last_task: Any = None
        self._artifact_repo: Any = None

    def _logged(self, kind: str, what: str, fn: Callable[[], T]) -> tuple[bool, T | None]:
        """Inside a task: ``fn()`` against this trial's run, accounted for; a no-op without run."""
        what = self._prefix + what
        if self.run_id is None:
            self._shared.failures._record(kind, f"{what} (the trial has no MLflow run)")
            return False, None
        return self._attempt(kind, what, fn)

    # -- results ----------------------------------------------------------------------
    def log_result(self, result: Mapping[str, Any]) -> None:
        """Log every numeric entry of one result at ``step = training_iteration``, in one batch call.

        Nested keys are joined with '/' (``info/learner/default_policy/entropy``,
        ``custom_metrics/pole_angle_mean``); bools are 0/1; NaN, infinities
        and non-numeric values are left out; a non-numeric ``curriculum_task``
        goes to the ``rltune.curriculum_task`` tag when it changes. More than
        1000 metrics go in chunks of 1000 (MLflow's batch limit). A step the
        run already holds (``logged_steps``) is not logged again.
        """
        self.log_results([result])

    def log_results(self, results: Sequence[Mapping[str, Any]], *, timestamp_ms: int | None = None) -> None:
        """Log several results (in order) as :meth:`log_result` does, packed into as few batch calls as fit.

        A tracker that fell behind (a tracking process catching up) sends the
        iterations it has queued together: MLflow's cost is per call far more
        than per metric. ``timestamp_ms``: when the results arrived (default: now).
        """
        if not results:
            return
        now = int(time.time() * 1000) if timestamp_ms is None else int(timestamp_ms)
        rows: list[tuple[int, dict[str, float], str | None]] = []
        for result in results:
            step = _step(result, len(self.history) + 1)
            if step not in self._history_steps:  # a step run again keeps its first point, as in MLflow
                self._history_steps.add(step)
                self.history.append(_curve_point(result, step, self.metric))
            task = result.get("curriculum_task")
            task_tag = None
            if task is not None and _number(task) is None and task != self._last_task:
                task_tag = json.dumps(task, default=repr)[:MAX_TAG_VAL_LENGTH]
                self._last_task = task
            rows.append((step, flatten_metrics(result), task_tag))

        def log() -> None:
            from mlflow.entities import Metric, RunTag

            # a step once: MLflow would keep a second value of a step (a restarted trial, a replay)
            fresh, steps = [], set()
            for row in rows:
                if row[0] not in self.logged_steps and row[0] not in steps:
                    fresh.append(row)
                    steps.add(row[0])
            if not fresh:
                return
            # the step key last: a step whose STEP_KEY is stored is stored whole (chunks go in order)
            entries = [Metric(key, metrics[key], now, step) for step, metrics, _ in fresh
                       for key in sorted(metrics, key=lambda k: k == STEP_KEY)]
            # a changed task is a tag; of several in one call, the latest is the run's current task
            task_tags = [tag for _, _, tag in rows if tag is not None]
            tags = [RunTag("rltune.curriculum_task", task_tags[-1])] if task_tags else []
            limits = _limits()  # a batch holds at most 1000 metrics and 1000 entities in all
            per_batch = min(limits.metrics_per_batch, limits.entities_per_batch - len(tags))
            for i in range(0, max(len(entries), 1), per_batch):
                self.client.log_batch(self.run_id, metrics=entries[i:i + per_batch], tags=tags if i == 0 else [],
                                      synchronous=True)
            self.logged_steps |= steps

        steps = [step for step, _, _ in rows]
        values = sum(len(metrics) for _, metrics, _ in rows)
        what = (f"the metrics of iteration {steps[0]} ({values} values)" if len(rows) == 1
                else f"the metrics of iterations {steps[0]}..{steps[-1]} ({values} values)")
        self._shared.run(lambda: self._logged("metrics", what, log))

    # -- artifacts ----------------------------------------------------------------------
    def log_checkpoint(self, path: str | os.PathLike[str], *, score: float | None = None,
                       name: str | None = None) -> str | None:
        """Upload a checkpoint directory as ``checkpoints/<name>``; its artifact path, None if not recorded.

        ``name``: default the directory's name (given when ``path`` is a copy).
        ``score`` (default: ``metric`` of the last logged result) decides which
        checkpoint is the best one kept with ``keep_checkpoints_num``. In
        background mode the upload happens later (from a snapshot) and this
        returns None.
        """
        path = Path(path)
        name = name or path.name
        if score is None and self.history:
            score = self.history[-1].get("metric")
        source = path
        if self.background:
            ok, source = self._attempt("checkpoint", f"{self._prefix}checkpoint {name} (snapshot)", lambda: _snapshot(path))
            if not ok:
                return None

        def upload() -> str | None:
            try:
                ok, _ = self._logged("checkpoint", f"checkpoint {name}", lambda: self.client.log_artifacts(
                    self.run_id, str(source), f"checkpoints/{name}"))
            finally:
                if source is not path:
                    _remove(source)
            if not ok:
                return None
            self.checkpoints = [c for c in self.checkpoints if c[0] != name] + [(name, score)]
            for old in self._checkpoints_to_drop():
                self._delete_checkpoint(old)
            return f"checkpoints/{name}"

        return self._shared.run(upload)

    def _checkpoints_to_drop(self) -> list[str]:
        keep = self.keep_checkpoints_num
        if not keep or len(self.checkpoints) <= keep:
            return []
        kept = {name for name, _ in self.checkpoints[-keep:]}
        scored = [(s, n) for n, s in self.checkpoints if s is not None and math.isfinite(s)]
        if scored:
            kept.add((max(scored) if self.mode == "max" else min(scored))[1])
        return [name for name, _ in self.checkpoints if name not in kept]

    def delete_checkpoint(self, name: str) -> None:
        """Delete ``checkpoints/<name>`` from the run's artifacts (the local directory is not touched)."""
        self._shared.run(lambda: self._delete_checkpoint(name))

    def _delete_checkpoint(self, name: str) -> None:
        def delete() -> None:
            if self._artifact_repo is None:
                from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository

                uri = self.client.get_run(self.run_id).info.artifact_uri
                self._artifact_repo = get_artifact_repository(uri, tracking_uri=self.tracking_uri)
            self._artifact_repo.delete_artifacts(f"checkpoints/{name}")

        ok, _ = self._logged("checkpoint", f"the deletion of checkpoint {name}", delete)
        if ok:
            self.checkpoints = [c for c in self.checkpoints if c[0] != name]

    def log_files(self, *paths: str | os.PathLike[str], artifact_path: str | None = None) -> None:
        """Upload files (``params.json``, ``result.json``, ``error.txt`` ...); missing ones are skipped."""
        files = [Path(p) for p in paths if Path(p).is_file()]
        if not files:
            return
        staging, sources = _snapshot_files(files) if self.background else (None, files)

        def upload() -> None:
            try:
                for path, source in zip(files, sources):
                    self._logged("files", f"file {path.name}",
                                 lambda: self.client.log_artifact(self.run_id, str(source), artifact_path))
            finally:
                if staging is not None:
                    _remove(staging)

        self._shared.run(upload)

    def log_text(self, text: str, artifact_file: str) -> None:
        """Upload ``text`` as the artifact ``artifact_file`` (e.g. a crashed trial's traceback as ``error.txt``)."""
        self._shared.run(lambda: self._logged("files", f"file {artifact_file}",
                                              lambda: self.client.log_text(self.run_id, text, artifact_file)))

    def log_learning_curve(self, results: Iterable[Mapping[str, Any]] | None = None, *, metric: str | None = None) -> None:
        """A PNG (``plots/learning_curve.png``) of ``metric`` against ``timesteps_total``, curriculum phase changes marked.

        ``results``: the trial's results (default: those logged through this tracker).
        """
        metric = metric or self.metric
        if results is None and metric == self.metric:
            points = list(self.history)
        else:
            points = [_curve_point(r, _step(r, i + 1), metric) for i, r in enumerate(results or [])]
        if not points:
            return

        def log() -> None:
            from rltune.orchestrator import _plots

            with tempfile.TemporaryDirectory(prefix="rltune_curve_") as tmp:
                png = Path(tmp) / "learning_curve.png"
                _plots.learning_curve(points, png, metric=metric)
                self.client.log_artifact(self.run_id, str(png), "plots")

        self._shared.run(lambda: self._logged("plots", "the learning curve", log))

    def log_policy_model(self, trainer_or_checkpoint: Any, *, artifact_path: str = "policy_model") -> str | None:
        """Log the trained policy as an MLflow pyfunc model; its URI ``runs:/<run_id>/policy_model``, or None.

        ``trainer_or_checkpoint``: a rltune Trainer, or the path of one of its
        checkpoints. ``mlflow.pyfunc.load_model(uri).predict(observations)``
        maps a batch of raw observations to actions (see
        :mod:`rltune.orchestrator._mlflow_model`). In background mode this
        returns None at once: a trainer's policy is exported now, a checkpoint
        is snapshotted now; the model is built and uploaded on the tracking thread.
        """
        source = trainer_or_checkpoint
        snapshot = None
        if self.background:
            if isinstance(source, (str, os.PathLike)):
                ok, snapshot = self._attempt("model", f"{self._prefix}the policy model (checkpoint snapshot)",
                                             lambda: _snapshot(Path(trainer_or_checkpoint)))
                source = snapshot
            else:
                def export() -> Path:
                    from rltune.orchestrator._mlflow_model import POLICY_DIR, write_policy_dir

                    return write_policy_dir(trainer_or_checkpoint, Path(tempfile.mkdtemp(prefix="rltune_policy_")) / POLICY_DIR)

                ok, source = self._attempt("model", f"{self._prefix}the policy model (export)", export)
                snapshot = source.parent if ok else None
            if not ok:
                return None

        def save_and_upload() -> str | None:
            def log() -> str:
                from rltune.orchestrator._mlflow_model import save_policy_model

                with tempfile.TemporaryDirectory(prefix="rltune_model_") as tmp:
                    save_policy_model(source, Path(tmp) / "model")
                    self.client.log_artifacts(self.run_id, str(Path(tmp) / "model"), artifact_path)
                return f"runs:/{self.run_id}/{artifact_path}"

            try:
                return self._logged("model", "the policy model", log)[1]
            finally:
                if snapshot is not None:
                    _remove(snapshot)

        return self._shared.run(save_and_upload)


def _snapshot(directory: Path, tag: str = "") -> Path:
    """A copy of a directory next to it, hard-linked where possible (a checkpoint's files never change).

    Named ``.<name>.mlflow-<tag>-<random>``: :func:`remove_staging` finds the copies a killed process left.
    """
    import shutil

    target = Path(tempfile.mkdtemp(prefix=f".{directory.name}{STAGING}{tag + '-' if tag else ''}",
                                   dir=directory.parent))

    def link_or_copy(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    shutil.copytree(directory, target, copy_function=link_or_copy, dirs_exist_ok=True)
    return target


def _snapshot_files(files: list[Path], tag: str = "", directory: Path | None = None) -> tuple[Path, list[Path]]:
    """Copies of files (which may grow, like result.json) in a new staging directory, and that directory.

    ``directory``: where the staging directory goes (``.files.mlflow-<tag>-<random>``; default: the temp dir).
    """
    import shutil

    if directory is None:
        staging = Path(tempfile.mkdtemp(prefix="rltune_files_"))
    else:
        staging = Path(tempfile.mkdtemp(prefix=f".files{STAGING}{tag + '-' if tag else ''}", dir=directory))
    copies = []
    for i, path in enumerate(files):
        (staging / str(i)).mkdir()
        copies.append(Path(shutil.copy2(path, staging / str(i) / path.name)))
    return staging, copies


def _remove(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


def remove_staging(study_dir: str | os.PathLike[str], *, tag: str | None = None, keep_tag: str | None = None) -> int:
    """Remove the upload copies in a study's trial directories; how many.

    ``tag``: only those of one tracking session (after its close); ``keep_tag``:
    all but those of the running session (at its start: what killed ones left).
    """
    removed = 0
    for path in Path(study_dir).glob(f"trial_*/.*{STAGING}*"):
        name = path.name
        if tag is not None and f"{STAGING}{tag}-" not in name:
            continue
        if keep_tag is not None and f"{STAGING}{keep_tag}-" in name:
            continue
        if path.is_dir():
            _remove(path)
            removed += 1
    return removed


def _read_results(path: Path) -> list[dict[str, Any]]:
    """The results in a ``result.json`` (one JSON object a line), each step once (the latest line of it)."""
    by_step: dict[int, dict[str, Any]] = {}
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return []
    for i, line in enumerate(lines):
        try:
            result = json.loads(line)
        except ValueError:  # a line cut by a kill
            continue
        if isinstance(result, dict):
            by_step[_step(result, i + 1)] = result
    return [by_step[step] for step in sorted(by_step)]


def _read_json(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _step(result: Mapping[str, Any], default: int) -> int:
    step = result.get("training_iteration")
    return int(step) if isinstance(step, numbers.Integral) or (isinstance(step, float) and step.is_integer()) else default


def _curve_point(result: Mapping[str, Any], step: int, metric: str) -> dict[str, Any]:
    from rltune.orchestrator._stop import _MISSING, lookup

    value = lookup(result, metric)
    timesteps = result.get("timesteps_total")
    return {
        "iteration": step,
        "timesteps": _number(timesteps) if timesteps is not None else None,
        "metric": None if value is _MISSING else _number(value),
        "phase": result.get("curriculum_phase"),
        "task": result.get("curriculum_task"),
    }
