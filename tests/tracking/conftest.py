"""Fixtures of the MLflow tracking tests: a migrated empty store, the simulated study, real MLflow servers.

Creating an MLflow SQLite store runs its migrations (10 s or more on a busy
machine), so one empty store is made per session and copied wherever a
store is needed. Servers bind to 127.0.0.1 on a free port and are stopped
(their whole process group) when the test ends.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from rltune.tracking._ui import stop_process_tree

from ._study import simulate_study
from ._trial_side import KEEP_CHECKPOINTS, run_complete_trial

SERVER_START_TIMEOUT_S = 180.0


def mlflow_env() -> dict[str, str]:
    """The environment of MLflow processes started by the tests: no telemetry, no inherited tracking URI."""
    env = dict(os.environ, MLFLOW_DISABLE_TELEMETRY="true", PYTHONUNBUFFERED="1",
               MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false")  # no job-runner processes
    env.pop("MLFLOW_TRACKING_URI", None)
    return env


@pytest.fixture(scope="session", autouse=True)
def _mlflow_test_env():
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
        mp.delenv("MLFLOW_TRACKING_URI", raising=False)
        yield


@pytest.fixture(scope="session")
def template_db(tmp_path_factory) -> Path:
    """An empty, migrated MLflow SQLite store to copy."""
    from mlflow import MlflowClient

    path = tmp_path_factory.mktemp("template") / "mlflow.db"
    MlflowClient(f"sqlite:///{path}").search_experiments()
    return path


def new_store(template_db: Path, results_dir: Path) -> Path:
    """``<results_dir>/mlflow.db``, a copy of the template (the default store of a StudyTracker there)."""
    results_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy(template_db, results_dir / "mlflow.db")
    return results_dir


@pytest.fixture(scope="session")
def local_study(tmp_path_factory, template_db) -> dict:
    """The 3-trial study tracked in the default store under its results dir (trial side in this process)."""
    results = new_store(template_db, tmp_path_factory.mktemp("local") / "results")

    def run_complete(args: dict, trial_dir: Path) -> dict:
        from rltune.tracking import TrialTracker

        return run_complete_trial(TrialTracker(**args, keep_checkpoints_num=KEEP_CHECKPOINTS), trial_dir)

    return simulate_study(results, None, run_complete)


# -- MLflow servers -----------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def answers(url: str) -> bool:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


class MlflowServer:
    """``mlflow server`` on 127.0.0.1 with an SQLite store (a copy of the template) and proxied artifacts."""

    def __init__(self, directory: Path, template_db: Path, port: int | None = None) -> None:
        """A new server on a copy of the template store; with ``port``, a restart on the store already in ``directory``."""
        directory.mkdir(parents=True, exist_ok=True)
        if port is None:
            shutil.copy(template_db, directory / "server.db")
        self.port = port or free_port()
        self.uri = f"http://127.0.0.1:{self.port}"
        self.log = directory / "server.log"
        cmd = [sys.executable, "-m", "mlflow", "server",
               "--backend-store-uri", f"sqlite:///{directory / 'server.db'}",
               "--artifacts-destination", str(directory / "artifacts"),
               "--host", "127.0.0.1", "--port", str(self.port), "--workers", "1"]
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                         env=mlflow_env(), start_new_session=True)
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        while not answers(f"{self.uri}/health"):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"mlflow server did not start:\n{self.log.read_text()[-3000:]}")
            time.sleep(0.25)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Stop the server: ``sig`` to it and everything it started, SIGKILL for what lingers."""
        stop_process_tree(self.proc, sig)


@pytest.fixture
def mlflow_server(tmp_path, template_db):
    server = MlflowServer(tmp_path / "server", template_db)
    try:
        yield server
    finally:
        server.stop()
