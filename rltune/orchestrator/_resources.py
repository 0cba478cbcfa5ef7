"""``resources_per_trial`` (Ray Tune's): how many of the study's CPUs a trial holds.

A study runs up to ``n_jobs`` trials at once within the machine's CPUs; a
trial holds ``1 + num_workers`` CPUs (a trainer's process and its rollout
workers), or 1 for a function. ``resources_per_trial`` asks for more:
``{"cpu": 4}`` (Tune's ``extra_cpu`` adds to it); a trainer's trial still
holds at least ``1 + num_workers``. GPUs are not reserved per trial: a
trainer uses the device its ``num_gpus`` asks for, and concurrent trials
share it.
"""

from __future__ import annotations

import logging
import math

from pydantic import ConfigDict, Field, model_validator

from rltune._validation import UserInput

logger = logging.getLogger(__name__)


class ResourcesPerTrial(UserInput):
    """Tune's ``resources_per_trial`` dict: ``cpu``, ``gpu`` and the older ``extra_cpu`` / ``extra_gpu``."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    cpu: float = Field(1, ge=0, description="CPUs the trial holds of the study's budget (rounded up).")
    gpu: float = Field(0, ge=0, description="Accepted; GPUs are not reserved per trial (see num_gpus).")
    extra_cpu: float = Field(0, ge=0, description="Old Tune: CPUs on top of cpu (a trainer's rollout workers).")
    extra_gpu: float = Field(0, ge=0, description="Old Tune: accepted like gpu.")

    def cpus(self) -> int:
        """The CPUs asked for, as a whole number (at least 1)."""
        return max(1, math.ceil(self.cpu + self.extra_cpu))

    @model_validator(mode="after")
    def _note_gpus(self) -> "ResourcesPerTrial":
        if self.gpu + self.extra_gpu > 0:
            logger.warning("resources_per_trial: gpu=%g reserves nothing in rltune; a trainer uses the device its "
                           "config's num_gpus asks for, shared by the trials that run at once", self.gpu + self.extra_gpu)
        return self
