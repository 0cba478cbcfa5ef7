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


def test_rltune_tune_ends_saying_where_to_look_and_how_to_record_what_mlflow_lacks(tmp_path, capsys, monkeypatch):
    """The tracking process dies mid-study: the end names the study directory, the `rltune ui` command, what was
    not recorded and the resume that records it; that resume trains nothing and leaves MLflow complete."""
    import json
    import shlex

    from mlflow.tracking import MlflowClient

    from rltune.orchestrator.cli import main

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    study_file = tmp_path / "lossy.yaml"
    study_file.write_text("name: lossy\nrun: orchestrator.trainables:kill_tracking_then_train\nmetric: score\n"
                          "config:\n  x: {grid_search: [0, 1, 2]}\n")
    results = tmp_path / "results"
    assert main(["tune", str(study_file), "--results-dir", str(results), "--n-jobs", "1", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert f"study directory: {results / 'lossy'}\n" in out, out
    assert f"MLflow (the study, each trial's metrics, checkpoints and plots): rltune ui --results-dir {results}\n" in out
    assert "not recorded" in out and "a resume records them from the trial directories" in out, out
    repair = f"rltune tune {study_file} --resume --results-dir {results}"
    assert f"record what MLflow lacks with: {repair}\n" in out, out
    done = {n: (results / "lossy" / f"trial_{n:05d}" / "result.json").read_text() for n in range(3)}

    assert main(shlex.split(repair)[1:]) == 0
    out = capsys.readouterr().out
    assert "has run all its 3 trial(s), so no trial is trained" in out, out
    assert "recorded what an earlier run left out in the runs of trial(s)" in out and "not recorded" not in out, out
    assert {n: (results / "lossy" / f"trial_{n:05d}" / "result.json").read_text() for n in range(3)} == done
    client = MlflowClient(f"sqlite:///{results}/mlflow.db")
    runs = client.search_runs([client.get_experiment_by_name("lossy").experiment_id])
    trials = {r.data.tags["rltune.trial"]: r for r in runs if r.data.tags.get("rltune.role") == "trial"}
    assert sorted(trials) == ["0", "1", "2"] and all(r.info.status == "FINISHED" for r in trials.values())
    for run in trials.values():
        steps = sorted(m.step for m in client.get_metric_history(run.info.run_id, "score"))
        assert steps == [json.loads(line)["training_iteration"] for line in done[int(run.data.tags["rltune.trial"])]
                         .splitlines()] == [1, 2, 3, 4, 5]
    [parent] = [r for r in runs if r.data.tags.get("rltune.role") == "study"]
    assert parent.info.status == "FINISHED"
