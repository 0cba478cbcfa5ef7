"""Reconciling a study's MLflow runs with its trial directories and Optuna's states: log only what is missing.

The trial directories hold the truth (``result.json``, ``checkpoint_*``,
``error.txt``) and Optuna the trials' states; see
:meth:`rltune.tracking.StudyTracker.reconcile`.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from rltune._trial_files import (ERROR_FILE, PARAMS_FILE, RESULT_FILE, checkpoint_iteration, list_checkpoints,
                                 trial_dir_name)
from rltune.tracking._keys import clean_key, flatten_metrics, flatten_params
from rltune.tracking._results import curve_point, read_json, read_results, step_of
from rltune.tracking._retention import best_checkpoint
from rltune.tracking._store import RUN_STATUS, TAG_STATE, TAG_SYNCED
from rltune.tracking._trial import TrialTracker


def reconcile(study_tracker: Any, trials: list[Any], study_dir: Path, finished_only: bool, policy_model: bool,
              options: dict[str, Any]) -> list[int]:
    """Reconcile each trial (see ``StudyTracker.reconcile``); the numbers of the trials whose run lacked something."""
    repaired: list[int] = []
    if not study_tracker._ensure_open():
        return repaired
    for t in trials:
        state = t.state.name
        if state == "RUNNING" and not finished_only:
            state = "INTERRUPTED"
        trial_dir = study_dir / trial_dir_name(t.number)
        if state not in RUN_STATUS or state == "RUNNING" or not trial_dir.is_dir():
            continue
        try:
            if _reconcile_trial(study_tracker, t, state, trial_dir, policy_model, options):
                repaired.append(t.number)
        except Exception as exc:  # noqa: BLE001 - e.g. an unreadable trial directory
            study_tracker._shared.failures.failed("reconcile", f"the reconciliation of trial {t.number}", exc)
    return repaired


def time_ms(when: Any) -> int | None:
    """A ``datetime`` (an Optuna trial's start or end) in ms since the epoch, MLflow's unit; None stays None."""
    return None if when is None else int(when.timestamp() * 1000)

def _reconcile_trial(study_tracker: Any, t: Any, state: str, trial_dir: Path, policy_model: bool,
                     options: dict[str, Any]) -> bool:
    """Log what the trial's run lacks; whether it lacked anything (a run made here, steps, files, its state)."""
    number = t.number
    files = [trial_dir / name for name in (PARAMS_FILE, RESULT_FILE, ERROR_FILE)]
    results = read_results(trial_dir / RESULT_FILE)
    checkpoints = {path.name: (iteration, path) for iteration, path in list_checkpoints(trial_dir)}
    finished = state != "INTERRUPTED"
    digest = hashlib.sha1(json.dumps([
        state, [(p.name, p.stat().st_size) for p in files if p.is_file()], sorted(checkpoints),
        policy_model and finished]).encode()).hexdigest()
    run_id = study_tracker.trial_runs.get(number)
    made = run_id is None
    if made:  # its "open" never reached the tracking: a run with the trial's own start time
        given = read_json(trial_dir / PARAMS_FILE)
        config = {**(given.get("config") or {}), "seed": given.get("seed")}
        run_id = study_tracker._start_trial(number, flatten_params(config), dict(given.get("params") or {}),
                                            time_ms(t.datetime_start))
        if run_id is None:
            return False
    failures = sum(study_tracker._shared.failures.counts.values())
    ok, run = study_tracker._attempt("reconcile", f"the run of trial {number}",
                                     lambda: study_tracker.client.get_run(run_id))
    if not ok:
        return made
    if run.data.tags.get(TAG_SYNCED) == digest and run.info.status == RUN_STATUS[state]:
        return made
    tracker = study_tracker._trackers.get(number)
    if tracker is None or tracker.run_id != run_id:
        tracker = study_tracker._trackers[number] = TrialTracker(run_id, study_tracker.tracking_uri, _shared=study_tracker._shared,
                                                        _label=f"trial {number}", **options)
    if tracker.load_logged_steps():
        missing = [r for i, r in enumerate(results) if step_of(r, i + 1) not in tracker.logged_steps]
        if missing:
            made = True
            tracker.log_results(missing)
        stale = _stale_results(tracker, results)
        if stale:  # an earlier run of these steps, re-run since (the re-run's message was lost with its orchestrator)
            made = True
            tracker.log_results(stale, replace=True)
    made = _reconcile_checkpoints(study_tracker, tracker, checkpoints, results) or made
    if run.info.status != RUN_STATUS[state] or run.data.tags.get(TAG_STATE) != state:
        made = True
        study_tracker.end_trial(run_id, state, error=t.user_attrs.get("error") if state == "FAIL" else None,
                                end_time_ms=time_ms(t.datetime_complete))
    if finished:
        ok, listed = tracker._logged("files", "the list of the run's artifacts", lambda: {
            a.path: a.file_size for a in study_tracker.client.list_artifacts(run_id)})
        if ok:
            changed = [p for p in files if p.is_file() and listed.get(p.name) != p.stat().st_size]
            if changed:
                tracker.log_files(*changed)
            if "plots" not in listed and results:
                tracker.log_learning_curve(results)
            model = policy_model and state != "FAIL" and "policy_model" not in listed and checkpoints
            if model:
                tracker.log_policy_model(str(max(checkpoints.values())[1]))
            made = made or bool(changed) or ("plots" not in listed and bool(results)) or bool(model)
    if sum(study_tracker._shared.failures.counts.values()) == failures:  # all done: skipped next time
        study_tracker._attempt("reconcile", f"the reconciliation mark of trial {number}",
                               lambda: study_tracker.client.set_tag(run_id, TAG_SYNCED, digest))
    return made


def _stale_results(tracker: TrialTracker, results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The results of steps whose latest values in the run are another run's of the step.

    Compared by the ``timestamp`` rltune stamps on every result (two runs of
    a step differ in it) and by the study's metric, where the results have them.
    """
    rows = {}
    for i, result in enumerate(results):
        step = step_of(result, i + 1)
        if step in tracker.logged_steps:
            rows[step] = (result, flatten_metrics(result))
    keys = {"timestamp", clean_key(tracker.metric), clean_key(tracker.metric.replace(".", "/"))}
    stale: set[int] = set()
    for key in sorted(k for k in keys if any(k in flat for _, flat in rows.values())):
        ok, history = tracker._logged("metrics", f"the history of {key}",
                                      lambda: tracker.client.get_metric_history(tracker.run_id, key))
        if not ok:
            return []
        latest: dict[int, tuple[int, float]] = {}
        for m in history:  # MLflow's order of the latest value: by timestamp, then value
            latest[m.step] = max((m.timestamp, m.value), latest.get(m.step, (m.timestamp, m.value)))
        stale |= {step for step, (_, flat) in rows.items()
                  if key in flat and step in latest and latest[step][1] != flat[key]}
    return [rows[step][0] for step in sorted(stale)]


def _reconcile_checkpoints(study_tracker: Any, tracker: "TrialTracker", on_disk: dict[str, tuple[int, Path]],
                           results: list[dict[str, Any]]) -> bool:
    """Upload the checkpoints on disk that the run lacks; drop those the trial dropped but the best. Any uploaded?"""
    ok, listed = tracker._logged("checkpoint", "the run's checkpoints", lambda: [
        a.path.rsplit("/", 1)[-1] for a in study_tracker.client.list_artifacts(tracker.run_id, "checkpoints")])
    if not ok:
        return False
    scores = {point["iteration"]: point["metric"]
              for point in (curve_point(r, step_of(r, i + 1), tracker.metric) for i, r in enumerate(results))}

    def score(name: str) -> float | None:
        iteration = checkpoint_iteration(name)
        return scores.get(iteration) if iteration is not None else None

    for name in sorted(set(on_disk) - set(listed)):
        tracker._logged("checkpoint", f"checkpoint {name}", lambda: study_tracker.client.log_artifacts(
            tracker.run_id, str(on_disk[name][1]), f"checkpoints/{name}"))
    kept = sorted(set(on_disk) | set(listed))
    tracker.checkpoints = [(name, score(name)) for name in kept]
    dropped = [name for name in listed if name not in on_disk]
    if dropped and tracker.keep_checkpoints_num:
        best = best_checkpoint(tracker.checkpoints, tracker.mode)
        for name in dropped:
            if name != best:
                tracker._delete_checkpoint(name)
    return bool(set(on_disk) - set(listed))

