"""The study's experiment marked for MLflow's UI (kind tag, description) when a study starts, resumes, or
``rltune ui`` starts, and the links ``rltune ui`` prints (runs of the study, every trial listed)."""

from __future__ import annotations

import io
from urllib.parse import parse_qs

from mlflow import MlflowClient

from rltune.tracking import StudyTracker
from rltune.tracking._ui import print_study_links
from rltune.tracking._ui_links import browser_url, experiment_url, run_url, study_note

from .conftest import new_store

KIND = "mlflow.experimentKind"
OLD_NOTE = ("rltune study 'old': search tpe, pruner median. The parent run holds the best trial, trials.csv and the "
            "study's plots; each trial is a nested run.")


def _store(tmp_path, template_db):
    results = new_store(template_db, tmp_path / "results")
    uri = f"sqlite:///{results.resolve() / 'mlflow.db'}"
    return results, uri, MlflowClient(uri)


def test_a_new_study_experiment_has_the_kind_and_a_note_that_says_where_the_trials_are(tmp_path, template_db):
    results, uri, client = _store(tmp_path, template_db)
    tracker = StudyTracker(None, results, "fresh", "tpe", "asha")
    tracker.close()
    tags = client.get_experiment_by_name("fresh").tags
    assert tags[KIND] == "custom_model_development"
    assert tags["mlflow.note.content"] == study_note("fresh", "tpe", "asha")
    assert "sorted by Run Name" in tags["mlflow.note.content"]


def test_a_resumed_study_marks_its_older_experiment(tmp_path, template_db):
    results, uri, client = _store(tmp_path, template_db)
    old = client.create_experiment("old", tags={"rltune.study": "old", "rltune.sampler": "tpe",
                                                "rltune.pruner": "median", "mlflow.note.content": OLD_NOTE})
    StudyTracker(None, results, "old", "tpe", "median").close()
    tags = client.get_experiment(old).tags
    assert tags[KIND] == "custom_model_development"
    assert tags["mlflow.note.content"] == study_note("old", "tpe", "median")


def test_rltune_ui_marks_every_study_experiment_and_prints_their_links(tmp_path, template_db):
    results, uri, client = _store(tmp_path, template_db)
    old = client.create_experiment("old", tags={"rltune.study": "old", "rltune.sampler": "tpe",
                                                "rltune.pruner": "median", "mlflow.note.content": OLD_NOTE})
    mine = client.create_experiment("mine", tags={"rltune.study": "mine", "mlflow.note.content": "my own words",
                                                  KIND: "genai_development"})
    other = client.create_experiment("not-a-study")
    out = io.StringIO()
    print_study_links(uri, "http://127.0.0.1:5000", out)
    assert client.get_experiment(old).tags[KIND] == "custom_model_development"
    assert client.get_experiment(old).tags["mlflow.note.content"] == study_note("old", "tpe", "median")
    assert client.get_experiment(mine).tags == {"rltune.study": "mine", "mlflow.note.content": "my own words",
                                                KIND: "genai_development"}  # what the user set stays
    assert KIND not in client.get_experiment(other).tags  # not rltune's
    text = out.getvalue()
    assert f"  study 'old': {experiment_url('http://127.0.0.1:5000', old)}\n" in text
    assert f"  study 'mine': {experiment_url('http://127.0.0.1:5000', mine)}\n" in text
    assert "not-a-study" not in text and "Model training" in text and "Assistant" in text


def test_the_links_open_the_training_view_with_every_trial_listed():
    url = experiment_url("http://127.0.0.1:5000/", "7")
    path, query = url.split("?")
    assert path == "http://127.0.0.1:5000/#/experiments/7/runs"
    # the "Model training" view; sorted by run name, the runs table does not fold the trials under the study's run
    assert parse_qs(query) == {"workflowType": ["machine_learning"], "orderByKey": ["tags.`mlflow.runName`"],
                               "orderByAsc": ["true"]}
    assert "compareRunsMode=CHART" in experiment_url("http://h", "7", charts=True)
    assert run_url("http://h", "7", "abc", "artifacts") == \
        "http://h/#/experiments/7/runs/abc/artifacts?workflowType=machine_learning"
    assert browser_url("http://user:secret@mlflow.example:5000/") == "http://mlflow.example:5000"
    assert browser_url("sqlite:////tmp/mlflow.db") is None and browser_url("databricks") is None


def test_an_unreadable_store_is_one_line_and_no_links(tmp_path):
    (tmp_path / "a-file").write_text("")
    out = io.StringIO()
    print_study_links(f"sqlite:///{tmp_path / 'a-file' / 'mlflow.db'}", "http://127.0.0.1:5000", out)
    assert out.getvalue().startswith("(the studies could not be listed: ") and out.getvalue().count("\n") == 1
