"""seeds_per_trial in MLflow: each seed a run nested under its trial's run; the final evaluation's table in the parent run."""

from __future__ import annotations

import pytest

from rltune import tune

from .trainables import seeded

pytestmark = pytest.mark.tracked


def test_each_seed_is_a_nested_run_and_the_final_table_is_in_the_parent_run(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    tune.run(seeded, name="seeds", config={"x": tune.grid_search([1, 2]), "steps": 3}, metric="score",
             seeds_per_trial=2, final_evaluation={"top_k": 1, "seeds": 2}, results_dir=str(tmp_path), verbose=0)
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    experiment = client.get_experiment_by_name("seeds")
    runs = client.search_runs([experiment.experiment_id])
    role = {r.info.run_id: r.data.tags.get("rltune.role") for r in runs}
    parent = next(r for r in runs if role[r.info.run_id] == "study")
    trials = [r for r in runs if role[r.info.run_id] == "trial"]
    seeds = [r for r in runs if role[r.info.run_id] == "seed"]
    assert len(trials) == 2 and len(seeds) == 4
    for trial in trials:
        mine = [s for s in seeds if s.data.tags["mlflow.parentRunId"] == trial.info.run_id]
        assert sorted(s.data.params["seed_index"] for s in mine) == ["0", "1"]
        assert len({s.data.params["seed"] for s in mine}) == 2
        for seed in mine:
            assert seed.info.status == "FINISHED"
            assert sorted(m.step for m in client.get_metric_history(seed.info.run_id, "score")) == [1, 2, 3]
        assert client.get_metric_history(trial.info.run_id, "seed_ci_low")  # the interval, per step
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id, "final_evaluation")}
    assert artifacts == {"final_evaluation/final_evaluation.json", "final_evaluation/final_evaluation.csv"}
