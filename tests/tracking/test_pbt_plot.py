"""A PBT study's parent run: plots/pbt_hyperparams.png, drawn from the series the trials' PBT user attrs give."""

from __future__ import annotations

from pathlib import Path

import optuna
from mlflow import MlflowClient

from rltune.tracking import StudyTracker
from rltune.tracking._pbt_plot import pbt_series

from .conftest import new_store

optuna.logging.set_verbosity(optuna.logging.WARNING)


def _population() -> optuna.Study:
    """Trial 0 never exploits; trial 1 takes trial 0's checkpoint at iterations 4 and 8; trial 2 is no PBT member."""
    study = optuna.create_study(direction="maximize")
    for number, attrs in enumerate([
        {"pbt_initial": {"lr": 0.001, "clip_param": 0.2}},
        {"pbt_initial": {"lr": 0.01, "clip_param": 0.1},
         "pbt_lineage": [{"iteration": 4, "source": 0, "checkpoint": "c4", "changed": {"lr": 0.0012, "clip_param": 0.3}},
                         {"iteration": 8, "source": 0, "checkpoint": "c8", "changed": {"lr": 0.0008, "clip_param": 0.2}}]},
        {},
    ]):
        trial = study.ask()
        for key, value in attrs.items():
            trial.set_user_attr(key, value)
        for step in range(1, 11):
            trial.report(float(step * number), step)
        study.tell(trial, float(number))
    return study


def test_the_series_start_at_each_members_values_change_at_its_exploits_and_end_at_its_last_step():
    series = pbt_series(_population().trials)
    assert series == {
        "lr": {0: [(0, 0.001, False), (10, 0.001, False)],
               1: [(0, 0.01, False), (4, 0.0012, True), (8, 0.0008, True), (10, 0.0008, False)]},
        "clip_param": {0: [(0, 0.2, False), (10, 0.2, False)],
                       1: [(0, 0.1, False), (4, 0.3, True), (8, 0.2, True), (10, 0.2, False)]},
    }


def test_a_pbt_studys_parent_run_gets_the_population_plot(tmp_path, template_db):
    store = new_store(template_db, tmp_path / "results")
    tracker = StudyTracker(None, store, "pbt", "random", "none", study_params={"metric": "reward", "mode": "max"})
    tracker.refresh_study_plots(_population())
    client = MlflowClient(tracker.tracking_uri)
    plots = {Path(a.path).name: a.file_size for a in client.list_artifacts(tracker.parent_run_id, "plots")}
    assert plots.get("pbt_hyperparams.png", 0) > 2000, plots
    assert tracker.unrecorded == []
    tracker.close()
