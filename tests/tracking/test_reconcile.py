"""MLflow stays true after kills: each step once per run, reconciliation with the trial directories, no staging left.

The last test kills ``rltune tune`` with SIGKILL at 10 random moments of a
3-point grid study and resumes it each time; in the end MLflow must agree
with Optuna and the trial directories (state, every step once, checkpoints).
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from mlflow import MlflowClient

from rltune.tracking import StudyTracker, remove_staging

from .conftest import mlflow_env, new_store

pytestmark = pytest.mark.tracked

RLTUNE = Path(sys.executable).parent / "rltune"
TRAINABLES = Path(__file__).parent.parent / "orchestrator" / "trainables.py"


def _steps(client: MlflowClient, run_id: str, key: str = "score") -> list[int]:
    return sorted(m.step for m in client.get_metric_history(run_id, key))


def _checkpoints(client: MlflowClient, run_id: str) -> set[str]:
    return {a.path.rsplit("/", 1)[-1] for a in client.list_artifacts(run_id, "checkpoints")}


def _trial_dir(study_dir: Path, number: int, steps: int, checkpoints: list[int], *, error: str | None = None) -> Path:
    trial_dir = study_dir / f"trial_{number:05d}"
    trial_dir.mkdir(parents=True)
    (trial_dir / "params.json").write_text(json.dumps({"trial": number, "seed": number, "params": {"x": number},
                                                       "config": {"x": number, "steps": steps}}))
    (trial_dir / "result.json").write_text("".join(
        json.dumps({"score": float(number * 10 + i), "training_iteration": i}) + "\n" for i in range(1, steps + 1)))
    for i in checkpoints:
        (trial_dir / f"checkpoint_{i:06d}").mkdir()
        (trial_dir / f"checkpoint_{i:06d}" / "state.json").write_text(json.dumps({"step": i}))
    if error:
        (trial_dir / "error.txt").write_text(error)
    return trial_dir


def _frozen(number: int, state: str, value: float | None = None, error: str | None = None) -> optuna.trial.FrozenTrial:
    trial = optuna.trial.create_trial(state=getattr(optuna.trial.TrialState, state), value=value,
                                      user_attrs={"error": error} if error else {})
    trial.number = number
    return trial


def test_a_resumed_run_logs_each_step_once(tmp_path, template_db):
    results = new_store(template_db, tmp_path / "results")
    tracker = StudyTracker(None, results, "once", "grid", "none")
    run = tracker.open_trial(0, {"x": 1}, {"x": 1})
    run.log_results([{"score": 1.0, "training_iteration": 1}, {"score": 2.0, "training_iteration": 2}])
    run.log_result({"score": 2.5, "training_iteration": 2})  # a retry from the checkpoint of step 1
    tracker.close(interrupted=True)

    resumed = StudyTracker(None, results, "once", "grid", "none")
    again = resumed.open_trial(0, {"x": 1}, {"x": 1})  # the run is reopened: it knows its steps
    again.log_results([{"score": 2.7, "training_iteration": 2}, {"score": 3.0, "training_iteration": 3}])
    resumed.close()
    client = MlflowClient(resumed.tracking_uri)
    assert _steps(client, run.run_id) == [1, 2, 3]
    assert [m.value for m in sorted(client.get_metric_history(run.run_id, "score"), key=lambda m: m.step)] == [1, 2, 3]


def test_reconcile_logs_what_is_missing_once_and_drops_what_the_trial_dropped(tmp_path, template_db):
    results = new_store(template_db, tmp_path / "results")
    study_dir = results / "study"
    _trial_dir(study_dir, 0, 6, [4, 6])  # checkpoint 2 dropped by the trial (keep 2)
    _trial_dir(study_dir, 1, 3, [], error="boom")  # its run was never created
    _trial_dir(study_dir, 2, 4, [2, 4])  # interrupted: RUNNING in Optuna
    tracker = StudyTracker(None, results, "study", "grid", "none")
    run = tracker.open_trial(0, {"x": 0, "steps": 6}, {"x": 0}, keep_checkpoints_num=2, metric="score", mode="max")
    run.log_results([{"score": 0.0 + i, "training_iteration": i} for i in (1, 2)])
    run.log_checkpoint(study_dir / "trial_00000" / "checkpoint_000004", name="checkpoint_000002")  # dropped on disk since
    run.log_checkpoint(study_dir / "trial_00000" / "checkpoint_000004")
    trials = [_frozen(0, "COMPLETE", 5.0), _frozen(1, "FAIL", error="Traceback ... boom"), _frozen(2, "RUNNING")]
    options = {"keep_checkpoints_num": 2, "metric": "score", "mode": "max"}
    tracker.reconcile(trials, study_dir, **options)
    tracker.reconcile(trials, study_dir, **options)  # a second time changes nothing
    tracker.close()
    assert not tracker.unrecorded

    client = MlflowClient(tracker.tracking_uri)
    runs = {int(r.data.tags["rltune.trial"]): r for r in client.search_runs(
        [tracker.experiment_id], "tags.`rltune.role` = 'trial'")}
    assert sorted(runs) == [0, 1, 2]
    assert _steps(client, runs[0].info.run_id) == [1, 2, 3, 4, 5, 6]
    assert _steps(client, runs[0].info.run_id, "training_iteration") == [1, 2, 3, 4, 5, 6]
    assert _checkpoints(client, runs[0].info.run_id) == {"checkpoint_000004", "checkpoint_000006"}
    assert (runs[0].info.status, runs[0].data.tags["rltune.state"]) == ("FINISHED", "COMPLETE")
    root = {a.path for a in client.list_artifacts(runs[0].info.run_id)}
    assert {"params.json", "result.json", "plots"} <= root
    assert (runs[1].info.status, runs[1].data.tags["rltune.state"]) == ("FAILED", "FAIL")
    assert runs[1].data.params["steps"] == "3" and "boom" in runs[1].data.tags["rltune.error"]
    assert _steps(client, runs[1].info.run_id) == [1, 2, 3]
    assert "error.txt" in {a.path for a in client.list_artifacts(runs[1].info.run_id)}
    assert (runs[2].info.status, runs[2].data.tags["rltune.state"]) == ("KILLED", "INTERRUPTED")
    assert _checkpoints(client, runs[2].info.run_id) == {"checkpoint_000002", "checkpoint_000004"}
    assert _steps(client, runs[2].info.run_id) == [1, 2, 3, 4]

    # a later run's reconciliation at the start of a resume leaves the interrupted trial alone
    _trial_dir(study_dir, 3, 2, [])
    resumed = StudyTracker(None, results, "study", "grid", "none")
    resumed.reconcile([*trials, _frozen(3, "RUNNING")], study_dir, finished_only=True, **options)
    resumed.close()
    assert not any(r.data.tags.get("rltune.trial") == "3" for r in client.search_runs([tracker.experiment_id]))
    assert _steps(client, runs[0].info.run_id) == [1, 2, 3, 4, 5, 6]


def test_remove_staging_keeps_the_running_sessions_copies(tmp_path):
    trial_dir = tmp_path / "trial_00000"
    for name in (".checkpoint_000002.mlflow-dead0001-x1", ".files.mlflow-live0002-x2", "checkpoint_000002",
                 ".checkpoint_000004.tmp-abcd"):
        (trial_dir / name).mkdir(parents=True)
    assert remove_staging(tmp_path, keep_tag="live0002") == 1
    assert sorted(p.name for p in trial_dir.iterdir()) == [".checkpoint_000004.tmp-abcd",
                                                           ".files.mlflow-live0002-x2", "checkpoint_000002"]
    assert remove_staging(tmp_path, tag="live0002") == 1
    assert sorted(p.name for p in trial_dir.iterdir()) == [".checkpoint_000004.tmp-abcd", "checkpoint_000002"]


STUDY = """
name: killed
run: study_trainables:counter
metric: score
n_jobs: 2
checkpoint_freq: 3
config:
  x: {grid_search: [1, 2, 3]}
  steps: 24
  sleep: 0.2
