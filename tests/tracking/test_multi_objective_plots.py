"""A multi-objective study in MLflow: the Pareto-front plot (axes named by the metrics) and both values in trials.csv."""

from __future__ import annotations

from pathlib import Path

import pytest
from mlflow import MlflowClient

from rltune.tracking import StudyTracker

from .conftest import new_store


@pytest.fixture
def store(tmp_path, template_db) -> Path:
    return new_store(template_db, tmp_path / "results")


def test_a_multi_objective_study_gets_a_pareto_front_plot_and_its_values_in_the_csv(store, tmp_path):
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(directions=["maximize", "minimize"])
    study.optimize(lambda t: (t.suggest_float("x", 0, 1), t.suggest_float("y", 0, 1)), n_trials=6)
    tracker = StudyTracker(None, store, "pareto", "nsga2", "none",
                           study_params={"metric": ["reward", "cost"], "mode": ["max", "min"]})
    tracker.refresh_study_plots(study)
    client = MlflowClient(tracker.tracking_uri)
    plots = {Path(a.path).name for a in client.list_artifacts(tracker.parent_run_id, "plots")}
    assert plots == {"pareto_front.png"}
    csv_text = Path(client.download_artifacts(tracker.parent_run_id, "trials.csv", str(tmp_path))).read_text()
    first = study.trials[0]
    assert f"{first.values[0]!r};{first.values[1]!r}" in csv_text
    assert tracker.unrecorded == []
    tracker.close()
