"""Ray AIR's names of Ray 2.0-2.6 (``from ray import air`` -> ``from rltune import air``).

``air.RunConfig``, ``air.CheckpointConfig``, ``air.FailureConfig``,
``air.Checkpoint``, ``air.Result``, and ``air.session`` (``session.report(metrics,
checkpoint=...)``, ``session.get_checkpoint()``, ``session.get_trial_name()``,
``session.get_trial_id()``, ``session.get_trial_dir()``). Re-exports of the
orchestrator's code, as :mod:`rltune.train`.
"""

from __future__ import annotations

from rltune.orchestrator import _session as session
from rltune.orchestrator._checkpoint import Checkpoint
from rltune.orchestrator._result_grid import Result
from rltune.orchestrator._tuner_config import CheckpointConfig, FailureConfig, RunConfig

__all__ = ["Checkpoint", "CheckpointConfig", "FailureConfig", "Result", "RunConfig", "session"]
