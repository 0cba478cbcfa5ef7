"""Fixtures of every test (``trainer_cls``) and of the orchestrator's and the tracking's tests (tests/orchestrator, tests/tracking)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

_STUDY_TESTS = tuple(Path(__file__).parent / name for name in ("orchestrator", "tracking"))


def _study_test(request) -> bool:
    return any(Path(str(request.path)).is_relative_to(d) for d in _STUDY_TESTS)


@pytest.fixture(autouse=True)
def _restore_log_levels(request):
    """The CLI configures logging (as a CLI does); keep other tests' log levels as they were."""
    if not _study_test(request):
        yield
        return
    levels = {name: logging.getLogger(name).level for name in ("", "rltune", "optuna")}
    yield
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)


@pytest.fixture(autouse=True)
def _no_mlflow_by_default(request, monkeypatch):
    """Studies in these tests skip MLflow unless marked ``tracked`` (tracking/, test_tune_tracking.py)."""
    if _study_test(request) and "tracked" not in request.keywords:
        monkeypatch.setenv("RLTUNE_TRACKING", "0")


@pytest.fixture(scope="module", params=["PPO", "DQN"])
def trainer_cls(request):
    """Each trainer class in turn (PPO, DQN), for behaviour every trainer shares; configs from trainer_params.py.

    By name, so that collecting tests that do not train imports no torch.
    """
    from rltune.trainers import get_trainer_class

    return get_trainer_class(request.param)
