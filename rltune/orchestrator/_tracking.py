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
  as well as in the orchestrator (``study_tracker.trial(run_id)``).

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
  not logged again. A trial restarted from a checkpoint logs its steps
  after the checkpoint again (MLflow keeps both values of such a step).
- Remote servers get short HTTP timeouts and few retries
  (``MLFLOW_HTTP_REQUEST_TIMEOUT`` = 10 s, ``MLFLOW_HTTP_REQUEST_MAX_RETRIES`` = 2,
  ``MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR`` = 1), set in the process before a
  client is created unless the user set them.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import math
import numbers
import os
import re
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence, TypeVar

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

_SKIP_RESULT_KEYS = frozenset({"config", "hist_stats"})  # config: not a metric; hist_stats: per-episode lists


def _limits() -> tuple[int, int, int, int, int]:
    """MLflow's limits: param value length, tag value length, key length, metrics and params/tags per batch."""
    try:
        from mlflow.utils import validation as v

        return (v.MAX_PARAM_VAL_LENGTH, v.MAX_TAG_VAL_LENGTH, v.MAX_ENTITY_KEY_LENGTH,
                v.MAX_METRICS_PER_BATCH, v.MAX_PARAMS_TAGS_PER_BATCH)
    except (ImportError, AttributeError):  # pragma: no cover - the values of mlflow 2.12 to 3.x
        return 6000, 8000, 250, 1000, 100


# -- where the store is ----------------------------------------------------------------------
def resolve_tracking_uri(tracking_uri: str | None, results_dir: str | os.PathLike[str]) -> str:
    """The tracking URI: ``tracking_uri``, else ``$MLFLOW_TRACKING_URI``, else ``sqlite:///<results_dir>/mlflow.db``."""
    if tracking_uri:
        return str(tracking_uri)
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
    limit = limit or _limits()[2]
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
        first_line = (str(exc).strip().splitlines() or [""])[0][:300]
        if kind not in self._warned:
            self._warned.add(kind)
            later = f"; tracking calls pause {self._pause:.0f} s" if outage else ""
            logger.warning("MLflow tracking (%s): could not record %s: %s: %s%s (further %r failures are "
                           "logged at DEBUG and listed in the tracker's unrecorded)",
                           self.owner, what, type(exc).__name__, first_line, later, kind)
        else:
            logger.debug("MLflow tracking (%s): could not record %s: %r", self.owner, what, exc)

    def _record(self, kind: str, what: str) -> None:
        self.counts[kind] += 1
        if len(self.unrecorded) < MAX_UNRECORDED:
            self.unrecorded.append(what)

    def summary(self) -> str | None:
        """One line such as ``MLflow: 12 calls not recorded (metrics x10, checkpoint x2)``; None when all went well."""
        if not self.counts:
            return None
        kinds = ", ".join(f"{k} x{n}" for k, n in self.counts.most_common())
        return f"MLflow tracking ({self.owner}): {sum(self.counts.values())} call(s) not recorded ({kinds})"


class _Tracker:
    """The parts both trackers share: a lazily opened client and the failure log."""

    def __init__(self, tracking_uri: str, owner: str) -> None:
        self.tracking_uri = tracking_uri
        self._failures = _Failures(owner)
        self._client: Any = None

    @property
    def unrecorded(self) -> list[str]:
        """What could not be recorded (or was skipped while the store was unavailable), in order."""
        return self._failures.unrecorded

    @property
    def failure_counts(self) -> dict[str, int]:
        """Failed or skipped calls by kind (``metrics``, ``checkpoint``, ``open`` ...)."""
        return dict(self._failures.counts)

    def summary(self) -> str | None:
        """A one-line summary of what was not recorded, or None; the runner logs it at the end."""
        return self._failures.summary()

    def _attempt(self, kind: str, what: str, fn: Callable[[], T]) -> tuple[bool, T | None]:
        return self._failures.attempt(kind, what, fn)

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = make_client(self.tracking_uri)
        return self._client


