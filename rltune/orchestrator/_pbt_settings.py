"""PBT's settings (``scheduler: {type: pbt, ...}``) and its explore step: pure, no storage, no process.

A study file::

    scheduler:
      type: pbt
      perturbation_interval: 4          # training iterations between a member's perturbations
      hyperparam_mutations:
        lr: {loguniform: [1.0e-5, 1.0e-2]}   # an entry: resampled, or perturbed by 0.8 / 1.2 (kept in range)
        lambda: [0.9, 0.95, 0.99, 1.0]        # a list: resampled, or moved to a neighbouring value
      quantile_fraction: 0.25            # bottom quarter exploits the top quarter
      resample_probability: 0.25
      custom_explore_fn: my_pkg.pbt:explore   # optional: fn(config) -> config, after the built-in explore

The names and rules are Ray Tune's ``PopulationBasedTraining``'s, with two
differences written down in docs/pbt.md: time is counted in
``training_iteration`` (Optuna's step), and a perturbed value of a range entry
(``uniform``, ``loguniform``, ``randint``, ``quniform``) is kept in its range,
so a perturbed ``lambda`` never leaves [0, 1]. A mutation key missing from the
config is drawn from its mutation for the first config (:func:`with_mutations`).
"""

from __future__ import annotations

import copy
import math
import random
from typing import Any, Callable, Literal, Optional

from pydantic import Field, ValidationError

from rltune._imports import import_object
from rltune._search_entries import as_entry
from rltune._validation import UserInput
from rltune.errors import ConfigError

PBT_TYPES = ("pbt", "pb2")


class PBTSettings(UserInput):
    """Every field of ``scheduler: {type: pbt, ...}`` (Ray Tune's PopulationBasedTraining arguments)."""

    model_config = UserInput.model_config | {"arbitrary_types_allowed": True}

    type: Literal["pbt", "pb2"] = "pbt"
    time_attr: Literal["training_iteration"] = Field(
        "training_iteration", description="The time of perturbation_interval: training iterations (Optuna's step).")
    perturbation_interval: int = Field(4, ge=1, description="Iterations between two perturbations of a member.")
    burn_in_period: int = Field(0, ge=0, description="No perturbation before this many iterations.")
    hyperparam_mutations: dict[str, Any] = Field(
        default_factory=dict, description="Config key -> search entry, list of values, or fn() -> value (nested dicts "
                                          "for nested keys).")
    quantile_fraction: float = Field(0.25, ge=0.0, le=0.5, description="Fraction of the population at each end.")
    resample_probability: float = Field(0.25, ge=0.0, le=1.0, description="Resample rather than perturb.")
    perturbation_factors: tuple[float, float] = Field((1.2, 0.8), description="Factors a numeric value is scaled by.")
    custom_explore_fn: Any = Field(None, description="fn(config) -> config after explore ('pkg.module:fn' in YAML).")
    hyperparam_bounds: dict[str, tuple[float, float]] = Field(
        default_factory=dict, description="PB2: config key -> [low, high], searched by a GP bandit (top-level keys).")
    synch: bool = Field(False, description="Synchronous PBT: a member at an interval waits until every running "
                                           "member has reached it, and is ranked among their scores there.")
    log_config: bool = Field(True, description="Ray's flag; rltune always records the schedule.")
    require_attrs: bool = Field(True, description="Ray's flag; rltune always requires time_attr and metric.")
    seed: Optional[int] = Field(None, description="The explore step's random seed (default: the study's).")


def is_pbt(value: Any) -> bool:
    """Whether a study's ``scheduler`` value asks for PBT (``pbt`` or ``{type: pbt, ...}``)."""
    kind = value.get("type") if isinstance(value, dict) else value
    return isinstance(kind, str) and kind.lower() in PBT_TYPES


