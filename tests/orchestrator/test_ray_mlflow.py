"""Ray Tune's MLflow names: MLflowLoggerCallback and setup_mlflow set the study's tracking store and experiment."""

from __future__ import annotations

import pytest

from rltune import tune
from rltune.errors import ConfigError, StudyFailedError

from .ray_trainables import mlflow_user
from .trainables import counter


def _experiments(uri):
    from mlflow.tracking import MlflowClient

    return {e.name for e in MlflowClient(uri).search_experiments()}


@pytest.mark.tracked
def test_mlflow_logger_callback_sets_the_tracking_uri_and_experiment(tmp_path):
    uri = f"sqlite:///{tmp_path}/elsewhere.db"
    callback = tune.MLflowLoggerCallback(tracking_uri=uri, experiment_name="ray_exp", save_artifact=True)
    analysis = tune.run(counter, config={"steps": 2}, metric="score", callbacks=[callback],
                        results_dir=str(tmp_path / "results"), verbose=0)
    assert analysis.study.study_name == "ray_exp"
    assert "ray_exp" in _experiments(uri)


@pytest.mark.tracked
def test_setup_mlflow_config_sets_the_study_and_the_trial_may_repeat_it(tmp_path):
    uri = f"sqlite:///{tmp_path}/cfg.db"
    config = {"mlflow": {"tracking_uri": uri, "experiment_name": "from_config"},
              "setup": {"experiment_name": "from_config"}}
    analysis = tune.run(mlflow_user, config=config, metric="score", results_dir=str(tmp_path / "results"), verbose=0)
    assert analysis.study.study_name == "from_config" and "from_config" in _experiments(uri)
    assert analysis.trials[0].state == "COMPLETE" and analysis.trials[0].last_result["has_log_metrics"] is True


def test_setup_mlflow_in_a_trial_naming_another_experiment_fails_the_trial(tmp_path):
    with pytest.raises(StudyFailedError) as error:
        tune.run(mlflow_user, config={"setup": {"experiment_name": "other"}}, metric="score", name="study",
                 results_dir=str(tmp_path), verbose=0)
    assert "setup_mlflow: experiment_name='other': the study records this trial with name 'study'" in str(error.value)


def test_a_callback_experiment_and_a_study_name_that_differ_are_named(tmp_path):
    callback = tune.MLflowLoggerCallback(experiment_name="a")
    with pytest.raises(ConfigError, match="name: tune.run gives 'b' but MLflowLoggerCallback gives 'a'; give it once"):
        tune.run(counter, config={}, metric="score", callbacks=[callback], name="b", results_dir=str(tmp_path),
                 verbose=0)