# -- the orchestrator side ---------------------------------------------------------------------
class StudyTracker(_Tracker):
    """The study's experiment and parent run, and one nested run per trial (orchestrator process).

    Call order (one thread): ``StudyTracker(...)``, then per trial
    ``start_trial`` -> (the trial logs through a :class:`TrialTracker`) ->
    ``end_trial``; ``refresh_study_plots(study)`` after trials end and with
    ``final=True`` at the end; ``close()``. Every method returns normally
    even when MLflow fails (see the module docstring).
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
    ) -> None:
        super().__init__(resolve_tracking_uri(tracking_uri, results_dir), f"study {study_name!r}")
        self.results_dir = Path(os.path.expanduser(str(results_dir)))
        self.study_name = study_name
        self.sampler_name = sampler_name
        self.pruner_name = pruner_name
        self.study_params = dict(study_params or {})
        self.plot_interval_s = plot_interval_s
        self.experiment_id: str | None = None
        self.parent_run_id: str | None = None
        self.trial_runs: dict[int, str] = {}  # trial number -> run id
        self._last_plots = -math.inf
        self._ensure_open()

    # -- opening ----------------------------------------------------------------------
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
                    EXPERIMENT_KIND[0]: EXPERIMENT_KIND[1], TAG_STUDY: self.study_name, TAG_SAMPLER: self.sampler_name, TAG_PRUNER: self.pruner_name,
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
        for run in self._search(f"tags.`{TAG_ROLE}` = 'study'"):
            if run.data.tags.get(TAG_STUDY) == self.study_name:
                if run.info.status != "RUNNING":
                    client.update_run(run.info.run_id, status="RUNNING")
                return run.info.run_id
        run = client.create_run(self.experiment_id, run_name=self.study_name, tags={
            TAG_ROLE: "study", TAG_STUDY: self.study_name, TAG_SAMPLER: self.sampler_name, TAG_PRUNER: self.pruner_name,
        })
        params = flatten_params({"study": self.study_params}) if self.study_params else {}
        if params:
            self._log_params(client, run.info.run_id, params, existing={})
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

    def _log_params(self, client: Any, run_id: str, params: Mapping[str, str], existing: Mapping[str, str]) -> list[str]:
        """Log params not yet in ``existing``, values truncated to MLflow's limit; the truncated keys."""
        from mlflow.entities import Param

        max_value, _, max_key, _, per_batch = _limits()
        entries, truncated = [], []
        for key, value in params.items():
            key = clean_key(key, max_key)
            if len(value) > max_value:
                suffix = f"... ({len(value)} chars in all)"
                value = value[: max_value - len(suffix)] + suffix
                truncated.append(key)
            if key not in existing:
                entries.append(Param(key, value))
        for i in range(0, len(entries), per_batch):
            client.log_batch(run_id, params=entries[i:i + per_batch], synchronous=True)
        return truncated

    # -- trials -----------------------------------------------------------------------
    def start_trial(self, trial_number: int, params: Mapping[str, Any], key_params: Mapping[str, Any]) -> str | None:
        """Create (or, for a resumed trial, reopen) the trial's nested run; its run id, None if MLflow failed.

        ``params``: the trial's full config (logged flattened with dotted keys);
        ``key_params``: the values the sampler chose (they name the run).
        """
        if not self._ensure_open():
            self._failures._record("trial", f"the run of trial {trial_number} (no parent run)")
            return None
        what = f"the run of trial {trial_number}"
        ok, run_id = self._attempt("trial", what, lambda: self._start_trial(trial_number, params, key_params))
        if ok and run_id is not None:
            self.trial_runs[trial_number] = run_id
            self._attempt("params", f"the params of trial {trial_number}",
                          lambda: self._trial_params(run_id, trial_number, params))
        return run_id

    def _start_trial(self, number: int, params: Mapping[str, Any], key_params: Mapping[str, Any]) -> str:
        client = self.client
        tags = {TAG_ROLE: "trial", TAG_STUDY: self.study_name, TAG_TRIAL: str(number), TAG_STATE: "RUNNING",
                TAG_SAMPLER: self.sampler_name, TAG_PRUNER: self.pruner_name, TAG_PARENT: self.parent_run_id}
        run_id = self.trial_runs.get(number)
        if run_id is not None:  # resumed: the same run goes on
            client.update_run(run_id, status="RUNNING")
            client.set_tag(run_id, TAG_STATE, "RUNNING")
            return run_id
        run = client.create_run(self.experiment_id, run_name=run_name(number, key_params), tags=tags)
        return run.info.run_id

    def _trial_params(self, run_id: str, number: int, params: Mapping[str, Any]) -> None:
        client = self.client
        existing = client.get_run(run_id).data.params
        truncated = self._log_params(client, run_id, flatten_params(params), existing)
        if truncated:
            _, max_tag, *_ = _limits()
            note = ("values cut to MLflow's limit of %d characters: " % _limits()[0]) + ", ".join(truncated)
            client.set_tag(run_id, TAG_TRUNCATED, note[:max_tag])

    def end_trial(self, run_id: str | None, state: str, *, reason: str | None = None, error: str | None = None) -> None:
        """End the trial's run: COMPLETE -> FINISHED, PRUNED -> KILLED, FAIL -> FAILED, INTERRUPTED -> KILLED.

        The rltune state goes to the ``rltune.state`` tag, ``reason`` (why it
        stopped) to ``rltune.reason``, and the tail of a failed trial's
        traceback to ``rltune.error``. ``run_id`` None (MLflow failed when the
        trial started) is a no-op.
        """
        if state not in RUN_STATUS:
            raise ValueError(f"state must be one of {sorted(RUN_STATUS)}, but got {state=!r}")
        if run_id is None:
            return
        _, max_tag, *_ = _limits()

        def end() -> None:
            from mlflow.entities import RunTag

            tags = [RunTag(TAG_STATE, state)]
            if reason:
                tags.append(RunTag("rltune.reason", reason[:max_tag]))
            if error:
                tags.append(RunTag("rltune.error", error.strip()[-max_tag:]))
            self.client.log_batch(run_id, tags=tags, synchronous=True)
            if RUN_STATUS[state] == "RUNNING":
                self.client.update_run(run_id, status="RUNNING")
            else:
                self.client.set_terminated(run_id, status=RUN_STATUS[state])

        self._attempt("trial", f"the end ({state}) of run {run_id}", end)

    def trial(self, run_id: str | None, **kwargs: Any) -> "TrialTracker":
        """A :class:`TrialTracker` on a trial's run sharing this tracker's client (for the orchestrator's own logging)."""
        tracker = TrialTracker(run_id, self.tracking_uri, **kwargs)
        tracker._client = self._client
        return tracker

    def trial_tracker_args(self, run_id: str | None) -> dict[str, Any]:
        """Picklable arguments of ``TrialTracker(**args)`` for the trial's process."""
        return {"run_id": run_id, "tracking_uri": self.tracking_uri}

    # -- the parent run's summary -------------------------------------------------------
    def update_best(self, trial_number: int, value: float, params: Mapping[str, Any]) -> None:
        """Record the best trial so far on the parent run: tags and the ``best_value`` metric (step = trial number)."""
        if not self._ensure_open():
            return
        from mlflow.entities import Metric, RunTag

        _, max_tag, *_ = _limits()
        tags = [RunTag("rltune.best_trial", str(trial_number)), RunTag("rltune.best_value", repr(float(value)))]
        run_id = self.trial_runs.get(trial_number)
        if run_id:
            tags.append(RunTag("rltune.best_run_id", run_id))
        for key, text in flatten_params(params).items():
            tags.append(RunTag(clean_key(f"best.{key}"), text[:max_tag]))
        metrics = [Metric("best_value", float(value), int(time.time() * 1000), int(trial_number))] if math.isfinite(value) else []
        parent = self.parent_run_id
        per_batch = _limits()[4]

        def log() -> None:
            for i in range(0, max(len(tags), 1), per_batch):
                self.client.log_batch(parent, metrics=metrics if i == 0 else [], tags=tags[i:i + per_batch], synchronous=True)

        self._attempt("best", f"the best trial ({trial_number})", log)

    def refresh_study_plots(self, study: Any, *, final: bool = True) -> None:
        """Upload ``trials.csv``, the best trial and Optuna's plots (PNG) to the parent run.

        ``final=False`` (while the study runs) does it at most every
        ``plot_interval_s`` seconds. A plot that needs more trials (param
        importances need two complete trials) is left out until it can be drawn.
        """
        now = time.monotonic()
        if not final and now - self._last_plots < self.plot_interval_s:
            return
        self._last_plots = now
        if not self._ensure_open():
            return
        try:
            trials = study.get_trials(deepcopy=False)
            best = study.best_trial if any(t.state.name == "COMPLETE" for t in trials) else None
        except Exception as exc:  # noqa: BLE001 - an unreadable study storage: nothing to draw
            self._failures._failed("plots", "the study's trials (for the plots)", exc)
            return
        if best is not None and best.value is not None:
            self.update_best(best.number, best.value, best.params)
        with tempfile.TemporaryDirectory(prefix="rltune_plots_") as tmp:
            csv_path = Path(tmp) / "trials.csv"
            csv_path.write_text(trials_csv(trials, self.trial_runs))
            self._attempt("plots", "trials.csv", lambda: self.client.log_artifact(self.parent_run_id, str(csv_path)))
            from rltune.orchestrator import _plots

            plot_dir = Path(tmp) / "plots"
            plot_dir.mkdir()
            for name, problem in _plots.study_plots(study, trials, plot_dir).items():
                if problem is not None:
                    self._failures._failed("plots", f"plot {name}", problem)
            if any(plot_dir.iterdir()):
                self._attempt("plots", "the study's plots",
                              lambda: self.client.log_artifacts(self.parent_run_id, str(plot_dir), "plots"))

    def close(self, *, interrupted: bool = False) -> None:
        """End the parent run: FINISHED, or KILLED when the study was interrupted (a resume reopens it)."""
        if self.parent_run_id is None:
            return
        status = "KILLED" if interrupted else "FINISHED"
        self._attempt("study", f"the end ({status}) of the study's parent run",
                      lambda: self.client.set_terminated(self.parent_run_id, status=status))
        summary = self.summary()
        if summary:
            logger.warning("%s", summary)


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
        duration = (t.datetime_complete - t.datetime_start).total_seconds() if t.datetime_complete and t.datetime_start else ""
        writer.writerow([t.number, t.state.name, "" if t.value is None else t.value,
                         t.datetime_start.isoformat(timespec="seconds") if t.datetime_start else "",
                         t.datetime_complete.isoformat(timespec="seconds") if t.datetime_complete else "",
                         f"{duration:.1f}" if duration != "" else "",
                         *[_csv_value(t.params.get(n, "")) for n in names], (run_ids or {}).get(t.number, "")])
    return out.getvalue()