def parse_pbt(value: Any, config: dict[str, Any], trainable: Any = None) -> tuple[PBTSettings | None, dict[str, Any], list[str]]:
    """The PBT settings of ``scheduler: value``, the config with missing mutation keys as search entries, problems.

    Problems are ``scheduler.<field>: ...`` lines. ``value`` not PBT: (None, config, []).
    ``trainable`` (the study's, when known) must be a trainer: a function
    trainable cannot restore another trial's checkpoint in its process.
    """
    if not is_pbt(value):
        return None, config, []
    if trainable is not None and trainable.kind != "trainer":
        return None, config, ["scheduler: PBT runs trainer trainables (PPO, DQN, a Trainer class): a function "
                              "trainable cannot take another trial's checkpoint while it runs"]
    kind = (value if isinstance(value, str) else value["type"]).lower()
    fields = {"type": kind} if isinstance(value, str) else {**value, "type": kind}
    try:
        settings = PBTSettings(**fields)
    except ValidationError as exc:
        return None, config, [f"scheduler.{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()]
    if settings.type == "pb2":
        problems = _bounds_problems(settings)
        settings.hyperparam_mutations = {k: {"uniform": list(b)} for k, b in settings.hyperparam_bounds.items()}
        if problems:
            return None, config, problems
    problems = _mutation_problems(settings.hyperparam_mutations, "scheduler.hyperparam_mutations")
    if not settings.hyperparam_mutations and settings.custom_explore_fn is None:
        problems.append("scheduler.hyperparam_mutations: give at least one hyperparameter to mutate "
                        "(or a custom_explore_fn)")
    if isinstance(settings.custom_explore_fn, str):
        try:
            settings.custom_explore_fn = import_object(settings.custom_explore_fn, "scheduler.custom_explore_fn")
        except ConfigError as exc:
            problems.extend(f"scheduler.custom_explore_fn: {p}" for p in exc.problems)
    elif settings.custom_explore_fn is not None and not callable(settings.custom_explore_fn):
        problems.append(f"scheduler.custom_explore_fn: must be a function fn(config) -> config or 'pkg.module:fn', "
                        f"but got {settings.custom_explore_fn!r}")
    if problems:
        return None, config, problems
    return settings, with_mutations(config, settings.hyperparam_mutations), []


def _bounds_problems(settings: PBTSettings) -> list[str]:
    if settings.hyperparam_mutations:
        return ["scheduler.hyperparam_mutations: PB2 searches hyperparam_bounds ({lr: [low, high]}), not mutations"]
    if not settings.hyperparam_bounds:
        return ["scheduler.hyperparam_bounds: give at least one hyperparameter's [low, high] to search"]
    return [f"scheduler.hyperparam_bounds.{key}: needs [low, high] with low < high, but got {list(bounds)!r}"
            for key, bounds in settings.hyperparam_bounds.items() if not bounds[0] < bounds[1]]


def _mutation_problems(mutations: Any, where: str) -> list[str]:
    problems: list[str] = []
    if not isinstance(mutations, dict):
        return [f"{where}: must be a mapping of config keys to search entries or lists, but got {mutations!r}"]
    for key, spec in mutations.items():
        if isinstance(spec, dict) and as_entry(spec) is None:
            problems.extend(_mutation_problems(spec, f"{where}.{key}"))
        elif isinstance(spec, (list, tuple)):
            if not spec:
                problems.append(f"{where}.{key}: needs a non-empty list of values")
        elif as_entry(spec) is not None:
            kind, args = as_entry(spec)
            if kind not in ("choice", "grid_search", "uniform", "loguniform", "randint", "quniform"):
                problems.append(f"{where}.{key}.{kind}: PBT resamples choice, uniform, loguniform, randint and "
                                "quniform entries; write the values as a list or give a function")
            elif kind not in ("choice", "grid_search") and not _range_ok(kind, args):
                problems.append(f"{where}.{key}.{kind}: needs [low, high] with low < high (0 < low for loguniform)")
        elif not callable(spec):
            problems.append(f"{where}.{key}: must be a search entry ({{uniform: [a, b]}}, ...), a list of values or "
                            f"a function, but got {spec!r}")
    return problems


def _range_ok(kind: str, args: Any) -> bool:
    if not isinstance(args, (list, tuple)) or len(args) < 2:
        return False
    low, high = args[0], args[1]
    numbers = all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in (low, high))
    return numbers and low < high and (kind != "loguniform" or low > 0)


def with_mutations(config: dict[str, Any], mutations: dict[str, Any]) -> dict[str, Any]:
    """``config`` with each mutation key it lacks set to the mutation as a search entry (lists as ``choice``).

    A function mutation becomes a ``sample_from`` entry, called once per trial.
    """
    out = dict(config)
    for key, spec in mutations.items():
        if isinstance(spec, dict) and as_entry(spec) is None:
            out[key] = with_mutations(out.get(key) if isinstance(out.get(key), dict) else {}, spec)
        elif key not in out:
            if isinstance(spec, (list, tuple)):
                out[key] = {"choice": list(spec)}
            elif callable(spec) and as_entry(spec) is None:
                from rltune.orchestrator._ray_domains import sample_from

                out[key] = sample_from(lambda _spec, fn=spec: fn())
            else:
                out[key] = spec
    return out


def explore(config: dict[str, Any], settings: PBTSettings, rng: random.Random) -> tuple[dict[str, Any], dict[str, Any]]:
    """A new config from ``config`` (the exploited trial's) and the values it changed (``a.b`` -> value).

    Ray's rules: with probability ``resample_probability`` (or when the
    current value is not one it can perturb) a mutation is resampled; else a
    list moves one step left or right and a number is scaled by one of
    ``perturbation_factors`` (an int stays an int; a range entry's value is
    clipped to its range). ``custom_explore_fn`` then gets the new config.
    """
    new = copy.deepcopy(config)
    changed: dict[str, Any] = {}
    _explore_into(new, config, settings.hyperparam_mutations, settings, rng, (), changed)
    if settings.custom_explore_fn is not None:
        new = _custom(settings.custom_explore_fn, new)
        changed = _changed(config, new, "", changed)
    return new, changed


