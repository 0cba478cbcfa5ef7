"""The trackers' rules: flattening, batching, MLflow's limits, resume, plots with few or many trials, failures."""

from __future__ import annotations

import logging
import math
from pathlib import Path

import numpy as np
import pytest
from mlflow import MlflowClient

from rltune.tracking import _mlflow_compat, _store
from rltune.tracking import (
    StudyTracker,
    TrialTracker,
    clean_key,
    flatten_metrics,
    flatten_params,
    resolve_tracking_uri,
    run_name,
)
from rltune.tracking._mlflow_compat import MAX_TAG_VAL_LENGTH

from .conftest import new_store


class FakeClient:
    """Records log_batch calls; raises ``error`` (if set) from every call."""

    def __init__(self, error: Exception | None = None) -> None:
        self.batches: list[dict] = []
        self.error = error
        self.calls = 0

    def log_batch(self, run_id, metrics=(), params=(), tags=(), synchronous=None):
        self.calls += 1
        if self.error is not None:
            raise self.error
        self.batches.append({"run_id": run_id, "metrics": list(metrics), "params": list(params), "tags": list(tags)})

    def log_artifacts(self, run_id, local_dir, artifact_path=None):
        self.calls += 1
        if self.error is not None:
            raise self.error


def fake_tracker(error: Exception | None = None, **kwargs) -> tuple[TrialTracker, FakeClient]:
    tracker = TrialTracker("run-1", "sqlite:///unused.db", **kwargs)
    tracker._shared.client = client = FakeClient(error)
    return tracker, client


# -- flattening -----------------------------------------------------------------------------------
def test_flatten_metrics_keeps_numbers_with_slash_keys():
    result = {
        "episode_reward_mean": 20.5,
        "training_iteration": 3,
        "info": {"learner": {"default_policy": {"entropy": np.float32(0.5), "kl": float("nan")}}},
        "custom_metrics": {"pole_angle_mean": 0.01, "pole_angle_max": float("inf")},
        "done": True,
        "flag": np.bool_(False),
        "curriculum_task": {"length": 5, "name": "corridor"},
        "curriculum_phase": 1,
        "env": "CartPole-v1",
        "hist_stats": {"episode_reward": [1.0, 2.0]},
        "config": {"lr": 0.1},
        "policy_reward_mean": {},
        "weird key!": 1,
    }
    assert flatten_metrics(result) == {
        "episode_reward_mean": 20.5,
        "training_iteration": 3.0,
        "info/learner/default_policy/entropy": 0.5,
        "custom_metrics/pole_angle_mean": 0.01,
        "curriculum_task/length": 5.0,
        "curriculum_phase": 1.0,
        "weird key_": 1.0,
    }


def test_flatten_params_dotted_keys_and_text_values():
    from rltune.callbacks import DefaultCallbacks

    params = flatten_params({"lr": 1e-3, "model": {"fcnet_hiddens": [64, 64], "vf_share_layers": False},
                             "env_config": {}, "callbacks": DefaultCallbacks, "seed": None, "env": "CartPole-v1"})
    assert params == {"lr": "0.001", "model.fcnet_hiddens": "[64, 64]", "model.vf_share_layers": "false",
                      "env_config": "{}", "callbacks": "rltune.callbacks._callbacks:DefaultCallbacks",
                      "seed": "null", "env": "CartPole-v1"}


def test_clean_key_and_run_name():
    assert clean_key("a//b/../c") == "a/_/b/_/c"
    assert clean_key("x" * 300) != clean_key("x" * 299 + "y") and len(clean_key("x" * 300)) == 250
    assert run_name(7, {"lr": 0.000312345, "model.fcnet_hiddens": [64, 64], "gamma": 0.99}) == \
        "trial_00007 lr=0.0003123 fcnet_hiddens=[64,64] gamma=0.99"


