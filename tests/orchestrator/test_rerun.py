"""A step a trial runs again after restoring a checkpoint: its new value replaces the first one everywhere.

The trainable ``rerunning`` scores ``step + 10 * attempt`` and checkpoints
every 2 iterations; its first attempt is SIGKILLed (itself, or its
orchestrator) right after step 3 was reported, so the next attempt restores
the checkpoint of step 2 and runs step 3 again: 23 where the first run had
13. Optuna's intermediate values, MLflow's latest values and the trial's
``result.json`` must then all hold the re-run's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import optuna
import pytest
from mlflow import MlflowClient
from mlflow_history import latest_by_step
from postgres_server import postgres_url

from rltune import tune
from rltune.orchestrator._listing import load_study

pytestmark = pytest.mark.tracked

RLTUNE = Path(sys.executable).parent / "rltune"
TESTS = Path(__file__).parent.parent
RERUN = {1: 11.0, 2: 12.0, 3: 23.0, 4: 24.0, 5: 25.0}  # steps 1-3 of attempt 1, step 3 again and on in attempt 2


def _check(results: Path, name: str, study: optuna.Study | None = None) -> None:
    study = study or load_study(results / name)[0]
    (trial,) = study.get_trials()
    assert trial.state.name == "COMPLETE" and trial.value == 25.0
    trial_dir = results / name / "trial_00000"
    assert (trial_dir / "attempts.txt").read_text().split() == ["1", "2"]
    on_file = {r["training_iteration"]: r["score"] for r in map(json.loads, (trial_dir / "result.json").open())}
    assert on_file == RERUN
    assert trial.intermediate_values == RERUN
    client = MlflowClient(f"sqlite:///{results / 'mlflow.db'}")
    (run,) = [r for r in client.search_runs([client.get_experiment_by_name(name).experiment_id])
              if r.data.tags.get("rltune.role") == "trial"]
    assert latest_by_step(client, run.info.run_id, "score") == RERUN
    assert run.data.metrics["score"] == 25.0


@pytest.fixture(params=["journal", pytest.param("postgres", marks=pytest.mark.postgres)])
def storage(request) -> str | None:
    """The study's storage: rltune's journal (None), or a PostgreSQL database shared by workers."""
    if request.param == "journal":
        return None
    return postgres_url()


def test_a_trial_process_killed_after_a_step_runs_it_again_and_its_new_value_replaces_the_first(tmp_path, storage):
    name = f"crashed_{uuid.uuid4().hex[:8]}"  # (a study of its own in a shared database)
    try:
        analysis = tune.run("orchestrator.trainables:rerunning", name=name, config={"kill": "trial", "kill_at": 3},
                            metric="score", mode="max", checkpoint_freq=2, max_failures=1,
                            results_dir=str(tmp_path), storage=storage, verbose=0)
        assert analysis.trials[0].state == "COMPLETE"
        _check(tmp_path, name, analysis.study)
    finally:
        if storage is not None and name in optuna.get_all_study_names(storage):
            optuna.delete_study(study_name=name, storage=storage)


def test_an_orchestrator_killed_after_a_step_then_resume_runs_it_again_and_its_new_value_replaces_the_first(tmp_path):
    (tmp_path / "rerun.yaml").write_text("name: killed\nrun: orchestrator.trainables:rerunning\nmetric: score\n"
                                         "checkpoint_freq: 2\nconfig: {kill: orchestrator, kill_at: 3}\n")
    env = dict(os.environ, PYTHONPATH=str(TESTS), MLFLOW_DISABLE_TELEMETRY="true")
    env.pop("RLTUNE_TRACKING", None)  # tracking on (the test is marked tracked)
    env.pop("MLFLOW_TRACKING_URI", None)

    def start(*extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(RLTUNE), "tune", "rerun.yaml", "--results-dir", str(tmp_path), "--quiet", *extra],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)

    killed = start()
    assert killed.returncode == -9, killed.stderr  # by its trial, after step 3 was reported
    study, _ = load_study(tmp_path / "killed")
    assert study.trials[0].intermediate_values == {1: 11.0, 2: 12.0, 3: 13.0}
    resumed = start("--resume")
    assert resumed.returncode == 0, resumed.stderr
    _check(tmp_path, "killed")

