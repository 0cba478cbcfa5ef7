"""``points_to_evaluate``: configs checked against the study's search space and run by its first trials.

A point is a dict of config values, nested (``{"model": {"hidden": 64}}``)
or by path (``"model/hidden"``, Ray's flattened form, or ``"model.hidden"``);
its keys must be search-space entries of the config and its values values
those entries can take. Entries a point leaves out are drawn by the sampler.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from rltune.errors import ConfigError
from rltune.orchestrator import _ray_domains as ray_kinds
from rltune.orchestrator._search_space import Categorical, Param, parse_space


def _flat(point: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in point.items():
        name = prefix + str(key).replace("/", ".")
        if isinstance(value, Mapping) and value:
            flat.update(_flat(value, name + "."))
        else:
            flat[name] = value
    return flat


def _raw(p: Param, value: Any) -> Any:
    """Optuna's parameter value of config value ``value`` of entry ``p``; ValueError if ``p`` cannot take it."""
    if p.kind == "choice":
        return Categorical(p.values).encode(value)
    if p.kind in ray_kinds.KINDS:
        return ray_kinds.raw_of(p, value)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{value!r} is not a number")
    top = p.high - 1 if p.kind == "randint" else p.high
    if not p.low <= value <= top or (p.kind == "randint" and not float(value).is_integer()):
        raise ValueError(f"{value!r} is not a value of {p.describe()}")
    return int(value) if p.kind == "randint" else float(value)


def encode_points(config: Any, points: list[dict[str, Any]], where: str) -> list[dict[str, Any]]:
    """The points as Optuna parameters by name; one ConfigError naming every key or value that does not fit."""
    space, _ = parse_space(config if isinstance(config, Mapping) else {})
    by_name = {p.name: p for p in space.params}
    problems, encoded = [], []
    if space.grid:
        raise ConfigError("points_to_evaluate: the config has grid_search entries, whose every value runs anyway; "
                          "use choice entries to evaluate points first", where=where)
    for index, point in enumerate(points):
        raw = {}
        for name, value in _flat(point).items():
            label = f"points_to_evaluate[{index}].{name}"
            p = by_name.get(name)
            if p is None:
                known = ", ".join(by_name) or "none"
                problems.append(f"{label}: not a search-space entry of the config (entries: {known})")
                continue
            try:
                raw[name] = _raw(p, value)
            except ValueError as exc:
                problems.append(f"{label}: {exc}")
        encoded.append(raw)
    if problems:
        raise ConfigError(problems, where=where)
    return encoded


def with_points(search_alg: Any, points: list[dict[str, Any]], fields: dict[str, Any], where: str) -> Any:
    """The study's sampler (a name, ``{type: ...}`` or an instance) wrapped to run ``points`` first."""
    encoded = encode_points(fields.get("config"), points, where)
    from rltune.orchestrator._points_first import PointsFirstSampler

    return PointsFirstSampler(_instance(search_alg, fields.get("seed"), where), encoded)


def _instance(search_alg: Any, seed: Any, where: str) -> Any:
    """An Optuna sampler of ``search_alg`` (seeded by the study's ``seed`` unless its options have one)."""
    if not isinstance(search_alg, (str, dict)):
        return search_alg
    import optuna

    from rltune.orchestrator._spec import SAMPLERS, _choose, _parameters

    try:
        name, options = _choose("search_alg", search_alg, SAMPLERS, "optuna.samplers", "BaseSampler")
    except ConfigError as exc:
        raise ConfigError(exc.problems, where=where) from None
    cls = getattr(optuna.samplers, SAMPLERS[name])
    if "seed" in _parameters(cls) and options.get("seed") is None and isinstance(seed, int):
        options["seed"] = seed
    return cls(**options)
