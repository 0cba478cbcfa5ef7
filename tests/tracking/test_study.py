"""A 3-trial study (COMPLETE with real PPO training, PRUNED, FAIL) as MLflow holds it, in every kind of store.

``local``: the default embedded store (``sqlite:///<results_dir>/mlflow.db``),
inline trackers, the trial side in this process. ``server``: a real
``mlflow server`` on 127.0.0.1 with proxied artifacts, trials opened with
``open_trial`` (as the study's tracking process does), the trial side of
the complete trial in a separate process.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow import MlflowClient

from . import _study
from .conftest import MlflowServer, mlflow_env, new_store

TRIAL_SIDE = Path(__file__).with_name("_trial_side.py")


@pytest.fixture(scope="module")
def server_study(tmp_path_factory, template_db):
    base = tmp_path_factory.mktemp("server_study")
    server = MlflowServer(base / "server", template_db)
    try:
        def run_complete(args: dict, trial_dir: Path) -> dict:
            out = base / "trial_side.json"
            proc = subprocess.run(
                [sys.executable, str(TRIAL_SIDE), json.dumps({**args, "trial_dir": str(trial_dir), "out": str(out)})],
                capture_output=True, text=True, timeout=300, env=mlflow_env(),
            )
            assert proc.returncode == 0, proc.stderr[-4000:]
            return json.loads(out.read_text())

        info = _study.simulate_study(base / "results", server.uri, run_complete, open_trials=True)
        assert info["tracking_uri"] == server.uri
        yield info
    finally:
        server.stop()


@pytest.fixture(scope="module", params=["local", "server"])
def tracked(request):
    info = request.getfixturevalue("local_study" if request.param == "local" else "server_study")
    return MlflowClient(info["tracking_uri"]), info


def test_default_store_is_sqlite_under_the_results_dir(local_study):
    results = Path(local_study["results_dir"])
    assert local_study["tracking_uri"] == f"sqlite:///{results.resolve() / 'mlflow.db'}"
    artifacts = results / "mlartifacts" / _study.STUDY / local_study["run_ids"][0] / "artifacts"
    assert (artifacts / "plots" / "learning_curve.png").is_file()


def test_experiment_parent_and_nested_runs_with_states(tracked):
    _study.check_runs(*tracked)


def test_params_are_the_flattened_config(tracked):
    _study.check_params(*tracked)


def test_metric_histories_at_training_iteration_steps(tracked):
    _study.check_metrics(*tracked)


def test_checkpoint_artifacts_keep_the_last_and_the_best(tracked):
    _study.check_checkpoints(*tracked)


def test_params_result_and_error_files(tracked, tmp_path):
    _study.check_files(*tracked, tmp_path)


def test_study_plots_csv_and_learning_curves(tracked, tmp_path):
    _study.check_plots_and_csv(*tracked, tmp_path)


def test_pyfunc_policy_model_predicts_the_trained_actions(tracked, tmp_path):
    _study.check_model(*tracked, tmp_path)


def test_everything_was_recorded(tracked):
    assert tracked[1]["unrecorded"] == []


def test_runs_uri_of_the_model_loads_with_the_tracking_uri(local_study, monkeypatch):
    import mlflow.pyfunc

    from ._trial_side import probe_observations

    monkeypatch.setenv("MLFLOW_TRACKING_URI", local_study["tracking_uri"])
    model = mlflow.pyfunc.load_model(local_study["summary"]["model_uri"])
    assert model.predict(probe_observations()).tolist() == local_study["summary"]["expected_actions"]


def test_policy_model_from_a_checkpoint(local_study, template_db, tmp_path):
    """The tracking process's way: the trial's last checkpoint, logged through open_trial, is the trained policy."""
    import mlflow.pyfunc

    from rltune.tracking import StudyTracker

    from ._trial_side import probe_observations

    checkpoint = local_study["results_dir"] / _study.STUDY / "trial_00000" / local_study["summary"]["checkpoints"][-1][0]
    tracker = StudyTracker(None, new_store(template_db, tmp_path / "results"), "from-checkpoint", "tpe", "none")
    side = tracker.open_trial(0, {"lr": 0.001}, {"lr": 0.001})
    assert side.log_policy_model(checkpoint) == f"runs:/{side.run_id}/policy_model"
    tracker.end_trial(side, "COMPLETE")
    tracker.close()
    assert tracker.unrecorded == []
    model = mlflow.pyfunc.load_model(f"{MlflowClient(tracker.tracking_uri).get_run(side.run_id).info.artifact_uri}/policy_model")
    assert model.predict(probe_observations()).tolist() == local_study["summary"]["expected_actions"]