def test_resolve_tracking_uri(tmp_path, monkeypatch):
    assert resolve_tracking_uri(None, tmp_path) == f"sqlite:///{tmp_path.resolve()}/mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:1")
    assert resolve_tracking_uri(None, tmp_path) == "http://127.0.0.1:1"
    assert resolve_tracking_uri("sqlite:///x.db", tmp_path) == "sqlite:///x.db"


# -- batching -------------------------------------------------------------------------------------
def test_one_batch_per_iteration_at_the_training_iteration_step():
    tracker, client = fake_tracker()
    for i in (1, 2):
        tracker.log_result({"training_iteration": i, "episode_reward_mean": 10.0 * i, "info": {"x": 1},
                            "curriculum_task": "hard" if i == 2 else "easy"})
    assert client.calls == 2
    assert [sorted((m.key, m.value, m.step) for m in b["metrics"]) for b in client.batches] == [
        [("episode_reward_mean", 10.0, 1), ("info/x", 1.0, 1), ("training_iteration", 1.0, 1)],
        [("episode_reward_mean", 20.0, 2), ("info/x", 1.0, 2), ("training_iteration", 2.0, 2)],
    ]
    # a text task is a tag, written when it changes
    assert [[(t.key, t.value) for t in b["tags"]] for b in client.batches] == [
        [("rltune.curriculum_task", '"easy"')], [("rltune.curriculum_task", '"hard"')]]


def test_pbt_ancestry_tags_and_the_schedule_as_metrics():
    """PBT: a trial's run gets its ancestry as tags, and the hyperparameters in force as one metric each."""
    tracker, client = fake_tracker()
    tracker.set_tags({"rltune.pbt.exploited": "trial 3 at iteration 4", "rltune.pbt.lineage": "x" * 10_000})
    tracker.log_result({"training_iteration": 5, "hyperparams": {"lr": 0.002}, "config": {"lr": 0.002, "env": "E"}})
    (tags, result) = client.batches
    assert [(t.key, len(t.value)) for t in tags["tags"]] == [("rltune.pbt.exploited", 22),
                                                             ("rltune.pbt.lineage", MAX_TAG_VAL_LENGTH)]
    assert sorted(m.key for m in result["metrics"]) == ["hyperparams/lr", "training_iteration"]  # config is no metric


def test_more_than_1000_metrics_go_in_chunks_of_1000():
    tracker, client = fake_tracker()
    tracker.log_result({"training_iteration": 5, "many": {f"m{i}": float(i) for i in range(2499)}})
    assert [len(b["metrics"]) for b in client.batches] == [1000, 1000, 500]
    assert {m.step for b in client.batches for m in b["metrics"]} == {5}


def test_a_tag_and_1000_metrics_respect_the_entities_per_batch_limit():
    tracker, client = fake_tracker()
    tracker.log_result({"training_iteration": 1, "curriculum_task": "easy",
                        "many": {f"m{i}": float(i) for i in range(999)}})
    assert [(len(b["metrics"]), len(b["tags"])) for b in client.batches] == [(999, 1), (1, 0)]


def test_our_limits_are_mlflows():
    from mlflow.utils import validation

    assert _mlflow_compat.MAX_ENTITY_KEY_LENGTH == validation.MAX_ENTITY_KEY_LENGTH
    assert _mlflow_compat.MAX_TAG_VAL_LENGTH == validation.MAX_TAG_VAL_LENGTH
    assert _mlflow_compat.limits() == (validation.MAX_PARAM_VAL_LENGTH, validation.MAX_TAG_VAL_LENGTH,
                                   validation.MAX_ENTITY_KEY_LENGTH, validation.MAX_METRICS_PER_BATCH,
                                   validation.MAX_PARAMS_TAGS_PER_BATCH, validation.MAX_ENTITIES_PER_BATCH)


