"""An automatic curriculum's task distribution in MLflow: metrics per task and a heat map of it over training."""

from __future__ import annotations

from pathlib import Path

import pytest
from mlflow import MlflowClient

from rltune.tracking import StudyTracker
from rltune.tracking._plots import task_sampling

from .conftest import new_store


@pytest.fixture
def store(tmp_path, template_db) -> Path:
    return new_store(template_db, tmp_path / "results")


def results() -> list[dict]:
    return [{"training_iteration": i, "timesteps_total": 512 * i, "score": float(i), "curriculum_task": 4,
             "curriculum": {"task_probs": {"4": 1 - 0.1 * i, "8": 0.1 * i}, "task_episodes": {"4": 10 * i, "8": i}}}
            for i in (1, 2, 3)]


def test_the_task_distribution_is_logged_per_task_and_drawn_as_a_heat_map(store, tmp_path):
    tracker = StudyTracker(None, store, "auto-curriculum", "tpe", "none")
    side = tracker.open_trial(0, {}, {}, metric="score")
    for result in results():
        side.log_result(result)
    side.log_learning_curve()
    tracker.end_trial(side, "COMPLETE")
    tracker.close()
    client = MlflowClient(tracker.tracking_uri)
    history = client.get_metric_history(side.run_id, "curriculum/task_probs/8")
    assert [(m.step, round(m.value, 6)) for m in history] == [(1, 0.1), (2, 0.2), (3, 0.3)]
    local = Path(client.download_artifacts(side.run_id, "plots", str(tmp_path / "down")))
    assert (local / "task_sampling.png").stat().st_size > 2000
    assert (local / "learning_curve.png").is_file()


def test_the_heat_map_takes_tasks_that_appear_later_and_results_without_a_distribution(tmp_path):
    points = [{"iteration": 1, "timesteps": None, "task_probs": {"a": 1.0}},
              {"iteration": 2, "timesteps": None, "task_probs": None},
              {"iteration": 3, "timesteps": None, "task_probs": {"a": 0.5, "b": 0.5}}]
    task_sampling(points, tmp_path / "map.png")
    assert (tmp_path / "map.png").read_bytes()[:4] == b"\x89PNG"
