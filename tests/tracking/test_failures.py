"""A tracking server that is unreachable, or dies mid-study: nothing raises into training, what is lost is listed."""

from __future__ import annotations

import signal
import time


from mlflow import MlflowClient

from rltune.tracking import StudyTracker, TrialTracker

from .conftest import MlflowServer, free_port


def test_unreachable_server_from_the_start(tmp_path):
    start = time.monotonic()
    uri = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    study = StudyTracker(uri, tmp_path, "nowhere", "tpe", "none")
    run_id = study.start_trial(0, {"lr": 0.1}, {"lr": 0.1})
    trial = TrialTracker(**study.trial_tracker_args(run_id))
    for i in range(1, 4):
        trial.log_result({"training_iteration": i, "episode_reward_mean": 1.0})
    side = study.open_trial(1, {"lr": 0.2}, {"lr": 0.2})
    side.log_result({"training_iteration": 1, "episode_reward_mean": 1.0})
    study.end_trial(run_id, "COMPLETE")
    study.end_trial(side, "PRUNED")
    study.refresh_study_plots(None)  # not even a study: counted, not raised
    study.close()
    assert run_id is None and side.run_id is None and study.parent_run_id is None
    assert time.monotonic() - start < 60  # short timeouts, few retries, then calls are skipped
    assert study.unrecorded[0] == "the experiment and parent run of study 'nowhere'"
    assert "the run of trial 0 (no parent run)" in study.unrecorded
    assert "trial 1: the metrics of iteration 1 (2 values) (the trial has no MLflow run)" in study.unrecorded
    assert len(trial.unrecorded) == 3


def test_server_killed_mid_study_then_back(tmp_path, template_db):
    server = MlflowServer(tmp_path / "server", template_db)
    try:
        study = StudyTracker(server.uri, tmp_path / "results", "outage", "tpe", "median")
        run_id = study.start_trial(0, {"lr": 0.1}, {"lr": 0.1})
        trial = TrialTracker(**study.trial_tracker_args(run_id), keep_checkpoints_num=1)
        checkpoint = tmp_path / "checkpoint_000002"
        checkpoint.mkdir()
        (checkpoint / "state.json").write_text("{}")
        for i in (1, 2):
            trial.log_result({"training_iteration": i, "episode_reward_mean": float(i)})
        assert trial.unrecorded == [] and study.unrecorded == []

        server.stop(signal.SIGKILL)  # the server dies
        start = time.monotonic()
        for i in (3, 4):
            trial.log_result({"training_iteration": i, "episode_reward_mean": float(i)})
        assert trial.log_checkpoint(checkpoint) is None
        trial.log_files(checkpoint / "state.json")
        trial.log_learning_curve()
        second = study.start_trial(1, {"lr": 0.2}, {"lr": 0.2})
        study.end_trial(run_id, "COMPLETE")
        study.close()
        assert second is None
        assert time.monotonic() - start < 60
        assert trial.unrecorded[0] == "the metrics of iteration 3 (2 values)"
        assert len(trial.unrecorded) == 5 and all("skipped" in u for u in trial.unrecorded[1:])
        assert len(study.unrecorded) == 3

        # the server comes back on the same store and port: the trackers record again after their pause
        server = MlflowServer(tmp_path / "server", template_db, port=server.port)
        trial._shared.failures._down_until = 0.0  # do not wait for the pause (5 s) to end
        trial.log_result({"training_iteration": 5, "episode_reward_mean": 5.0})
        assert len(trial.unrecorded) == 5
        history = MlflowClient(server.uri).get_metric_history(run_id, "episode_reward_mean")
        assert sorted((m.step, m.value) for m in history) == [(1, 1.0), (2, 2.0), (5, 5.0)]
    finally:
        server.stop()