def test_the_callers_thread_never_imports_mlflow():
    """Flattening and the orchestrator's side of the tracking process stay cheap: mlflow loads in that process only."""
    import subprocess
    import sys

    code = ("import sys; import rltune.tracking as t; import rltune.tracking._process;"
            "t.flatten_metrics({'a': {'b': 1.0}, 'k' * 300: 2}); t.flatten_params({'m': {'x': [1]}});"
            "t.run_name(1, {'lr': 0.1}); print('mlflow' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip() == "False", proc.stderr


def test_keep_checkpoints_keeps_the_last_n_and_the_best(tmp_path):
    tracker, client = fake_tracker(keep_checkpoints_num=2, metric="score", mode="min")
    deleted = []
    tracker._delete_checkpoint = lambda name: (deleted.append(name), setattr(
        tracker, "checkpoints", [c for c in tracker.checkpoints if c[0] != name]))
    for i, score in enumerate([5.0, 1.0, 4.0, 3.0, 6.0], start=1):
        tracker.log_result({"training_iteration": i, "score": score})
        tracker.log_checkpoint(tmp_path / f"checkpoint_{i:06d}")
    assert [c[0] for c in tracker.checkpoints] == ["checkpoint_000002", "checkpoint_000004", "checkpoint_000005"]
    assert deleted == ["checkpoint_000001", "checkpoint_000003"]


# -- failures ---------------------------------------------------------------------------------------
def test_failures_never_raise_warn_once_and_are_listed(caplog, monkeypatch):
    tracker, client = fake_tracker(ConnectionError("connection refused"))
    with caplog.at_level(logging.DEBUG, logger="rltune.tracking"):
        tracker.log_result({"training_iteration": 1, "a": 1.0})
        tracker.log_result({"training_iteration": 2, "a": 1.0})  # skipped: the store is paused after an outage
        monkeypatch.setattr(tracker._shared.failures, "_down_until", 0.0)
        tracker.log_result({"training_iteration": 3, "a": 1.0})
        tracker.log_checkpoint("/nowhere/checkpoint_000003")
    assert client.calls == 2  # iteration 2 was not even tried
    assert tracker.unrecorded == [
        "the metrics of iteration 1 (2 values)",
        "the metrics of iteration 2 (2 values) (skipped: the tracking store was unavailable)",
        "the metrics of iteration 3 (2 values)",
        "checkpoint checkpoint_000003 (skipped: the tracking store was unavailable)",
    ]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "connection refused" in warnings[0].getMessage()
    assert tracker.failure_counts == {"metrics": 3, "checkpoint": 1}
    assert tracker.summary() == "MLflow tracking (run run-1): 4 call(s) not recorded (metrics x3, checkpoint x1)"


def test_a_rejected_value_does_not_pause_tracking():
    from mlflow.exceptions import MlflowException

    tracker, client = fake_tracker(MlflowException.invalid_parameter_value("bad value"))
    tracker.log_result({"training_iteration": 1, "a": 1.0})
    tracker.log_result({"training_iteration": 2, "a": 1.0})
    assert client.calls == 2 and len(tracker.unrecorded) == 2


def test_a_trial_without_run_is_a_noop_that_is_listed(tmp_path):
    tracker = TrialTracker(None, "sqlite:///unused.db")
    tracker.log_result({"training_iteration": 1, "a": 1.0})
    tracker.log_files(tmp_path / "missing.txt")
    tracker.log_text("boom", "error.txt")
    assert tracker.log_policy_model(object()) is None
    assert tracker._shared.client is None  # never opened a store
    assert tracker.unrecorded[0] == "the metrics of iteration 1 (2 values) (the trial has no MLflow run)"


def test_unknown_state_is_a_programming_error(tmp_path, template_db):
    tracker = StudyTracker(None, new_store(template_db, tmp_path / "r"), "s", "random", "none")
    with pytest.raises(ValueError, match="state must be one of"):
        tracker.end_trial("some-run", "DONE")


# -- a real local store ---------------------------------------------------------------------------
@pytest.fixture
def store(tmp_path, template_db) -> Path:
    return new_store(template_db, tmp_path / "results")


def test_long_param_values_are_truncated_with_a_note(store):
    tracker = StudyTracker(None, store, "long", "random", "none")
    limit = _mlflow_compat.limits().param_value
    run_id = tracker.start_trial(0, {"notes": "x" * (limit + 500), "lr": 0.1, "k" * 300: 1}, {"lr": 0.1})
    run = MlflowClient(tracker.tracking_uri).get_run(run_id)
    assert len(run.data.params["notes"]) == limit and run.data.params["notes"].endswith(f"... ({limit + 500} chars in all)")
    assert run.data.params["lr"] == "0.1" and len([k for k in run.data.params if k.startswith("kkk")]) == 1
    assert "notes" in run.data.tags[_store.TAG_TRUNCATED]
    assert tracker.unrecorded == []


def test_a_resumed_study_reopens_its_parent_and_trial_runs(store):
    first = StudyTracker(None, store, "resumed", "tpe", "asha")
    run_id = first.start_trial(0, {"lr": 0.1, "model": {"fcnet_hiddens": [8]}}, {"lr": 0.1})
    TrialTracker(run_id, first.tracking_uri).log_result({"training_iteration": 1, "score": 1.0})
    first.end_trial(run_id, "INTERRUPTED", reason="interrupted")
    first.close(interrupted=True)
    client = MlflowClient(first.tracking_uri)
    assert client.get_run(first.parent_run_id).info.status == "KILLED"
    assert client.get_run(run_id).info.status == "KILLED"

    second = StudyTracker(None, store, "resumed", "tpe", "asha")
    assert (second.experiment_id, second.parent_run_id) == (first.experiment_id, first.parent_run_id)
    assert second.start_trial(0, {"lr": 0.1, "model": {"fcnet_hiddens": [8]}}, {"lr": 0.1}) == run_id
    assert client.get_run(run_id).info.status == "RUNNING"
    assert client.get_run(run_id).data.tags["rltune.state"] == "RUNNING"
    assert client.get_run(first.parent_run_id).info.status == "RUNNING"
    new_run = second.start_trial(1, {"lr": 0.2}, {"lr": 0.2})
    assert new_run not in (None, run_id)
    second.end_trial(run_id, "COMPLETE")
    second.close()
    assert len(client.search_runs([second.experiment_id])) == 3
    assert second.unrecorded == [] and first.unrecorded == []


def test_study_plots_include_param_importances_with_enough_trials(store, tmp_path):
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize")
    tracker = StudyTracker(None, store, "plots", "random", "median")
    tracker.refresh_study_plots(study)  # no trial at all: nothing to draw, nothing fails
    study.optimize(lambda t: -(t.suggest_float("x", -2, 2) ** 2) + t.suggest_int("n", 1, 3) * 0.01, n_trials=8)
    tracker.refresh_study_plots(study, final=False)  # throttled: the call above was less than 30 s ago
    assert MlflowClient(tracker.tracking_uri).list_artifacts(tracker.parent_run_id, "plots") == []
    tracker.refresh_study_plots(study)
    client = MlflowClient(tracker.tracking_uri)
    plots = {Path(a.path).name for a in client.list_artifacts(tracker.parent_run_id, "plots")}
    assert plots == {"optimization_history.png", "parallel_coordinate.png", "param_importances.png"}
    parent = client.get_run(tracker.parent_run_id)
    assert parent.data.tags["rltune.best_trial"] == str(study.best_trial.number)
    assert math.isclose(parent.data.metrics["best_value"], study.best_value)
    assert tracker.unrecorded == []


def test_an_open_trial_tracker_uploads_results_checkpoint_files_and_curve(store, tmp_path):
    tracker = StudyTracker(None, store, "opened", "tpe", "none")
    side = tracker.open_trial(0, {"lr": 0.1}, {"lr": 0.1}, keep_checkpoints_num=1, metric="score")
    checkpoint = tmp_path / "checkpoint_000001"
    checkpoint.mkdir()
    (checkpoint / "state.json").write_text('{"step": 1}')
    result_file = tmp_path / "result.json"
    result_file.write_text("line 1\n")
    for i in (1, 2):
        side.log_result({"training_iteration": i, "score": float(i)})
    assert side.log_checkpoint(checkpoint) == "checkpoints/checkpoint_000001"
    side.log_files(result_file)
    side.log_learning_curve()
    tracker.end_trial(side, "COMPLETE")
    tracker.refresh_study_plots(_one_trial_study())
    tracker.close()
    client = MlflowClient(tracker.tracking_uri)
    run = client.get_run(side.run_id)
    assert run.info.status == "FINISHED" and run.data.tags["rltune.state"] == "COMPLETE"
    assert client.get_run(tracker.parent_run_id).info.status == "FINISHED"
    assert [m.step for m in client.get_metric_history(side.run_id, "score")] == [1, 2]
    local = Path(client.download_artifacts(side.run_id, "", str(tmp_path / "down")))
    assert (local / "checkpoints" / "checkpoint_000001" / "state.json").read_text() == '{"step": 1}'
    assert (local / "result.json").read_text() == "line 1\n"
    assert (local / "plots" / "learning_curve.png").stat().st_size > 2000
    assert tracker.unrecorded == []


def test_a_study_tracker_closed_twice_ends_its_run_and_logs_its_summary_once(store, caplog):
    tracker = StudyTracker(None, store, "twice", "tpe", "none")
    tracker._shared.failures.record("metrics", "something lost")
    with caplog.at_level(logging.WARNING, logger="rltune.tracking"):
        tracker.close()
        tracker.close(interrupted=True)
    assert [r.getMessage() for r in caplog.records if "not recorded" in r.getMessage()] == [
        "MLflow tracking (study 'twice'): 1 call(s) not recorded (metrics x1)"]
    assert MlflowClient(tracker.tracking_uri).get_run(tracker.parent_run_id).info.status == "FINISHED"


def _one_trial_study():
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study()
    study.add_trial(optuna.trial.create_trial(params={"lr": 0.1}, value=1.0, distributions={
        "lr": optuna.distributions.FloatDistribution(0.01, 1.0)}))
    return study


def test_a_policy_model_from_a_checkpoint_builds_only_an_env_the_checkpoint_may_name(tmp_path):
    """The model reads a checkpoint's spaces from its data (an older checkpoint's from one env of its config):
    never from code the checkpoint names."""
    import json

    from rltune.errors import CheckpointError
    from rltune.tracking._mlflow_model import SPEC_FILE, write_policy_dir
    from rltune.trainers import PPO
    from rltune.trainers.checkpoints import _checkpoint as ckpt

    config = {"train_batch_size": 64, "rollout_fragment_length": 32, "sgd_minibatch_size": 32, "model": {"fcnet_hiddens": [8]}}
    with PPO(config=config, env="CartPole-v1") as trainer:
        path = Path(trainer.save(tmp_path / "ckpt"))
    assert json.loads((write_policy_dir(path, tmp_path / "ok") / SPEC_FILE).read_text())["action_space"]["n"] == 2
    marker = tmp_path / "marker"
    metadata = json.loads((path / ckpt.METADATA_FILE).read_text())
    # Built as Popen(EnvContext(env_config)), Popen would run the dict's keys: touch <marker>.
    metadata["config"].update(env="subprocess:Popen", env_config={"touch": 1, str(marker): 2})
    metadata[ckpt.METADATA_CHECKSUM] = ckpt.metadata_checksum(metadata)
    (path / ckpt.METADATA_FILE).write_text(json.dumps(metadata))
    assert json.loads((write_policy_dir(path, tmp_path / "data") / SPEC_FILE).read_text())["action_space"]["n"] == 2
    del metadata["spaces"]  # as a checkpoint of an older rltune: the env would be built
    metadata[ckpt.METADATA_CHECKSUM] = ckpt.metadata_checksum(metadata)
    (path / ckpt.METADATA_FILE).write_text(json.dumps(metadata))
    with pytest.raises(CheckpointError, match=r"config key 'env' is 'subprocess:Popen', which names a class Popen"):
        write_policy_dir(path, tmp_path / "bad")
    assert not marker.exists()
