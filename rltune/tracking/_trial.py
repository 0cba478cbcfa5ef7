"""One trial's MLflow run: results at their steps, checkpoints (with retention), files, curve, policy model."""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence, TypeVar

from rltune._metrics import finite
from rltune.tracking._base import Shared, Tracker, guarded
from rltune.tracking._keys import flatten_metrics, policy_key
from rltune.tracking._mlflow_compat import MAX_TAG_VAL_LENGTH, artifact_repository
from rltune.tracking._mlflow_compat import limits as mlflow_limits
from rltune.tracking._results import curve_point, step_of
from rltune.tracking._retention import checkpoints_to_drop
from rltune.tracking._store import STEP_KEY

T = TypeVar("T")


class TrialTracker(Tracker):
    """One trial's run: results, checkpoints, files, learning curve, policy model.

    Built from a run id and a tracking URI (the parent passes them down), so
    it may live in the trial's own process; or made by a
    :class:`StudyTracker` (``open_trial``, ``trial``) in the orchestrator,
    sharing its client and failure log.
    ``run_id`` None (the orchestrator could not create the run) makes every
    call a no-op recorded in ``unrecorded``.

    Checkpoints: with ``keep_checkpoints_num`` N, the run keeps the N latest
    uploaded checkpoints plus the best one (by ``metric`` in ``mode`` of the
    result logged before it, or the ``score`` given); others are deleted
    from the run's artifacts as new ones arrive (:mod:`rltune.tracking._retention`).
    """

    def __init__(
        self,
        run_id: str | None,
        tracking_uri: str,
        *,
        keep_checkpoints_num: int | None = None,
        metric: str = "episode_reward_mean",
        mode: str = "max",
        _shared: Shared | None = None,
        _label: str = "",
    ) -> None:
        super().__init__(_shared or Shared(tracking_uri, f"run {run_id}"))
        if mode not in ("max", "min"):
            raise ValueError(f"mode must be 'max' or 'min', but got {mode=!r}")
        self.run_id = run_id
        self.keep_checkpoints_num = keep_checkpoints_num
        self.metric = metric
        self.mode = mode
        self.history: list[dict[str, Any]] = []  # per result: iteration, timesteps, metric, curriculum phase/task
        self.checkpoints: list[tuple[str, float | None]] = []  # uploaded (name, score), oldest first
        # the steps the run holds, each with the timestamp (ms) of its latest values (loaded when a run is reopened)
        self.logged_steps: dict[int, int] = {}
        self._history_steps: set[int] = set()
        self._last_metric: float | None = None  # of the result logged last (a re-run's, not the furthest step's)
        self._prefix = f"{_label}: " if _label else ""
        self._last_task: Any = None
        self._artifact_repo: Any = None

    def _logged(self, kind: str, what: str, fn: Callable[[], T]) -> tuple[bool, T | None]:
        """Inside a task: ``fn()`` against this trial's run, accounted for; a no-op without run."""
        what = self._prefix + what
        if self.run_id is None:
            self._shared.failures.record(kind, f"{what} (the trial has no MLflow run)")
            return False, None
        return self._attempt(kind, what, fn)

    # -- results ----------------------------------------------------------------------
    def log_result(self, result: Mapping[str, Any], *, replace: bool = False) -> None:
        """Log every numeric entry of one result at ``step = training_iteration``, in one batch call.

        Nested keys are joined with '/' (``info/learner/default_policy/entropy``,
        ``custom_metrics/pole_angle_mean``); bools are 0/1; NaN, infinities
        and non-numeric values are left out; a non-numeric ``curriculum_task``
        goes to the ``rltune.curriculum_task`` tag when it changes. More than
        1000 metrics go in chunks of 1000 (MLflow's batch limit).

        A step the run already holds (``logged_steps``) is a replay (a
        reconciliation re-sending recorded results) and is not logged again,
        unless ``replace``: the trial just ran the step (again, after
        restoring a checkpoint), and its values are logged at the same step
        with a later timestamp, so they are the step's latest values (MLflow
        keeps the earlier ones in the metric's history). The learning curve
        takes the new point.
        """
        self.log_results([result], replace=replace)

    def log_results(self, results: Sequence[Mapping[str, Any]], *, timestamp_ms: int | None = None,
                    replace: bool = False) -> None:
        """Log several results (in order) as :meth:`log_result` does, packed into as few batch calls as fit.

        A tracker that fell behind (a tracking process catching up) sends the
        iterations it has queued together: MLflow's cost is per call far more
        than per metric. ``timestamp_ms``: when the results arrived (default:
        now). Of two results of one step in ``results``, the later one is
        logged with ``replace``, else the first one.
        """
        if not results:
            return
        now = int(time.time() * 1000) if timestamp_ms is None else int(timestamp_ms)
        rows: dict[int, dict[str, float]] = {}
        task_tags: list[str] = []  # a changed task is a tag; of several in one call, the latest is the run's task
        for result in results:
            step = step_of(result, len(self.history) + 1)
            self._curve_point(result, step, replace)
            task = result.get("curriculum_task")
            if task is not None and finite(task) is None and task != self._last_task:
                task_tags.append(json.dumps(task, default=repr)[:MAX_TAG_VAL_LENGTH])
                self._last_task = task
            if replace or step not in rows:
                rows.pop(step, None)  # a step run again within the batch: its last run, in order
                rows[step] = flatten_metrics(result)

        def log() -> None:
            from mlflow.entities import Metric, RunTag

            fresh = {step: row for step, row in rows.items() if replace or step not in self.logged_steps}
            if not fresh:
                return
            # later than the values it replaces (logged by an earlier session, or a reconciliation after `now`)
            stamp = max([now, *(self.logged_steps[step] + 1 for step in fresh if step in self.logged_steps)])
            # the step key last: a step whose STEP_KEY is stored is stored whole (chunks go in order)
            entries = [Metric(key, metrics[key], stamp, step) for step, metrics in fresh.items()
                       for key in sorted(metrics, key=lambda k: k == STEP_KEY)]
            tags = [RunTag("rltune.curriculum_task", task_tags[-1])] if task_tags else []
            limits = mlflow_limits()  # a batch holds at most 1000 metrics and 1000 entities in all
            per_batch = min(limits.metrics_per_batch, limits.entities_per_batch - len(tags))
            for i in range(0, max(len(entries), 1), per_batch):
                self.client.log_batch(self.run_id, metrics=entries[i:i + per_batch], tags=tags if i == 0 else [],
                                      synchronous=True)
            self.logged_steps.update(dict.fromkeys(fresh, stamp))

        steps = list(rows)
        values = sum(len(metrics) for metrics in rows.values())
        what = (f"the metrics of iteration {steps[0]} ({values} values)" if len(rows) == 1
                else f"the metrics of iterations {steps[0]}..{steps[-1]} ({values} values)")
        guarded(lambda: self._logged("metrics", what, log))

    def load_logged_steps(self) -> bool:
        """Learn which steps the run holds (a reopened run), with their latest timestamps; False if MLflow failed."""
        def held() -> dict[int, int]:
            latest: dict[int, int] = {}
            for m in self.client.get_metric_history(self.run_id, STEP_KEY):
                latest[m.step] = max(m.timestamp, latest.get(m.step, m.timestamp))
            return latest

        ok, steps = self._logged("metrics", "the steps already logged", held)
        for step, stamp in (steps or {}).items():
            self.logged_steps[step] = max(stamp, self.logged_steps.get(step, stamp))
        return ok

    def _curve_point(self, result: Mapping[str, Any], step: int, replace: bool) -> None:
        """The learning curve's point of ``result``: a new step's, or (``replace``) the step's new one."""
        point = curve_point(result, step, self.metric)
        if step not in self._history_steps:
            self._history_steps.add(step)
            self.history.append(point)
        elif replace:
            self.history = [point if p["iteration"] == step else p for p in self.history]
        else:
            return
        self._last_metric = point["metric"]

    # -- artifacts ----------------------------------------------------------------------
    def log_checkpoint(self, path: str | os.PathLike[str], *, score: float | None = None,
                       name: str | None = None) -> str | None:
        """Upload a checkpoint directory as ``checkpoints/<name>``; its artifact path, None if not recorded.

        ``name``: default the directory's name (given when ``path`` is a copy).
        ``score`` (default: ``metric`` of the result logged last) decides which
        checkpoint is the best one kept with ``keep_checkpoints_num``.
        """
        path = Path(path)
        name = name or path.name
        if score is None:
            score = self._last_metric

        def upload() -> str | None:
            ok, _ = self._logged("checkpoint", f"checkpoint {name}", lambda: self.client.log_artifacts(
                self.run_id, str(path), f"checkpoints/{name}"))
            if not ok:
                return None
            self.checkpoints = [c for c in self.checkpoints if c[0] != name] + [(name, score)]
            for old in checkpoints_to_drop(self.checkpoints, self.keep_checkpoints_num, self.mode):
                self._delete_checkpoint(old)
            return f"checkpoints/{name}"

        return guarded(upload)

    def delete_checkpoint(self, name: str) -> None:
        """Delete ``checkpoints/<name>`` from the run's artifacts (the local directory is not touched)."""
        guarded(lambda: self._delete_checkpoint(name))

    def _delete_checkpoint(self, name: str) -> None:
        def delete() -> None:
            if self._artifact_repo is None:
                uri = self.client.get_run(self.run_id).info.artifact_uri
                self._artifact_repo = artifact_repository(uri, self.tracking_uri)
            self._artifact_repo.delete_artifacts(f"checkpoints/{name}")

        ok, _ = self._logged("checkpoint", f"the deletion of checkpoint {name}", delete)
        if ok:
            self.checkpoints = [c for c in self.checkpoints if c[0] != name]

    def log_files(self, *paths: str | os.PathLike[str], artifact_path: str | None = None) -> None:
        """Upload files (``params.json``, ``result.json``, ``error.txt`` ...); missing ones are skipped."""
        for path in (Path(p) for p in paths):
            if path.is_file():
                guarded(lambda: self._logged("files", f"file {path.name}",
                                             lambda: self.client.log_artifact(self.run_id, str(path), artifact_path)))

    def log_text(self, text: str, artifact_file: str) -> None:
        """Upload ``text`` as the artifact ``artifact_file`` (e.g. a crashed trial's traceback as ``error.txt``)."""
        guarded(lambda: self._logged("files", f"file {artifact_file}",
                                     lambda: self.client.log_text(self.run_id, text, artifact_file)))

    def set_tags(self, tags: Mapping[str, str]) -> None:
        """Set tags on the run (values cut to MLflow's limit)."""
        from mlflow.entities import RunTag

        entries = [RunTag(key, str(value)[:MAX_TAG_VAL_LENGTH]) for key, value in tags.items()]
        guarded(lambda: self._logged("tags", ", ".join(tags), lambda: self.client.log_batch(self.run_id, tags=entries)))

    def log_learning_curve(self, results: Iterable[Mapping[str, Any]] | None = None, *, metric: str | None = None) -> None:
        """A PNG (``plots/learning_curve.png``) of ``metric`` against ``timesteps_total``, curriculum phase changes marked.

        An automatic curriculum's results also give ``plots/task_sampling.png``,
        a heat map of its task distribution over training.

        ``results``: the trial's results (default: those logged through this tracker).
        """
        metric = metric or self.metric
        if results is None and metric == self.metric:
            points = list(self.history)
        else:
            points = [curve_point(r, step_of(r, i + 1), metric) for i, r in enumerate(results or [])]
        if not points:
            return

        def log() -> None:
            from rltune.tracking import _plots

            with tempfile.TemporaryDirectory(prefix="rltune_curve_") as tmp:
                png = Path(tmp) / "learning_curve.png"
                _plots.learning_curve(points, png, metric=metric)
                self.client.log_artifact(self.run_id, str(png), "plots")
                if any(p.get("task_probs") for p in points):  # an automatic curriculum
                    _plots.task_sampling(points, Path(tmp) / "task_sampling.png")
                    self.client.log_artifact(self.run_id, str(Path(tmp) / "task_sampling.png"), "plots")

        guarded(lambda: self._logged("plots", "the learning curve", log))

    def log_policy_model(self, trainer_or_checkpoint: Any, *, artifact_path: str = "policy_model") -> str | None:
        """Log the trained policy as an MLflow pyfunc model; its URI ``runs:/<run_id>/policy_model``, or None.

        ``trainer_or_checkpoint``: a rltune Trainer, or the path of one of its
        checkpoints. ``mlflow.pyfunc.load_model(uri).predict(observations)``
        maps a batch of raw observations to actions (see
        :mod:`rltune.tracking._mlflow_model`). A multi-agent trainer's trained
        policies are one model each, ``policy_model/<policy id>`` (the id as
        :func:`~rltune.tracking._keys.policy_key` writes it); the URI returned
        is then their parent (None when no policy is trained).
        """
        def log() -> str | None:
            from rltune.tracking._mlflow_model import exported_policy_ids, save_policy_model

            ids = exported_policy_ids(trainer_or_checkpoint)
            if not ids:
                return None  # only heuristics and frozen policies: no trained policy to serve
            with tempfile.TemporaryDirectory(prefix="rltune_model_") as tmp:
                if ids == ["default_policy"]:
                    save_policy_model(trainer_or_checkpoint, Path(tmp) / "model")
                else:
                    (Path(tmp) / "model").mkdir()
                    for pid in ids:
                        save_policy_model(trainer_or_checkpoint, Path(tmp) / "model" / policy_key(pid), policy_id=pid)
                self.client.log_artifacts(self.run_id, str(Path(tmp) / "model"), artifact_path)
            return f"runs:/{self.run_id}/{artifact_path}"

        return guarded(lambda: self._logged("model", "the policy model", log)[1])
