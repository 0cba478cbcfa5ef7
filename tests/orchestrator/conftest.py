"""Fixtures shared by the orchestrator's tests."""

from __future__ import annotations

import logging

import pytest


@pytest.fixture(autouse=True)
def _restore_log_levels():
    """The CLI configures logging (as a CLI does); keep other tests' log levels as they were."""
    levels = {name: logging.getLogger(name).level for name in ("", "rltune", "optuna")}
    yield
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)


@pytest.fixture(autouse=True)
def _no_mlflow_by_default(request, monkeypatch):
    """Studies in these tests skip MLflow (tested on its own in tracking/ and in test_tune_tracking.py)."""
    if "tracked" not in request.keywords:
        monkeypatch.setenv("RLTUNE_TRACKING", "0")
