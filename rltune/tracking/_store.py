"""Where a study's runs are stored, and how they are named: the tracking URI, the client, tags, run states."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

DB_FILE = "mlflow.db"
ARTIFACTS_DIR = "mlartifacts"

# rltune trial states -> MLflow run statuses (the state itself is in the rltune.state tag)
RUN_STATUS = {
    "RUNNING": "RUNNING",
    "COMPLETE": "FINISHED",
    "PRUNED": "KILLED",
    "FAIL": "FAILED",
    "INTERRUPTED": "KILLED",  # Ctrl-C or a killed orchestrator: resumable, set RUNNING again on resume
}

# Short timeouts and few retries for remote servers: a dead server must not stall training.
HTTP_DEFAULTS = {
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "10",
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
}

TAG_ROLE = "rltune.role"
TAG_STUDY = "rltune.study"
TAG_TRIAL = "rltune.trial"
TAG_STATE = "rltune.state"
TAG_SAMPLER = "rltune.sampler"
TAG_PRUNER = "rltune.pruner"
TAG_PARENT = "mlflow.parentRunId"
TAG_TRUNCATED = "rltune.note.truncated_params"
TAG_RETRY_OF = "rltune.retry_of"  # a trial that retries a failed one: that one's number
TAG_RETRIED_BY = "rltune.retried_by"  # a failed trial retried by another: the retry's number
# MLflow's tag for a model-training experiment (what the UI reads for it: rltune/tracking/_ui_links.py)
EXPERIMENT_KIND = ("mlflow.experimentKind", "custom_model_development")

TAG_SYNCED = "rltune.reconciled"  # a digest of the trial directory and state a run was last reconciled with
STEP_KEY = "training_iteration"  # every result has it: its metric history says which steps a run holds


def resolve_tracking_uri(tracking_uri: str | None, results_dir: str | os.PathLike[str]) -> str:
    """The tracking URI: ``tracking_uri``, else ``$MLFLOW_TRACKING_URI``, else ``sqlite:///<results_dir>/mlflow.db``.

    ``${NAME}`` / ``${file:PATH}`` references in ``tracking_uri`` are resolved
    here (see :mod:`rltune._secrets`); show the result only
    through ``redact_url``.
    """
    if tracking_uri:
        from rltune._secrets import resolve_url

        return str(resolve_url(str(tracking_uri), where="tracking_uri"))
    env = os.environ.get("MLFLOW_TRACKING_URI")
    if env:
        return env
    return f"sqlite:///{Path(os.path.expanduser(str(results_dir))).resolve() / DB_FILE}"


def artifact_root(results_dir: str | os.PathLike[str]) -> Path:
    """Where the embedded store keeps artifacts: ``<results_dir>/mlartifacts``."""
    return Path(os.path.expanduser(str(results_dir))).resolve() / ARTIFACTS_DIR


def is_remote(tracking_uri: str) -> bool:
    """Whether the store is a tracking server (HTTP), which holds its own artifact root."""
    return tracking_uri.startswith(("http://", "https://")) or tracking_uri.startswith("databricks")


def make_client(tracking_uri: str) -> Any:
    """An :class:`mlflow.MlflowClient` for ``tracking_uri``, with short HTTP timeouts for servers."""
    if is_remote(tracking_uri):
        for name, value in HTTP_DEFAULTS.items():
            os.environ.setdefault(name, value)
    elif tracking_uri.startswith("sqlite:///"):
        Path(tracking_uri[len("sqlite:///"):]).parent.mkdir(parents=True, exist_ok=True)
    from mlflow import MlflowClient

    return MlflowClient(tracking_uri=tracking_uri)


def ui_hint(tracking_uri: str, results_dir: str | os.PathLike[str]) -> str:
    """Where the user sees a study's runs: the ``rltune ui`` command for this store, or the server to open."""
    import shlex

    from rltune._secrets import redact_url

    if is_remote(tracking_uri):
        return f"open {redact_url(tracking_uri)} in a browser"
    results = Path(os.path.expanduser(str(results_dir))).resolve()
    if tracking_uri == f"sqlite:///{results / DB_FILE}":
        return f"rltune ui --results-dir {shlex.quote(str(results))}"
    return f"rltune ui --tracking-uri {shlex.quote(redact_url(tracking_uri))}"
