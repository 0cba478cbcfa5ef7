"""Ray Train 2.x's names a Tune user imports (``from ray import train`` -> ``from rltune import train``).

``train.report(metrics, checkpoint=Checkpoint.from_directory(d))``,
``train.get_checkpoint()`` and ``train.get_context()`` inside a function
trainable; ``train.RunConfig``, ``train.CheckpointConfig``,
``train.FailureConfig`` and ``train.Checkpoint`` for a ``tune.Tuner``. The
code lives in the orchestrator (:mod:`rltune.orchestrator._session`,
:mod:`rltune.orchestrator._tuner_config`, :mod:`rltune.orchestrator._checkpoint`);
this module only re-exports it.
"""

from __future__ import annotations

from rltune.orchestrator._checkpoint import Checkpoint
from rltune.orchestrator._result_grid import Result
from rltune.orchestrator._session import TrialContext, get_checkpoint, get_context, report
from rltune.orchestrator._tuner_config import CheckpointConfig, FailureConfig, RunConfig

__all__ = [
    "Checkpoint",
    "CheckpointConfig",
    "FailureConfig",
    "Result",
    "RunConfig",
    "TrialContext",
    "get_checkpoint",
    "get_context",
    "report",
]
