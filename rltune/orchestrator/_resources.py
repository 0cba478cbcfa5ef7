"""``resources_per_trial`` (Ray Tune's): how many of the study's CPUs a trial holds.

A study runs up to ``n_jobs`` trials at once within the machine's CPUs; a
trial holds ``1 + num_workers`` CPUs (a trainer's process and its rollout
workers), or 1 for a function. ``resources_per_trial`` asks for more:
``{"cpu": 4}`` (Tune's ``extra_cpu`` adds to it); a trainer's trial still
holds at least ``1 + num_workers``. GPUs are not reserved per trial: a
trainer uses the device its ``num_gpus`` asks for, and concurrent trials
share it.

Older Tune scripts give it as a function of the trial's config
(``resources_per_trial=lambda config: {"cpu": 1 + config["num_workers"]}``,
a dict with such values, or a trainer's ``default_resource_request``) or as
a placement-group factory (anything with ``required_resources``, e.g.
``PPO.default_resource_request(config)``): a function is evaluated with each
trial's config, a factory's ``CPU`` and ``GPU`` sums are ``cpu`` and ``gpu``.
"""

from __future__ import annotations

import logging
import math
from typing import Any, Callable

from pydantic import ConfigDict, Field, PrivateAttr, ValidationError, model_validator

from rltune._validation import UserInput, error_text
from rltune.errors import ConfigError

logger = logging.getLogger(__name__)


class ResourcesPerTrial(UserInput):
    """Tune's ``resources_per_trial`` dict: ``cpu``, ``gpu`` and the older ``extra_cpu`` / ``extra_gpu``."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    cpu: float = Field(1, ge=0, description="CPUs the trial holds of the study's budget (rounded up).")
    gpu: float = Field(0, ge=0, description="Accepted; GPUs are not reserved per trial (see num_gpus).")
    extra_cpu: float = Field(0, ge=0, description="Old Tune: CPUs on top of cpu (a trainer's rollout workers).")
    extra_gpu: float = Field(0, ge=0, description="Old Tune: accepted like gpu.")
    _function: "ResourcesFunction | None" = PrivateAttr(None)  # given as a function of the trial's config

    @model_validator(mode="wrap")
    @classmethod
    def _functions_and_factories(cls, value: Any, handler: Any) -> "ResourcesPerTrial":
        value = _plain(value)
        if not isinstance(value, ResourcesFunction):
            return handler(value)
        resources = handler({})
        resources._function = value
        return resources

    def cpus(self) -> int:
        """The CPUs asked for, as a whole number (at least 1)."""
        return max(1, math.ceil(self.cpu + self.extra_cpu))

    @model_validator(mode="after")
    def _note_gpus(self) -> "ResourcesPerTrial":
        if self.gpu + self.extra_gpu > 0:
            logger.warning("resources_per_trial: gpu=%g reserves nothing in rltune; a trainer uses the device its "
                           "config's num_gpus asks for, shared by the trials that run at once", self.gpu + self.extra_gpu)
        return self


class ResourcesFunction:
    """``resources_per_trial`` that depends on the trial's config: a function of it, or a dict with such values."""

    def __init__(self, given: Callable[[dict[str, Any]], Any] | dict[str, Any]) -> None:
        self.given = given

    def resolve(self, config: dict[str, Any]) -> ResourcesPerTrial:
        """The resources of a trial with ``config``; ConfigError naming resources_per_trial if they are not valid."""
        try:
            if callable(self.given):
                value = self.given(config)
            else:
                value = {key: v(config) if callable(v) else v for key, v in self.given.items()}
        except Exception as exc:  # noqa: BLE001 - the user's function: its error, named, not a traceback
            raise ConfigError(f"the function raised {type(exc).__name__}: {exc} (called with the trial's config)",
                              where="resources_per_trial") from None
        try:
            return ResourcesPerTrial.model_validate(_plain(value))
        except ValidationError as exc:
            problems = [f"{'.'.join(map(str, e['loc']))}: {error_text(e)} (got {e.get('input')!r:.40})" for e in exc.errors()]
            raise ConfigError(problems, where="resources_per_trial (as the function returned them)") from None


def _plain(value: Any) -> Any:
    """A placement-group factory (``required_resources``) as Tune's dict; a callable (or a dict with one) wrapped."""
    required = getattr(value, "required_resources", None)
    if isinstance(required, dict):
        return {name.lower(): amount for name, amount in required.items() if name.lower() in ("cpu", "gpu")}
    if callable(value) or (isinstance(value, dict) and any(callable(v) for v in value.values())):
        return ResourcesFunction(value)
    return value


def resolve_resources(asked: ResourcesPerTrial, config: dict[str, Any], *, estimate: bool = False) -> ResourcesPerTrial | None:
    """The resources a trial with ``config`` asks for; ``estimate`` (a config with search-space entries
    still in it): None when a function cannot answer for it, rather than an error."""
    if asked._function is None:
        return asked
    try:
        return asked._function.resolve(config)
    except ConfigError:
        if estimate:
            return None
        raise
