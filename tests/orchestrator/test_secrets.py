"""Passwords in storage URLs and tracking URIs: never printed, stored or put on a command line.

The unit tests need no database. The study tests run on the PostgreSQL server
of ``$RLTUNE_TEST_POSTGRES_URL`` (``scripts/postgres.sh``), with a password in
the URL, and look for it in ``study.json`` and in the Optuna study's user attrs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from rltune import tune
from rltune.errors import ConfigError
from rltune.orchestrator._listing import load_study
from rltune._secrets import redact_text, redact_url, resolve_url
from rltune.orchestrator._storage import is_shared
from rltune.tracking._ui import ui_command, ui_env

from .trainables import counter

SECRET = "s3cret-Pw9"
UNREACHABLE = f"postgresql://u:{SECRET}@127.0.0.1:1/db"
BASE_URL = os.environ.get("RLTUNE_TEST_POSTGRES_URL")


# --- one redaction, one resolution ----------------------------------------------------------


@pytest.mark.parametrize("url, shown", [
    (UNREACHABLE, "postgresql://u:***@127.0.0.1:1/db"),
    (f"postgresql+psycopg://u:{SECRET}@db-host:5432/rltune?sslmode=require",
     "postgresql+psycopg://u:***@db-host:5432/rltune?sslmode=require"),
    (f"mysql://u:{SECRET}@h/db", "mysql://u:***@h/db"),
    (f"http://u:{SECRET}@mlflow-host:5000", "http://u:***@mlflow-host:5000"),
    ("postgresql://u@h/db", "postgresql://u@h/db"),
    ("postgresql://u:${DB_PASSWORD}@h/db", "postgresql://u:${DB_PASSWORD}@h/db"),  # a reference: no secret
    ("${RLTUNE_STORAGE_URL}", "${RLTUNE_STORAGE_URL}"),
    ("sqlite:///tmp/studies.db", "sqlite:///tmp/studies.db"),
    ("/tmp/study.journal", "/tmp/study.journal"),
    (None, None),
])
def test_redact_url_masks_only_a_literal_password(url, shown):
    assert redact_url(url) == shown


def test_redact_text_masks_passwords_in_messages():
    text = f"Could not parse SQLAlchemy URL from string '{UNREACHABLE}'; password {SECRET} refused"
    redacted = redact_text(text, UNREACHABLE)
    assert SECRET not in redacted
    assert "postgresql://u:***@127.0.0.1:1/db" in redacted
    assert SECRET not in redact_text(f"at http://user:{SECRET}@host:5000/api")  # any URL, none named


def test_resolve_url_reads_the_environment_and_files(tmp_path, monkeypatch):
    monkeypatch.setenv("RLTUNE_T_URL", "postgresql://u:pw@h/db")
    monkeypatch.setenv("RLTUNE_T_PW", "p@ss/w:rd")
    (tmp_path / "pw").write_text(f"{SECRET}\n")
    assert resolve_url("${RLTUNE_T_URL}") == "postgresql://u:pw@h/db"
    # a password from a reference is URL-quoted: '@', '/' and ':' stay in the password
    assert resolve_url("postgresql://u:${RLTUNE_T_PW}@h/db") == "postgresql://u:p%40ss%2Fw%3Ard@h/db"
    assert resolve_url(f"postgresql://u:${{file:{tmp_path}/pw}}@h/db") == f"postgresql://u:{SECRET}@h/db"
    assert is_shared("${RLTUNE_T_URL}")
    monkeypatch.delenv("RLTUNE_T_URL")
    with pytest.raises(ConfigError, match=r"RLTUNE_T_URL is not set"):
        resolve_url("${RLTUNE_T_URL}")
    with pytest.raises(ConfigError, match=r"cannot be read"):
        resolve_url(f"postgresql://u:${{file:{tmp_path}/missing}}@h/db")


# --- errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize("url", [UNREACHABLE, f"postgresql://u:{SECRET}@127.0.0.1:notaport/db"],
                         ids=["unreachable", "malformed"])
def test_a_storage_that_cannot_be_opened_is_named_without_its_password(url, tmp_path):
    with pytest.raises(ConfigError) as info:
        tune.run(counter, config={"steps": 1}, metric="score", storage=url, results_dir=str(tmp_path), name="s")
    message = str(info.value)
    assert SECRET not in message
    assert "u:***@127.0.0.1" in message
    assert not (tmp_path / "s" / "study.json").exists() or SECRET not in (tmp_path / "s" / "study.json").read_text()


def test_cli_storage_error_is_one_line_without_the_password(tmp_path):
    study = tmp_path / "study.yaml"
    study.write_text("name: s\nrun: orchestrator.trainables:counter\nmetric: score\nconfig: {steps: 1}\n")
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "rltune"), "tune", str(study), "--storage", UNREACHABLE,
         "--results-dir", str(tmp_path), "--quiet"],
        capture_output=True, text=True, timeout=120,
        env=dict(os.environ, RLTUNE_TRACKING="0", PYTHONPATH=str(Path(__file__).parents[1])),
    )
    assert proc.returncode == 2, proc.stderr
    assert SECRET not in proc.stdout + proc.stderr
    assert "u:***@127.0.0.1" in proc.stderr and "Traceback" not in proc.stderr


# --- rltune ui ---------------------------------------------------------------------------------


def test_ui_passes_the_store_in_the_environment_not_on_the_command_line(tmp_path):
    store = f"postgresql://u:{SECRET}@127.0.0.1:1/mlflow"
    argv = ui_command(tmp_path, "127.0.0.1", 5000)
    assert SECRET not in " ".join(argv) and "--backend-store-uri" not in argv
    assert ui_env(store)["MLFLOW_BACKEND_STORE_URI"] == store  # what `mlflow server` reads without the flag


def test_mlflow_ui_serves_the_store_given_in_its_environment(tmp_path):
    """The real server reads MLFLOW_BACKEND_STORE_URI: it creates the store there; its argv does not name it."""
    import socket

    from rltune.tracking._ui import _descendants, start_ui

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    store = tmp_path / "elsewhere" / "mlflow.db"
    store.parent.mkdir()
    server = start_ui(tmp_path / "results", port, tracking_uri=f"sqlite:///{store}")
    try:
        for pid in [server.proc.pid, *_descendants(server.proc.pid)]:  # the server and its uvicorn workers
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    argv = f.read().decode(errors="replace").split("\0")
            except OSError:
                continue
            assert str(store) not in " ".join(argv)
        assert store.exists()  # the server opened the store it was given through the environment
    finally:
        server.stop()


# --- a study on PostgreSQL with a password ------------------------------------------------------


@pytest.fixture
def pg_url():
    """A fresh database on the test server (dropped afterwards): its URL, with the server's password."""
    if not BASE_URL:
        if os.environ.get("CI"):
            pytest.fail("RLTUNE_TEST_POSTGRES_URL is not set under CI: .ci/run starts PostgreSQL (scripts/postgres.sh)")
        pytest.skip("no PostgreSQL server: run `bash scripts/postgres.sh` and set RLTUNE_TEST_POSTGRES_URL to its URL")
    import psycopg

    name = f"rltune_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(BASE_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield urlunsplit(urlsplit(BASE_URL)._replace(path=f"/{name}"))
    with psycopg.connect(BASE_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _stored_text(study) -> str:
    """Everything rltune stored in Optuna: the study's and every trial's user attrs, as text."""
    return json.dumps([study.user_attrs] + [t.user_attrs for t in study.get_trials(deepcopy=False)], default=str)


def _run(storage: str, tmp_path, name: str, **kwargs):
    return tune.run(counter, config={"x": tune.grid_search([1, 2]), "steps": 2}, metric="score", storage=storage,
                    results_dir=str(tmp_path), name=name, **kwargs)


@pytest.mark.postgres
def test_a_study_with_a_password_in_its_url_stores_it_nowhere(pg_url, tmp_path, monkeypatch):
    password = urlsplit(pg_url).password
    tracking = f"http://tracker:{SECRET}@127.0.0.1:9/"  # recorded with the study (tracking itself is off here)
    analysis = _run(pg_url, tmp_path, "secret", tracking_uri=tracking)
    assert len(analysis.trials) == 2
    saved = (tmp_path / "secret" / "study.json").read_text()
    stored = _stored_text(analysis.study)
    for text in (saved, stored):
        assert f":{password}@" not in text and SECRET not in text
    assert json.loads(saved)["storage"] == redact_url(pg_url)
    assert analysis.study.user_attrs["rltune"]["tracking_uri"] == "http://tracker:***@127.0.0.1:9/"
    # rltune show: the password is not in study.json; libpq's PGPASSWORD gives it
    monkeypatch.setenv("PGPASSWORD", password)
    study, _ = load_study(tmp_path / "secret")
    assert len(study.get_trials()) == 2
    monkeypatch.setenv("PGPASSWORD", "wrong")
    with pytest.raises(ConfigError) as info:
        load_study(tmp_path / "secret")
    assert "PGPASSWORD" in str(info.value) and f":{password}@" not in str(info.value)


@pytest.mark.postgres
def test_the_password_from_the_environment_or_a_file(pg_url, tmp_path, monkeypatch):
    parts = urlsplit(pg_url)
    password = parts.password
    bare = urlunsplit(parts._replace(netloc=f"{parts.username}@{parts.hostname}:{parts.port}"))
    # 1. libpq's own: no password in the URL, PGPASSWORD in the environment
    monkeypatch.setenv("PGPASSWORD", password)
    assert len(_run(bare, tmp_path, "pgpassword").trials) == 2
    monkeypatch.delenv("PGPASSWORD")
    # 2. ${NAME}: the whole URL from the environment, kept as the reference in study.json
    monkeypatch.setenv("RLTUNE_T_STORAGE", pg_url)
    analysis = _run("${RLTUNE_T_STORAGE}", tmp_path, "env_ref")
    assert len(analysis.trials) == 2
    saved = json.loads((tmp_path / "env_ref" / "study.json").read_text())
    assert saved["storage"] == "${RLTUNE_T_STORAGE}"
    assert len(load_study(tmp_path / "env_ref")[0].get_trials()) == 2  # resolved again when read back
    # 3. ${file:PATH}: the password from a file
    (tmp_path / "pw").write_text(password + "\n")
    from_file = urlunsplit(parts._replace(
        netloc=f"{parts.username}:${{file:{tmp_path}/pw}}@{parts.hostname}:{parts.port}"))
    analysis = _run(from_file, tmp_path, "file_ref")
    assert len(analysis.trials) == 2
    saved_text = (tmp_path / "file_ref" / "study.json").read_text()
    assert f":{password}@" not in saved_text and "${file:" in saved_text


@pytest.mark.tracked
def test_tracking_server_failures_are_logged_without_the_password(tmp_path, caplog):
    import socket

    from rltune.tracking import StudyTracker

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    with caplog.at_level("DEBUG", logger="rltune"):
        study = StudyTracker(f"http://tracker:{SECRET}@127.0.0.1:{port}", tmp_path, "nowhere", "tpe", "none")
        study.start_trial(0, {"lr": 0.1}, {"lr": 0.1})
        study.close()
    assert "could not record" in caplog.text
    assert SECRET not in caplog.text
