"""The study's experiment, its parent run (best trial, trials.csv, plots) and one nested run per trial."""

from __future__ import annotations

import logging
import math
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from rltune.tracking._base import Shared, Tracker, guarded
from rltune.tracking._keys import clean_key, flatten_params, run_name
from rltune.tracking._mlflow_compat import limits as mlflow_limits
from rltune.tracking._reconcile import reconcile
from rltune.tracking._store import (
    EXPERIMENT_KIND, RUN_STATUS, TAG_PARENT, TAG_PRUNER, TAG_RETRIED_BY, TAG_RETRY_OF, TAG_ROLE, TAG_SAMPLER,
    TAG_STATE, TAG_STUDY, TAG_TRIAL, TAG_TRUNCATED, artifact_root, is_remote, resolve_tracking_uri)
from rltune.tracking._summary import study_snapshot, trials_csv
from rltune.tracking._trial import TrialTracker
from rltune.tracking._ui_links import NOTE_TAG, mark_study_experiment, study_note

logger = logging.getLogger("rltune.tracking")


class StudyTracker(Tracker):
    """The study's experiment and parent run, and one nested run per trial (orchestrator process).

    Call order (one thread): ``StudyTracker(...)``; per trial ``start_trial``
    (or ``open_trial``), the trial's logging through a :class:`TrialTracker`,
    then ``end_trial``; ``refresh_study_plots(study, final=False)`` as trials
    end and ``refresh_study_plots(study)`` at the end; ``close()``. Every
    method returns normally even when MLflow fails (see :mod:`rltune.tracking`).
    The orchestrator runs it in the study's tracking process
    (:mod:`rltune.tracking._server`), so no MLflow call waits in its loop.
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
        parent_wait_s: float = 0.0,
        start_time_ms: int | None = None,
    ) -> None:
        uri = resolve_tracking_uri(tracking_uri, results_dir)
        super().__init__(Shared(uri, f"study {study_name!r}"))
        self.results_dir = Path(os.path.expanduser(str(results_dir)))
        self.study_name = study_name
        self.sampler_name = sampler_name
        self.pruner_name = pruner_name
        self.study_params = flatten_params({"study": dict(study_params)}) if study_params else {}
        metric = (study_params or {}).get("metric")
        self.metric_names = list(metric) if isinstance(metric, (list, tuple)) else None  # a multi-objective study's
        self.plot_interval_s = plot_interval_s
        self.parent_wait_s = parent_wait_s
        self.start_time_ms = start_time_ms  # the study's start: a new parent run's start_time
        self.experiment_id: str | None = None
        self.parent_run_id: str | None = None
        self.trial_runs: dict[int, str] = {}  # trial number -> run id
        self._trackers: dict[int, TrialTracker] = {}  # trial number -> its tracker (open_trial)
        self._last_plots = -math.inf
        self._closed = False
        self._finished = False  # the parent run was ended (finish) before close
        guarded(self._ensure_open)

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
                    NOTE_TAG: study_note(self.study_name, self.sampler_name, self.pruner_name),
                })
                return str(experiment_id)
            except MlflowException as exc:  # created by another process meanwhile
                found = client.get_experiment_by_name(self.study_name)
                if found is None:
                    raise exc
        if found.lifecycle_stage == "deleted":
            client.restore_experiment(found.experiment_id)
        mark_study_experiment(client, found)
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
        run = client.create_run(self.experiment_id, run_name=self.study_name, start_time=self.start_time_ms, tags={
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
    def start_trial(self, trial_number: int, params: Mapping[str, Any], key_params: Mapping[str, Any], *,
                    start_time_ms: int | None = None) -> str | None:
        """Create (or, for a resumed trial, reopen) the trial's nested run; its run id, None if MLflow failed.

        ``params``: the trial's full config (logged flattened with dotted keys);
        ``key_params``: the values the sampler chose (they name the run).
        ``start_time_ms``: the trial's own start (a new run's ``start_time``;
        default: now), so that the run's duration is the trial's even when it
        is recorded late.
        """
        flat = flatten_params(params)
        return guarded(lambda: self._start_trial(trial_number, flat, dict(key_params), start_time_ms))

    def open_trial(self, trial_number: int, params: Mapping[str, Any], key_params: Mapping[str, Any], *,
                   retry_of: int | None = None, start_time_ms: int | None = None,
                   **trial_options: Any) -> "TrialTracker":
        """:meth:`start_trial` and a :class:`TrialTracker` on the run, sharing this tracker's client.

        ``retry_of``: the failed trial this one retries; the runs are linked
        by tags (``rltune.retry_of`` on this one, ``rltune.retried_by`` on that
        one's). ``trial_options``:
        ``keep_checkpoints_num``, ``metric``, ``mode`` of :class:`TrialTracker`.
        """
        tracker = TrialTracker(None, self.tracking_uri, _shared=self._shared, _label=f"trial {trial_number}",
                               **trial_options)
        flat = flatten_params(params)

        def start() -> None:
            reopened = trial_number in self.trial_runs
            tracker.run_id = self._start_trial(trial_number, flat, dict(key_params), start_time_ms)
            if reopened and tracker.run_id is not None:
                tracker.load_logged_steps()
            self._trackers[trial_number] = tracker
            if retry_of is not None and tracker.run_id is not None:
                self._link_retry(trial_number, tracker.run_id, retry_of)

        guarded(start)
        return tracker

    def _link_retry(self, number: int, run_id: str, retry_of: int) -> None:
        """Tag a retry's run and the run of the trial it retries with each other's trial number."""
        self._attempt("trial", f"the retry link of trial {number}",
                      lambda: self.client.set_tag(run_id, TAG_RETRY_OF, str(retry_of)))
        failed_run = self.trial_runs.get(retry_of)
        if failed_run is not None:
            self._attempt("trial", f"the retry link of trial {retry_of}",
                          lambda: self.client.set_tag(failed_run, TAG_RETRIED_BY, str(number)))

    def _start_trial(self, number: int, flat_params: dict[str, str], key_params: dict[str, Any],
                     start_time_ms: int | None = None) -> str | None:
        if not self._ensure_open():
            self._shared.failures.record("trial", f"the run of trial {number} (no parent run)")
            return None
        ok, run_id = self._attempt("trial", f"the run of trial {number}",
                                   lambda: self._create_or_reopen(number, key_params, start_time_ms))
        if ok and run_id is not None:
            self.trial_runs[number] = run_id
            self._attempt("params", f"the params of trial {number}", lambda: self._trial_params(run_id, flat_params))
        return run_id

    def _create_or_reopen(self, number: int, key_params: Mapping[str, Any], start_time_ms: int | None) -> str:
        client = self.client
        run_id = self.trial_runs.get(number)
        if run_id is not None:  # resumed: the same run goes on
            client.update_run(run_id, status="RUNNING")
            client.set_tag(run_id, TAG_STATE, "RUNNING")
            return run_id
        tags = {TAG_ROLE: "trial", TAG_STUDY: self.study_name, TAG_TRIAL: str(number), TAG_STATE: "RUNNING",
                TAG_SAMPLER: self.sampler_name, TAG_PRUNER: self.pruner_name, TAG_PARENT: self.parent_run_id}
        return client.create_run(self.experiment_id, run_name=run_name(number, key_params), start_time=start_time_ms,
                                 tags=tags).info.run_id

    def _trial_params(self, run_id: str, flat_params: dict[str, str]) -> None:
        client = self.client
        existing = client.get_run(run_id).data.params
        truncated = _log_params(client, run_id, flat_params, existing)
        if truncated:
            limits = mlflow_limits()
            note = f"values cut to MLflow's limit of {limits.param_value} characters: " + ", ".join(truncated)
            client.set_tag(run_id, TAG_TRUNCATED, note[:limits.tag_value])

    def log_seed_runs(self, number: int, runs: list[dict[str, Any]], state: str) -> None:
        """The seeds of trial ``number`` as runs nested under its run (:mod:`._seed_runs`)."""
        from rltune.tracking._seed_runs import log_seed_runs

        run_id = self.trial_runs.get(number)
        if run_id is not None:
            self._attempt("seeds", f"the seed runs of trial {number}", lambda: log_seed_runs(
                self.client, self.experiment_id, self.study_name, run_id, number, runs, state))

    def end_trial(self, run: "str | TrialTracker | None", state: str, *, reason: str | None = None,
                  error: str | None = None, end_time_ms: int | None = None) -> None:
        """End the trial's run: COMPLETE -> FINISHED, PRUNED -> KILLED, FAIL -> FAILED, INTERRUPTED -> KILLED.

        ``run``: its run id or the :class:`TrialTracker` from :meth:`open_trial`.
        The rltune state goes to the ``rltune.state`` tag, ``reason`` (why it
        stopped) to ``rltune.reason``, and the tail of a failed trial's
        traceback to ``rltune.error``. ``end_time_ms``: the trial's own end (the
        run's ``end_time``; default: now). A trial without run (MLflow failed
        when it started) is a no-op.
        """
        if state not in RUN_STATUS:
            raise ValueError(f"state must be one of {sorted(RUN_STATUS)}, but got {state=!r}")

        def end() -> None:
            run_id = run.run_id if isinstance(run, TrialTracker) else run
            if run_id is None:
                return
            from mlflow.entities import RunTag

            max_tag = mlflow_limits().tag_value

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
                    self.client.set_terminated(run_id, status=RUN_STATUS[state], end_time=end_time_ms)

            self._attempt("trial", f"the end ({state}) of run {run_id}", log)

        guarded(end)

    def trial(self, run_id: str | None, **trial_options: Any) -> "TrialTracker":
        """A :class:`TrialTracker` on a trial's run in this process, sharing this tracker's client."""
        return TrialTracker(run_id, self.tracking_uri, _shared=self._shared, _label=f"run {run_id}", **trial_options)

    def trial_tracker_args(self, run_id: str | None) -> dict[str, Any]:
        """Picklable arguments of ``TrialTracker(**args)`` for the trial's own process."""
        return {"run_id": run_id, "tracking_uri": self.tracking_uri}

    # -- reconciling with the trial directories ----------------------------------------
    def reconcile(self, trials: Sequence[Any], study_dir: str | os.PathLike[str], *, finished_only: bool = False,
                  policy_model: bool = False, **trial_options: Any) -> list[int]:
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
        A run made here gets the trial's start and end times from Optuna.
        Returns the numbers of the trials whose run lacked something.
        """
        trials = list(trials)
        return guarded(lambda: reconcile(self, trials, Path(study_dir), finished_only, policy_model,
                                         dict(trial_options))) or []

    # -- the parent run's summary -------------------------------------------------------
    def update_best(self, trial_number: int, value: float, params: Mapping[str, Any]) -> None:
        """Record the best trial so far on the parent run: tags and the ``best_value`` metric (step = trial number)."""
        flat = flatten_params(params)
        guarded(lambda: self._update_best(trial_number, float(value), flat))

    def _update_best(self, trial_number: int, value: float, flat_params: dict[str, str]) -> None:
        if not self._ensure_open():
            return
        from mlflow.entities import Metric, RunTag

        limits = mlflow_limits()
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
        drawn.
        """
        now = time.monotonic()
        if not final and now - self._last_plots < self.plot_interval_s:
            return
        self._last_plots = now
        try:
            trials = study.get_trials(deepcopy=True)
            directions = list(study.directions)
        except Exception as exc:  # noqa: BLE001 - an unreadable study storage: nothing to draw
            self._shared.failures.failed("plots", "the study's trials (for the plots)", exc)
            return
        guarded(lambda: self._refresh(trials, directions))

    def draw_study_plots(self, trials: list[Any], directions: list[Any]) -> None:
        """:meth:`refresh_study_plots` from copies of the study's trials (``FrozenTrial``) and directions.

        For a tracker in another process than the study (the tracking process
        gets the trials pickled); never throttled.
        """
        guarded(lambda: self._refresh(trials, directions))

    def _refresh(self, trials: list[Any], directions: list[Any]) -> None:
        if not self._ensure_open():
            return
        complete = [t for t in trials if t.state.name == "COMPLETE" and t.values]
        if complete and len(directions) == 1:  # a multi-objective study's front is its plot
            best = (max if directions[0].name == "MAXIMIZE" else min)(complete, key=lambda t: t.values[0])
            self._update_best(best.number, float(best.values[0]), flatten_params(best.params))
        with tempfile.TemporaryDirectory(prefix="rltune_plots_") as tmp:
            csv_path = Path(tmp) / "trials.csv"
            csv_path.write_text(trials_csv(trials, self.trial_runs))
            self._attempt("plots", "trials.csv", lambda: self.client.log_artifact(self.parent_run_id, str(csv_path)))
            from rltune.tracking import _plots

            plot_dir = Path(tmp) / "plots"
            plot_dir.mkdir()
            try:
                snapshot = study_snapshot(trials, directions, self.metric_names)
            except Exception as exc:  # noqa: BLE001
                self._shared.failures.failed("plots", "a copy of the study for the plots", exc)
                return
            from rltune.tracking._pbt_plot import pbt_plot

            problems = {**_plots.study_plots(snapshot, trials, plot_dir), **pbt_plot(trials, plot_dir)}
            for name, problem in problems.items():
                self._shared.failures.failed("plots", f"plot {name}", problem)
            if any(plot_dir.iterdir()):
                self._attempt("plots", "the study's plots",
                              lambda: self.client.log_artifacts(self.parent_run_id, str(plot_dir), "plots"))

    def finish(self, *, interrupted: bool = False, end_time_ms: int | None = None) -> None:
        """End the parent run now: FINISHED, or KILLED when interrupted (a resume reopens it).

        ``end_time_ms``: the study's end (default: now). The study's tracking
        process calls it as soon as the study ends, before reconciling;
        :meth:`close` then leaves the parent run as it is.
        """
        status = "KILLED" if interrupted else "FINISHED"
        if self.parent_run_id is None:
            return
        attempt = guarded(lambda: self._attempt(
            "study", f"the end ({status}) of the study's parent run",
            lambda: self.client.set_terminated(self.parent_run_id, status=status, end_time=end_time_ms)))
        self._finished = self._finished or bool(attempt and attempt[0])

    def close(self, *, interrupted: bool = False) -> None:
        """End the parent run (unless :meth:`finish` did) and log what was lost.

        A second call does nothing (the summary is logged once).
        """
        if self._closed:
            return
        self._closed = True
        if not self._finished:
            self.finish(interrupted=interrupted)
        summary = self.summary()
        if summary:
            logger.warning("%s", summary)


def _log_params(client: Any, run_id: str, params: Mapping[str, str], existing: Mapping[str, str]) -> list[str]:
    """Log params not yet in ``existing``, values cut to MLflow's limit; the keys that were cut."""
    from mlflow.entities import Param

    limits = mlflow_limits()
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
