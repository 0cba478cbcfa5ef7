"""Ray Tune objects in a study's fields translated into rltune's: one function, used by ``tune.run`` and the Tuner.

:func:`translate_search` takes the fields of a study (``tune.run``'s
arguments, or a Tuner's ``TuneConfig`` / ``RunConfig`` as study fields; None
means not given) and returns them with every Ray Tune object replaced:

- ``search_alg``: a searcher (:mod:`._ray_searchers`) becomes the Optuna
  sampler's name and options, or a sampler instance; ``points_to_evaluate``
  wrap it so that the first trials run them (:mod:`._points_first`);
- ``scheduler``: a scheduler (:mod:`._ray_schedulers`) becomes the Optuna
  pruner's, and its ``max_t`` a stop criterion;
- ``callbacks`` (not a study field: removed): an ``MLflowLoggerCallback``
  sets ``tracking_uri`` and ``name``; so does a function trainable's
  ``config["mlflow"]``;
- ``metric`` / ``mode`` given to a searcher or scheduler become the study's;
  two sources that give different values are a ConfigError naming both;
- a ``ConcurrencyLimiter`` (or ``BasicVariantGenerator(max_concurrent)``)
  caps ``n_jobs`` (and ``max_concurrent`` when given).

``tune.sample_from`` values of the config are computed once here, on the
config's first values, so that a function that raises is a ConfigError
before any trial.
"""

from __future__ import annotations

from typing import Any

from rltune.errors import ConfigError
from rltune.orchestrator._ray_mlflow import config_part
from rltune.orchestrator._ray_part import RayName, StudyPart
from rltune.orchestrator._sample_from import has_sample_from

_KIND = {"search_alg": "a searcher (OptunaSearch, HyperOptSearch, ...)",
         "scheduler": "a scheduler (ASHAScheduler, MedianStoppingRule, ...)"}


def translate_search(fields: dict[str, Any], *, where: str = "tune.run") -> dict[str, Any]:
    """``fields`` (a new dict) with Ray Tune's searchers, schedulers and callbacks in rltune's study fields.

    ``where`` names the caller in messages (``tune.run``, ``TuneConfig``).
    Raises :class:`~rltune.errors.ConfigError` naming the clash or the object.
    """
    fields = dict(fields)
    parts: list[StudyPart] = []
    for key in ("search_alg", "scheduler"):
        value = fields.get(key)
        if isinstance(value, RayName):
            part = value.study_part()
            if key not in part.fields:
                raise ConfigError(f"{key}: {type(value).__name__} is not {_KIND[key]}; pass it as "
                                  f"{'scheduler' if key == 'search_alg' else 'search_alg'}=...", where=where)
            fields[key] = None
            parts.append(part)
    parts.extend(_callback_parts(fields.pop("callbacks", None), where))
    if not _is_trainer(fields.get("run")):
        mlflow = config_part(fields.get("config"))
        if mlflow is not None:
            parts.append(mlflow)
    owners: dict[str, str] = {}  # who gave the study's metric and mode
    for part in parts:
        _merge(fields, part, owners, where)
    _check_sample_from(fields.get("config"))
    return fields


def _callback_parts(callbacks: Any, where: str) -> list[StudyPart]:
    if callbacks is None:
        return []
    if not isinstance(callbacks, (list, tuple)):
        raise ConfigError(f"callbacks: must be a list of callbacks, but got {callbacks!r}", where=where)
    parts = []
    for callback in callbacks:
        if not isinstance(callback, RayName) or "search_alg" in callback.study_part().fields:
            raise ConfigError(f"callbacks: {type(callback).__name__} is not taken: rltune's study records itself in "
                              "MLflow (MLflowLoggerCallback sets where) and shows progress itself; trainer hooks go "
                              "in config['callbacks']", where=where)
        parts.append(callback.study_part())
    return parts


def _is_trainer(run: Any) -> bool:
    """Whether ``run`` names a trainer (its config's keys are checked by the trainer, so config.mlflow is not read)."""
    if isinstance(run, str):
        return ":" not in run
    return isinstance(run, type)


def _merge(fields: dict[str, Any], part: StudyPart, owners: dict[str, str], where: str) -> None:
    """Merge one part into ``fields``: its own fields, metric and mode, stop criteria, concurrency and points."""
    for key, value in part.fields.items():
        if key in ("search_alg", "scheduler") or fields.get(key) is None:
            fields[key] = value
        elif fields[key] != value:
            raise ConfigError(f"{key}: {where} gives {fields[key]!r} but {part.owner} gives {value!r}; give it once",
                              where=where)
    for key in ("metric", "mode"):
        value = getattr(part, key)
        if value is None:
            continue
        if fields.get(key) is not None and fields[key] != value:
            first = owners.get(key, where)
            raise ConfigError(f"{key}: {first} gives {fields[key]!r} but {part.owner} gives {value!r}; give it once",
                              where=where)
        fields[key] = value
        owners.setdefault(key, part.owner)
    if part.stop:
        fields["stop"] = _with_stop(fields.get("stop"), part.stop)
    if part.concurrency is not None:
        _cap(fields, part.concurrency)
    if part.points:
        from rltune.orchestrator._ray_points import with_points

        fields["search_alg"] = with_points(fields["search_alg"], part.points, fields, where)


def _with_stop(stop: Any, added: dict[str, Any]) -> Any:
    """``stop`` with ``added``'s criteria (the lower value of a key both have); a non-dict stop is left to the spec."""
    if stop is None:
        return dict(added)
    if not isinstance(stop, dict):
        return stop
    merged = dict(stop)
    for key, value in added.items():
        current = merged.get(key)
        ok = isinstance(current, (int, float)) and not isinstance(current, bool)
        merged[key] = min(current, value) if ok else (value if current is None else current)
    return merged


def _cap(fields: dict[str, Any], cap: int) -> None:
    """At most ``cap`` trials at once: ``n_jobs`` (CPUs permitting) and ``max_concurrent``, each the lower."""
    for key in ("n_jobs", "max_concurrent"):
        given = fields.get(key)
        if isinstance(given, int) and not isinstance(given, bool):
            fields[key] = min(given, cap)
    if fields.get("n_jobs") is None and fields.get("max_concurrent") is None:
        fields["n_jobs"] = cap


def _check_sample_from(config: Any) -> None:
    """Compute the config's ``tune.sample_from`` values once (its first values): a broken one fails here."""
    if not isinstance(config, dict) or not has_sample_from(config):
        return
    from rltune.orchestrator._search_space import parse_space, representative_configs

    space, problems = parse_space(config)
    if not problems:
        next(iter(representative_configs(config, space)))