def _csv_value(value: Any) -> Any:
    return json.dumps(value) if isinstance(value, (list, tuple, dict)) else value


# -- the trial side ----------------------------------------------------------------------------
class TrialTracker(_Tracker):
    """One trial's run: results, checkpoints, files, learning curve, policy model.

    Built from a run id and a tracking URI (the parent passes them down), so
    it may live in the trial's own process. ``run_id`` None (the orchestrator
    could not create the run) makes every call a no-op recorded in
    ``unrecorded``.

    Checkpoints: with ``keep_checkpoints_num`` N, the run keeps the N latest
    uploaded checkpoints plus the best one (by ``metric`` in ``mode`` of the
    result logged before it, or the ``score`` given); others are deleted
    from the run's artifacts as new ones arrive.
    """

    def __init__(
        self,
        run_id: str | None,
        tracking_uri: str,
        *,
        keep_checkpoints_num: int | None = None,
        metric: str = "episode_reward_mean",
        mode: str = "max",
    ) -> None:
        super().__init__(tracking_uri, f"run {run_id}")
        if mode not in ("max", "min"):
            raise ValueError(f"mode must be 'max' or 'min', but got {mode=!r}")
        self.run_id = run_id
        self.keep_checkpoints_num = keep_checkpoints_num
        self.metric = metric
        self.mode = mode
        self.history: list[dict[str, Any]] = []  # per result: iteration, timesteps, metric, curriculum phase/task
        self.checkpoints: list[tuple[str, float | None]] = []  # uploaded (name, score), oldest first
        self._last_task: Any = None
        self._artifact_repo: Any = None

    def _run_attempt(self, kind: str, what: str, fn: Callable[[], T]) -> tuple[bool, T | None]:
        if self.run_id is None:
            self._failures._record(kind, f"{what} (the trial has no MLflow run)")
            return False, None
        return self._attempt(kind, what, fn)

    # -- results ----------------------------------------------------------------------
    def log_result(self, result: Mapping[str, Any]) -> None:
        """Log every numeric entry of one result at ``step = training_iteration``, in one batch call.

        Nested keys are joined with '/' (``info/learner/default_policy/entropy``,
        ``custom_metrics/pole_angle_mean``); bools are 0/1; NaN and
        non-numeric values are left out; a non-numeric ``curriculum_task``
        goes to the ``rltune.curriculum_task`` tag when it changes. More than
        1000 metrics go in chunks of 1000 (MLflow's batch limit).
        """
        step = _step(result, len(self.history) + 1)
        metrics = flatten_metrics(result)
        self.history.append(_curve_point(result, step, self.metric))
        if not metrics and self.run_id is None:
            return
        from mlflow.entities import Metric, RunTag

        now = int(time.time() * 1000)
        entries = [Metric(key, value, now, step) for key, value in metrics.items()]
        tags = []
        task = result.get("curriculum_task")
        if task is not None and _number(task) is None and task != self._last_task:
            tags.append(RunTag("rltune.curriculum_task", json.dumps(task, default=repr)[: _limits()[1]]))
        per_batch = _limits()[3]

        def log() -> None:
            for i in range(0, max(len(entries), 1), per_batch):
                self.client.log_batch(self.run_id, metrics=entries[i:i + per_batch], tags=tags if i == 0 else [],
                                      synchronous=True)

        ok, _ = self._run_attempt("metrics", f"the metrics of iteration {step} ({len(entries)} values)", log)
        if ok:
            self._last_task = task

    # -- artifacts ----------------------------------------------------------------------
    def log_checkpoint(self, path: str | os.PathLike[str], *, score: float | None = None) -> str | None:
        """Upload a checkpoint directory as ``checkpoints/<name>``; its artifact path, None if not recorded.

        ``score`` (default: ``metric`` of the last logged result) decides which
        checkpoint is the best one kept with ``keep_checkpoints_num``.
        """
        path = Path(path)
        name = path.name
        if score is None and self.history:
            score = self.history[-1].get("metric")
        ok, _ = self._run_attempt("checkpoint", f"checkpoint {name}",
                                  lambda: self.client.log_artifacts(self.run_id, str(path), f"checkpoints/{name}"))
        if not ok:
            return None
        self.checkpoints = [c for c in self.checkpoints if c[0] != name] + [(name, score)]
        for old in self._checkpoints_to_drop():
            self.delete_checkpoint(old)
        return f"checkpoints/{name}"

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

        def delete() -> None:
            if self._artifact_repo is None:
                from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository

                uri = self.client.get_run(self.run_id).info.artifact_uri
                self._artifact_repo = get_artifact_repository(uri, tracking_uri=self.tracking_uri)
            self._artifact_repo.delete_artifacts(f"checkpoints/{name}")

        ok, _ = self._run_attempt("checkpoint", f"the deletion of checkpoint {name}", delete)
        if ok:
            self.checkpoints = [c for c in self.checkpoints if c[0] != name]

    def log_files(self, *paths: str | os.PathLike[str], artifact_path: str | None = None) -> None:
        """Upload files (``params.json``, ``result.json``, ``error.txt`` ...); missing ones are skipped."""
        for path in paths:
            path = Path(path)
            if not path.is_file():
                continue
            self._run_attempt("files", f"file {path.name}",
                              lambda path=path: self.client.log_artifact(self.run_id, str(path), artifact_path))

    def log_text(self, text: str, artifact_file: str) -> None:
        """Upload ``text`` as the artifact ``artifact_file`` (e.g. a crashed trial's traceback as ``error.txt``)."""
        self._run_attempt("files", f"file {artifact_file}", lambda: self.client.log_text(self.run_id, text, artifact_file))

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
        from rltune.orchestrator import _plots

        def log() -> None:
            with tempfile.TemporaryDirectory(prefix="rltune_curve_") as tmp:
                png = Path(tmp) / "learning_curve.png"
                _plots.learning_curve(points, png, metric=metric)
                self.client.log_artifact(self.run_id, str(png), "plots")

        self._run_attempt("plots", "the learning curve", log)

    def log_policy_model(self, trainer_or_checkpoint: Any, *, artifact_path: str = "policy_model") -> str | None:
        """Log the trained policy as an MLflow pyfunc model; its URI ``runs:/<run_id>/policy_model``, or None.

        ``trainer_or_checkpoint``: a rltune Trainer, or the path of one of its
        checkpoints. ``mlflow.pyfunc.load_model(uri).predict(observations)``
        maps a batch of raw observations to actions (see
        :mod:`rltune.orchestrator._mlflow_model`).
        """

        def log() -> str:
            from rltune.orchestrator._mlflow_model import save_policy_model

            with tempfile.TemporaryDirectory(prefix="rltune_model_") as tmp:
                model_dir = Path(tmp) / "model"
                save_policy_model(trainer_or_checkpoint, model_dir)
                self.client.log_artifacts(self.run_id, str(model_dir), artifact_path)
            return f"runs:/{self.run_id}/{artifact_path}"

        _, uri = self._run_attempt("model", "the policy model", log)
        return uri


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
