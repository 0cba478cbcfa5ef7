"""A tuned study lands in MLflow: experiment, parent run, one nested run per trial with its state, params, metrics and artifacts."""

from __future__ import annotations

import pytest

from rltune import tune

pytestmark = pytest.mark.tracked

SMALL_PPO = {
    "env": "CartPole-v1",
    "rollout_fragment_length": 50,
    "train_batch_size": 100,
    "sgd_minibatch_size": 50,
    "num_sgd_iter": 1,
    "model": {"fcnet_hiddens": [8]},
}


def test_study_of_three_trials_is_recorded_in_the_default_mlflow_store(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    analysis = tune.run(
        "PPO",
        name="tracked",
        config={**SMALL_PPO, "lr": tune.grid_search([1e-3, 3e-3, 1e-2])},
        stop={"training_iteration": 3},
        metric="episode_reward_mean",
        mode="max",
        results_dir=str(tmp_path),
        n_jobs=2,
        checkpoint_freq=1,
        verbose=0,
    )
    assert len(analysis.trials) == 3

    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    experiment = client.get_experiment_by_name("tracked")
    assert experiment is not None
    runs = client.search_runs([experiment.experiment_id])
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    trials = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(parents) == 1 and len(trials) == 3
    assert {r.data.tags["mlflow.parentRunId"] for r in trials} == {parents[0].info.run_id}
    assert sorted(float(r.data.params["lr"]) for r in trials) == [1e-3, 3e-3, 1e-2]
    for run in trials:
        assert run.info.status == "FINISHED"
        assert run.data.params["model.fcnet_hiddens"] == "[8]"
        history = client.get_metric_history(run.info.run_id, "episode_reward_mean")
        assert sorted(m.step for m in history) == [1, 2, 3]
        assert client.get_metric_history(run.info.run_id, "info/learner/default_policy/entropy")
        artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
        assert {"checkpoints", "policy_model"} <= artifacts, artifacts


@pytest.mark.parametrize("port", ["99999", "0", "http"])
def test_rltune_ui_rejects_a_bad_port_with_exit_2(port, capsys):
    from rltune.orchestrator.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["ui", "--port", port])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "--port" in err and "Traceback" not in err