"""


def test_kill_9_at_random_moments_then_resume_leaves_mlflow_agreeing_with_optuna(tmp_path, template_db):
    from rltune.orchestrator._listing import load_study

    results = new_store(template_db, tmp_path / "results")
    shutil.copy(TRAINABLES, tmp_path / "study_trainables.py")
    (tmp_path / "killed.yaml").write_text(STUDY)
    env = {**mlflow_env(), "PYTHONPATH": str(tmp_path)}  # the study imports its trainables from there
    env.pop("RLTUNE_TRACKING", None)

    def start(*extra: str) -> subprocess.Popen:
        return subprocess.Popen([str(RLTUNE), "tune", "killed.yaml", "--results-dir", str(results), "--quiet", *extra],
                                cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    rng = random.Random(14)
    for i in range(10):
        proc = start(*(["--resume"] if (results / "killed").is_dir() else []))  # (a kill may come before it exists)
        time.sleep(rng.uniform(0.5, 4.0))
        proc.kill()
        proc.communicate(timeout=30)
        # Optuna's journal lock of a killed orchestrator holds the next one for 30 s (its grace period);
        # with no orchestrator left, this is what the grace period would do (a study lock fixes it for good)
        lock = results / "killed" / "study.journal.lock"
        lock.unlink(missing_ok=True)
    # on a busy machine every kill may have come before the study's directory existed
    proc = start(*(["--resume"] if (results / "killed").is_dir() else []))
    _, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err

    study, _ = load_study(results / "killed")
    trials = study.get_trials()
    assert sorted(t.params["x"] for t in trials) == [1, 2, 3]
    assert {t.state for t in trials} == {optuna.trial.TrialState.COMPLETE}
    client = MlflowClient(f"sqlite:///{results / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("killed")
    runs = client.search_runs([experiment.experiment_id])
    parents = [r for r in runs if r.data.tags.get("rltune.role") == "study"]
    assert [p.info.status for p in parents] == ["FINISHED"]
    by_trial = {}
    for run in runs:
        if run.data.tags.get("rltune.role") == "trial":
            assert run.data.tags["rltune.trial"] not in by_trial, "two runs of one trial"
            by_trial[run.data.tags["rltune.trial"]] = run
    assert sorted(by_trial) == sorted(str(t.number) for t in trials)
    for t in trials:
        run = by_trial[str(t.number)]
        trial_dir = results / "killed" / f"trial_{t.number:05d}"  # (a trial killed as it started has no attr)
        assert (run.info.status, run.data.tags["rltune.state"]) == ("FINISHED", "COMPLETE"), t.number
        assert _steps(client, run.info.run_id) == list(range(1, 25)), t.number
        assert _steps(client, run.info.run_id, "training_iteration") == list(range(1, 25)), t.number
        on_disk = {p.name for p in trial_dir.glob("checkpoint_*")}
        assert on_disk and _checkpoints(client, run.info.run_id) == on_disk, t.number
        assert not list(trial_dir.glob(".*.mlflow-*")), "staging copies left behind"