def _explore_into(new: dict[str, Any], old: dict[str, Any], mutations: dict[str, Any], settings: PBTSettings,
                  rng: random.Random, path: tuple[str, ...], changed: dict[str, Any]) -> None:
    for key, spec in mutations.items():
        if isinstance(spec, dict) and as_entry(spec) is None:
            inner_old = old.get(key) if isinstance(old.get(key), dict) else {}
            new[key] = dict(inner_old)
            _explore_into(new[key], inner_old, spec, settings, rng, (*path, key), changed)
            continue
        value = mutate(old.get(key), spec, settings, rng)
        new[key] = value
        changed[".".join((*path, key))] = value


def mutate(current: Any, spec: Any, settings: PBTSettings, rng: random.Random) -> Any:
    """One hyperparameter's next value under ``spec`` (a list, a search entry or a function); see :func:`explore`."""
    resample = rng.random() < settings.resample_probability
    entry = as_entry(spec)
    if isinstance(spec, (list, tuple)) or (entry is not None and entry[0] in ("choice", "grid_search")):
        values = list(spec) if entry is None else list(entry[1])
        if resample or current not in values:
            return rng.choice(values)
        index = values.index(current) + rng.choice((-1, 1))
        return values[min(max(index, 0), len(values) - 1)]
    numeric = isinstance(current, (int, float)) and not isinstance(current, bool)
    if resample or not numeric:
        return spec() if entry is None else draw(entry[0], entry[1], rng)
    value = current * rng.choice(settings.perturbation_factors)
    if entry is not None:
        low, high = float(entry[1][0]), float(entry[1][1])
        value = min(max(value, low), high - 1 if entry[0] == "randint" else high)
    return int(value) if isinstance(current, int) else value


def draw(kind: str, args: Any, rng: random.Random) -> Any:
    """A random value of a range entry ``kind(args)`` (randint's high excluded, as in Ray Tune)."""
    low, high = args[0], args[1]
    if kind == "uniform":
        return rng.uniform(low, high)
    if kind == "loguniform":
        return math.exp(rng.uniform(math.log(low), math.log(high)))
    if kind == "randint":
        return rng.randrange(int(low), int(high))
    q = args[2]  # quniform
    return min(max(round(rng.uniform(low, high) / q) * q, low), high)


def _custom(fn: Callable[[dict[str, Any]], Any], config: dict[str, Any]) -> dict[str, Any]:
    out = fn(config)
    if out is None:  # Ray's custom_explore_fn may change the config in place
        out = config
    if not isinstance(out, dict):
        raise ConfigError(f"scheduler.custom_explore_fn: must return the config (a dict), but returned {out!r}",
                          where="study")
    return out


def _changed(old: dict[str, Any], new: dict[str, Any], prefix: str, out: dict[str, Any]) -> dict[str, Any]:
    """The leaves of ``new`` that differ from ``old``'s, as ``a.b`` keys, added to ``out``."""
    for key, value in new.items():
        before = old.get(key) if isinstance(old, dict) else None
        if isinstance(value, dict) and isinstance(before, dict):
            _changed(before, value, f"{prefix}{key}.", out)
        elif before != value or key not in old:
            out.setdefault(f"{prefix}{key}", value)
    return out


def mutated_values(config: dict[str, Any], mutations: dict[str, Any]) -> dict[str, Any]:
    """The values of ``config`` at the mutation keys (nested as the mutations are): what PBT changes."""
    out: dict[str, Any] = {}
    for key, spec in mutations.items():
        if isinstance(spec, dict) and as_entry(spec) is None:
            out[key] = mutated_values(config.get(key) if isinstance(config.get(key), dict) else {}, spec)
        elif key in config:
            out[key] = config[key]
    return out


def numeric_in_force(config: dict[str, Any], mutations: dict[str, Any], prefix: str = "") -> dict[str, float]:
    """The numeric values of ``config`` at the mutation keys, as ``a.b`` keys (PBT's schedule, one metric each)."""
    out: dict[str, float] = {}
    for key, spec in mutations.items():
        value = config.get(key) if isinstance(config, dict) else None
        if isinstance(spec, dict) and as_entry(spec) is None:
            out.update(numeric_in_force(value if isinstance(value, dict) else {}, spec, f"{prefix}{key}."))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            out[f"{prefix}{key}"] = value
    return out


def nested_keys(flat: dict[str, Any]) -> dict[str, Any]:
    """``{"a.b": v}`` as ``{"a": {"b": v}}`` (explore's changed values as a config to merge)."""
    out: dict[str, Any] = {}
    for key, value in flat.items():
        node = out
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return out
