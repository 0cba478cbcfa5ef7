"""Ray Tune's ``tune.with_parameters`` and ``tune.with_resources``: a trainable with objects or a CPU budget.

``with_parameters(fn, data=data)`` runs ``fn(config, data=data)`` in the
trial (the objects travel with the trainable, cloudpickled once per trial);
``with_resources(trainable, {"cpu": 2})`` makes each trial hold 2 CPUs of
the study's budget, as ``resources_per_trial`` does (the planner reads it:
:func:`unwrap_resources`).
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable

from rltune.errors import ConfigError

RESOURCES_ATTR = "__rltune_resources__"


def with_parameters(trainable: Callable[..., Any], **objects: Any) -> Callable[..., Any]:
    """``trainable`` called with ``objects`` as keyword arguments (a function ``fn(config, **objects)``)."""
    if isinstance(trainable, type) or isinstance(trainable, str) or not callable(trainable):
        raise ConfigError(f"must be a function fn(config, **objects), but got {trainable!r}",
                          where="tune.with_parameters trainable")
    try:
        params = inspect.signature(trainable).parameters
    except (TypeError, ValueError):
        params = {}
    missing = [k for k in objects if k not in params and not any(p.kind is p.VAR_KEYWORD for p in params.values())]
    if missing:
        raise ConfigError(f"{getattr(trainable, '__name__', trainable)!r} takes no argument {', '.join(missing)}",
                          where="tune.with_parameters")
    positional = [n for n, p in params.items() if n not in objects
                  and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty]
    if len(positional) >= 2:  # the 1.x form fn(config, reporter, **objects)
        @functools.wraps(trainable)
        def with_reporter(config: dict[str, Any], reporter: Any) -> Any:
            return trainable(config, reporter, **objects)

        with_reporter.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in ("config", "reporter")])
        return with_reporter

    @functools.wraps(trainable)
    def with_objects(config: dict[str, Any]) -> Any:
        return trainable(config, **objects)

    with_objects.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter("config", inspect.Parameter.POSITIONAL_OR_KEYWORD)])
    return with_objects


class WithResources:
    """A trainer (name or class) with the resources its trials hold; the planner unwraps it."""

    def __init__(self, trainable: Any, resources: dict[str, Any]) -> None:
        """``trainable`` whose trials hold ``resources`` (``{"cpu": n}``)."""
        self.trainable = trainable
        setattr(self, RESOURCES_ATTR, resources)

    def __repr__(self) -> str:
        return f"with_resources({self.trainable!r}, {getattr(self, RESOURCES_ATTR)!r})"


def with_resources(trainable: Any, resources: Any) -> Any:
    """``trainable`` whose trials each hold ``resources`` of the study's CPU budget.

    ``resources`` is what ``resources_per_trial`` takes: a dict (``{"cpu": 2}``;
    ``cpu``, ``gpu``, ``extra_cpu``, ``extra_gpu``), a placement-group factory
    (``PPO.default_resource_request(config)``), or a function of the trial's
    config returning either; the study validates it.
    """
    if not (isinstance(resources, dict) or callable(resources) or hasattr(resources, "required_resources")):
        raise ConfigError(f"must be a dict such as {{'cpu': 2}}, a placement-group factory or a function of the "
                          f"config, but got {resources!r}", where="tune.with_resources resources")
    held = dict(resources) if isinstance(resources, dict) else resources
    if callable(trainable) and not isinstance(trainable, type):
        @functools.wraps(trainable)
        def holding(*args: Any, **kwargs: Any) -> Any:
            return trainable(*args, **kwargs)

        holding.__signature__ = inspect.signature(trainable)  # type: ignore[attr-defined]
        setattr(holding, RESOURCES_ATTR, held)
        return holding
    return WithResources(trainable, held)


def unwrap_resources(fields: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The study fields with a :func:`with_resources` trainable as ``run`` and ``resources_per_trial``."""
    run = fields.get("run")
    resources = getattr(run, RESOURCES_ATTR, None)
    if resources is None:
        return fields, []
    fields = dict(fields)
    if isinstance(run, WithResources):
        fields["run"] = run.trainable
    if fields.get("resources_per_trial") is not None:
        return fields, ["resources_per_trial: given both here and by tune.with_resources; give it once"]
    fields["resources_per_trial"] = resources
    return fields, []
