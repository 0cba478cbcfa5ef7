"""Search spaces: Ray Tune's entries (grid_search, choice, uniform, ...) anywhere in a config, drawn by Optuna.

A config is a nested dict whose leaves may be search-space entries, written
in Python (``tune.loguniform(1e-4, 1e-2)``) or in YAML
(``lr: {loguniform: [1.0e-4, 1.0e-2]}``). :func:`parse_space` finds them and
names each by its dotted path (``model.fcnet_hiddens``), which is also its
Optuna parameter name. A list of dicts (a ``curriculum:`` block's phases) is
walked too, its items named by index (``curriculum.phases.0.threshold``).

Semantics (as in Ray Tune):

- ``grid_search: [a, b, ...]``: every value is run; several grid entries form
  a cartesian product, and each grid point runs ``num_samples`` times.
- ``choice: [a, b, ...]``: one of the values (an Optuna categorical).
- ``uniform: [low, high]``, ``loguniform: [low, high]`` (``0 < low``): floats.
- ``randint: [low, high]``: an int in ``[low, high)`` (upper bound excluded, as in Ray).
- ``quniform: [low, high, q]``: a float in ``[low, high]`` on the grid ``low + k * q``.

Optuna's categorical values must be JSON scalars (None, bool, int, float,
str); a choice of lists or dicts (``[[64, 64], [256, 256]]``) is stored as
the JSON text of each value and mapped back when the config is built
(:class:`Categorical` keeps the mapping).

Invariants: :func:`parse_space` collects every problem, each named by its
path (``config.lr.loguniform: ...``); :func:`resolve_config` returns a new
config and never mutates the one given.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import itertools
import json
import math
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping, Sequence

from rltune._search_entries import ARITY, KINDS, Domain, as_entry
from rltune.orchestrator import _ray_domains as ray_kinds
from rltune.orchestrator._sample_from import resolve_sample_from

GRID_LIMIT = 100_000  # values of one discrete entry expanded for search_alg grid
CONTINUOUS = ("uniform", "loguniform", "qloguniform", "randn")  # entries search_alg grid cannot list


# -- the Python API's entries (tune.choice(...) etc.) ----------------------------------------
def grid_search(values: Sequence[Any]) -> dict[str, list[Any]]:
    """Run every value (a cartesian product with the other grid entries); Ray's ``{"grid_search": [...]}``."""
    return {"grid_search": list(values)}


def choice(categories: Sequence[Any]) -> Domain:
    """One of ``categories`` (any values: numbers, strings, lists such as layer sizes)."""
    return Domain("choice", (list(categories),))


def uniform(low: float, high: float) -> Domain:
    """A float drawn uniformly from ``[low, high]``."""
    return Domain("uniform", (low, high))


def loguniform(low: float, high: float) -> Domain:
    """A float drawn log-uniformly from ``[low, high]`` (``0 < low < high``)."""
    return Domain("loguniform", (low, high))


def randint(low: int, high: int) -> Domain:
    """An int from ``low`` (included) to ``high`` (excluded), as in Ray Tune."""
    return Domain("randint", (low, high))


def quniform(low: float, high: float, q: float) -> Domain:
    """A float from ``[low, high]`` in steps of ``q`` (``low, low + q, ...``)."""
    return Domain("quniform", (low, high, q))


# -- parsed entries ---------------------------------------------------------------------------
@dataclass
class Param:
    """One search-space entry at ``path`` (a tuple of config keys); ``name`` is its Optuna parameter name."""

    path: tuple[str, ...]
    kind: str
    low: float | None = None
    high: float | None = None
    q: float | None = None
    values: list[Any] = field(default_factory=list)  # grid_search / choice

    @property
    def name(self) -> str:
        return ".".join(self.path)

    @property
    def is_grid(self) -> bool:
        return self.kind == "grid_search"

    def count(self) -> float:
        """How many values :meth:`discrete_values` has (inf for a continuous entry), without listing them."""
        if self.kind in ray_kinds.KINDS:
            return ray_kinds.count(self)
        if self.kind in ("grid_search", "choice"):
            return len(self.values)
        if self.kind == "randint":
            return self.high - self.low
        if self.kind == "quniform":
            steps = (self.high - self.low) / self.q + 1e-9
            return math.floor(steps) + 1 if math.isfinite(steps) else math.inf
        return math.inf

    def discrete_values(self) -> list[Any] | None:
        """Every value this entry can take, or None for a continuous one (uniform, loguniform)."""
        if self.kind in ray_kinds.KINDS:
            return ray_kinds.discrete_values(self)
        if self.kind in ("grid_search", "choice"):
            return list(self.values)
        if self.kind == "randint":
            return list(range(int(self.low), int(self.high)))
        if self.kind == "quniform":
            n = int(math.floor((self.high - self.low) / self.q + 1e-9))
            return [_round_step(self.low + k * self.q, self.q) for k in range(n + 1)]
        return None

    def describe(self) -> str:
        if self.kind in ("grid_search", "choice"):
            return f"{self.kind}({_short(self.values)})"
        if self.kind in ray_kinds.KINDS:
            return ray_kinds.describe(self)
        args = [self.low, self.high] + ([self.q] if self.kind == "quniform" else [])
        return f"{self.kind}({', '.join(f'{a:g}' for a in args)})"


@dataclass
class SearchSpace:
    """Every search-space entry of a config, in the config's order."""

    params: list[Param]
    invalid: list[tuple[str, ...]] = field(default_factory=list)  # paths of entries that did not parse

    @property
    def grid(self) -> list[Param]:
        return [p for p in self.params if p.is_grid]

    @property
    def sampled(self) -> list[Param]:
        return [p for p in self.params if not p.is_grid]

    def grid_points(self) -> list[dict[str, Any]]:
        """The cartesian product of the grid entries as ``{name: value}`` (one empty point without grid)."""
        grid = self.grid
        return [dict(zip((p.name for p in grid), combo)) for combo in itertools.product(*(p.values for p in grid))]

    def __bool__(self) -> bool:
        return bool(self.params)


class Categorical:
    """Optuna-safe encoding of a list of arbitrary values (scalars pass through; others as JSON text)."""

    def __init__(self, values: Sequence[Any]) -> None:
        self.values = list(values)
        if all(_is_scalar(v) for v in self.values) and len({_key(v) for v in self.values}) == len(self.values):
            self.encoded = list(self.values)
        else:
            encoded = [_encode(v) for v in self.values]
            if len(set(encoded)) != len(encoded):
                encoded = [f"{i}: {e}" for i, e in enumerate(encoded)]
            self.encoded = encoded

    def encode(self, value: Any) -> Any:
        for v, e in zip(self.values, self.encoded):
            if _key(v) == _key(value):
                return e
        raise ValueError(f"{value!r} is not one of {self.values!r}")

    def decode(self, encoded: Any) -> Any:
        for v, e in zip(self.values, self.encoded):
            if _key(e) == _key(encoded):
                return copy.deepcopy(v)
        raise ValueError(f"{encoded!r} is not one of the encoded values {self.encoded!r}")


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, (bool, int, float, str))


def _key(value: Any) -> tuple[str, str]:
    """Equality that tells 1 from True and 1.0 (Optuna keeps the type)."""
    return (type(value).__name__, _encode(value))


def _encode(value: Any) -> str:
    try:
        return json.dumps(value, sort_keys=True)
    except (TypeError, ValueError):
        return repr(value)


def _round_step(value: float, q: float) -> float:
    decimals = max(0, -int(math.floor(math.log10(abs(q))))) + 6 if q else 6
    return round(value, decimals)


def _short(values: Sequence[Any], limit: int = 40) -> str:
    text = ", ".join(_encode(v) for v in values)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# -- parsing ----------------------------------------------------------------------------------
def parse_space(config: Mapping[str, Any], *, where: str = "config") -> tuple[SearchSpace, list[str]]:
    """Find every search-space entry in ``config``; return them and the problems found (``where.path.kind: ...``)."""
    params: list[Param] = []
    problems: list[str] = []
    invalid: list[tuple[str, ...]] = []
    for path, value in _walk(config, ()):
        entry = as_entry(value)
        label = ".".join((where, *path))
        if entry is None:
            hint = _typo_hint(value)
            if hint:
                problems.append(f"{label}.{hint[0]}: unknown search-space entry; did you mean {hint[1]!r}? "
                                f"(entries: {', '.join(KINDS)})")
                invalid.append(path)
            hidden = _hidden_entry(value, "")
            if hidden is not None:
                problems.append(f"{label}{hidden[0]}: a search-space entry inside {hidden[1]} is not searched "
                                "(entries are found in nested dicts and lists of dicts); write the value as nested dicts")
                invalid.append(path)
            continue
        kind, args = entry
        param, problem = _parse_entry(path, kind, args)
        if problem:
            problems.append(f"{label}.{kind}: {problem}")
            invalid.append(path)
        else:
            params.append(param)
    return SearchSpace(params, invalid), problems


def _walk(node: Any, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Leaves and search-space entries of a nested config, with their key paths."""
    if as_entry(node) is not None or _typo_hint(node):
        yield path, node
    elif isinstance(node, Mapping):
        for key, value in node.items():
            yield from _walk(value, (*path, str(key)))
    elif _dict_list(node):
        for i, value in enumerate(node):
            yield from _walk(value, (*path, str(i)))
    elif path:
        yield path, node


def _dict_list(node: Any) -> bool:
    """Whether ``node`` is a list the walker descends into: dicts only, none a search-space entry (curriculum phases)."""
    return (isinstance(node, list) and bool(node)
            and all(isinstance(v, Mapping) and as_entry(v) is None and not _typo_hint(v) for v in node))


def _key_in(node: Any, key: str) -> Any:
    """``key`` as ``node`` indexes it: an int for a list of dicts."""
    return int(key) if isinstance(node, list) else key


def _hidden_entry(value: Any, where: str, container: str = "") -> tuple[str, str] | None:
    """``(where, container)`` of a search-space entry inside a list, tuple or dataclass of a config leaf, or None.

    The walker does not descend into these, so such an entry would reach the
    trainable as it is (e.g. a ``PolicySpec(config={"lr": tune.loguniform(...)})``
    given to a function trainable, or ``[tune.choice(...), 64]``). The
    container named is the outermost one the walker stopped at.
    """
    if isinstance(value, Mapping):
        items: Iterator[tuple[Any, Any]] = iter(value.items())
    elif isinstance(value, (list, tuple)):
        items = enumerate(value)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        items = ((f.name, getattr(value, f.name)) for f in dataclasses.fields(value))
    else:
        return None
    container = container or f"a {type(value).__name__}"
    for key, inner in items:
        if as_entry(inner) is not None:
            return f"{where}.{key}", container
        found = _hidden_entry(inner, f"{where}.{key}", container)
        if found is not None:
            return found
    return None


def _typo_hint(value: Any) -> tuple[str, str] | None:
    """(key, closest kind) for a one-key dict whose key looks like a misspelt entry (``loguniformm``)."""
    if isinstance(value, Mapping) and len(value) == 1:
        key = str(next(iter(value)))
        if key not in KINDS:
            close = difflib.get_close_matches(key.lower(), KINDS, n=1, cutoff=0.8)
            if close:
                return key, close[0]
    return None


def _number(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        try:
            import numpy as np  # numpy scalars from user code

            if isinstance(x, np.generic) and not isinstance(x, np.bool_):
                return float(x)
        except ImportError:
            pass
        return None
    return float(x) if math.isfinite(float(x)) else None


def _parse_entry(path: tuple[str, ...], kind: str, args: Any) -> tuple[Param | None, str | None]:
    if kind in ("grid_search", "choice"):
        if not isinstance(args, (list, tuple)) or not args:
            return None, f"needs a non-empty list of values, but got {args!r}"
        return Param(path, kind, values=list(args)), None
    if not isinstance(args, (list, tuple)):
        return None, _range_rule(kind) + f", but got {args!r}"
    nums = [_number(a) for a in args]
    if len(args) != ARITY.get(kind, 2) or any(n is None for n in nums):
        return None, _range_rule(kind) + f", but got {list(args)!r}"
    low, high = nums[0], nums[1]
    if kind in ray_kinds.KINDS:
        rule = ray_kinds.range_problem(kind, nums, list(args))
        if rule:
            return None, f"{rule}, but got {list(args)!r}"
        return Param(path, kind, low=low, high=high, q=nums[2] if len(nums) == 3 else None), None
    if kind == "loguniform" and not (0 < low < high):
        return None, _range_rule(kind) + f", but got {list(args)!r}"
    if not low < high:
        return None, _range_rule(kind) + f", but got {list(args)!r}"
    if not math.isfinite(high - low):
        return None, f"the range {list(args)!r} is too wide to draw from (high - low overflows)"
    if kind == "randint":
        if any(isinstance(a, float) and not float(a).is_integer() for a in args):
            return None, _range_rule(kind) + f", but got {list(args)!r}"
        return Param(path, kind, low=int(low), high=int(high)), None
    if kind == "quniform":
        q = nums[2]
        if not q > 0:
            return None, _range_rule(kind) + f", but got {list(args)!r}"
        if q > high - low:
            return None, f"the step q={q:g} is larger than high - low = {high - low:g}"
        return Param(path, kind, low=low, high=high, q=q), None
    return Param(path, kind, low=low, high=high), None


def _range_rule(kind: str) -> str:
    return ray_kinds.RULES.get(kind) or {
        "uniform": "needs [low, high] with low < high",
        "loguniform": "needs [low, high] with 0 < low < high",
        "randint": "needs [low, high] of ints with low < high (high excluded)",
        "quniform": "needs [low, high, q] with low < high and q > 0",
    }[kind]


def gridify(space: SearchSpace, *, where: str = "config") -> tuple[SearchSpace, list[str]]:
    """For ``search_alg: grid``: every discrete entry becomes a grid entry; continuous ones are problems."""
    params, problems = [], []
    for p in space.params:
        if p.is_grid:
            params.append(p)
            continue
        if p.kind in CONTINUOUS:
            problems.append(
                f"{where}.{p.name}.{p.kind}: search_alg grid runs a finite grid and cannot search a continuous "
                f"range; use grid_search or choice, or another search_alg (random, tpe, gp, cmaes)"
            )
        elif p.count() > GRID_LIMIT:  # counted first: a randint of 10**30 values is never listed
            problems.append(f"{where}.{p.name}.{p.kind}: {p.count():,} values are too many for search_alg grid")
        else:
            params.append(Param(p.path, "grid_search", values=p.discrete_values()))
    return SearchSpace(params), problems


# -- drawing values with Optuna -----------------------------------------------------------------
def suggest(trial: Any, space: SearchSpace) -> dict[str, Any]:
    """Draw (or read, for an enqueued trial) every entry with ``trial.suggest_*``; ``{name: value}`` decoded."""
    values: dict[str, Any] = {}
    for p in space.params:
        if p.kind in ("grid_search", "choice"):
            cat = Categorical(p.values)
            values[p.name] = cat.decode(trial.suggest_categorical(p.name, cat.encoded))
        elif p.kind == "uniform":
            values[p.name] = trial.suggest_float(p.name, p.low, p.high)
        elif p.kind == "loguniform":
            values[p.name] = trial.suggest_float(p.name, p.low, p.high, log=True)
        elif p.kind == "randint":
            values[p.name] = trial.suggest_int(p.name, int(p.low), int(p.high) - 1)
        elif p.kind == "quniform":
            values[p.name] = _round_step(trial.suggest_float(p.name, p.low, p.high, step=p.q), p.q)
        else:
            values[p.name] = ray_kinds.suggest(trial, p)
    return values


def distribution(p: Param) -> Any:
    """The Optuna distribution that :func:`suggest` uses for ``p``."""
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    if p.kind in ("grid_search", "choice"):
        return CategoricalDistribution(Categorical(p.values).encoded)
    if p.kind == "uniform":
        return FloatDistribution(p.low, p.high)
    if p.kind == "loguniform":
        return FloatDistribution(p.low, p.high, log=True)
    if p.kind == "randint":
        return IntDistribution(int(p.low), int(p.high) - 1)
    if p.kind in ray_kinds.KINDS:
        return ray_kinds.distribution(p)
    return FloatDistribution(p.low, p.high, step=p.q)


def decode_params(space: SearchSpace, params: Mapping[str, Any]) -> dict[str, Any]:
    """The values of an Optuna trial's stored ``params`` (categorical ones decoded)."""
    values = {}
    for p in space.params:
        if p.name not in params:
            continue
        raw = params[p.name]
        if p.kind in ("grid_search", "choice"):
            values[p.name] = Categorical(p.values).decode(raw)
        elif p.kind == "quniform":
            values[p.name] = _round_step(raw, p.q)
        elif p.kind in ray_kinds.KINDS:
            values[p.name] = ray_kinds.value_of(p, raw)
        else:
            values[p.name] = raw
    return values


def encode_point(space: SearchSpace, point: Mapping[str, Any]) -> dict[str, Any]:
    """A grid point ``{name: value}`` in Optuna's stored form (for ``study.enqueue_trial``)."""
    by_name = {p.name: p for p in space.params}
    return {name: Categorical(by_name[name].values).encode(value) for name, value in point.items()}


def resolve_config(config: Mapping[str, Any], space: SearchSpace, values: Mapping[str, Any],
                   drawn: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A copy of ``config`` with each entry at ``param.path`` replaced by ``values[param.name]``.

    Then each ``tune.sample_from`` value is computed from that config, or,
    given ``drawn`` (the config a trial already ran with), taken from it.
    """
    resolved = _copy_tree(config)
    for p in space.params:
        if p.name not in values:
            continue
        node = resolved
        for key in p.path[:-1]:
            node = node[_key_in(node, key)]
        node[_key_in(node, p.path[-1])] = copy.deepcopy(values[p.name])
    return resolve_sample_from(resolved, drawn)


def without_paths(config: Mapping[str, Any], paths: list[tuple[str, ...]]) -> dict[str, Any]:
    """A copy of ``config`` without the keys at ``paths`` (to validate the rest of a config with bad entries)."""
    pruned = _copy_tree(config)
    for path in paths:
        node = pruned
        for key in path[:-1]:
            node = node.get(key) if isinstance(node, dict) else node[int(key)] if isinstance(node, list) else None
        if isinstance(node, dict):
            node.pop(path[-1], None)
    return pruned


def _copy_tree(node: Any) -> Any:
    """Copy the dicts of a config (leaves are shared: classes and functions are not copied)."""
    if isinstance(node, Mapping) and as_entry(node) is None:
        return {k: _copy_tree(v) for k, v in node.items()}
    return [_copy_tree(v) for v in node] if _dict_list(node) else node


def representative_configs(config: Mapping[str, Any], space: SearchSpace) -> Iterator[tuple[str | None, dict[str, Any]]]:
    """Configs to validate before a study starts: each entry's extreme values, one entry at a time.

    Yields ``(param name or None, config)``; the first config takes every
    entry's first value.
    """
    first = {p.name: _candidates(p)[0] for p in space.params}
    yield None, resolve_config(config, space, first)
    for p in space.params:
        for value in _candidates(p)[1:]:
            yield p.name, resolve_config(config, space, {**first, p.name: value})


def _candidates(p: Param) -> list[Any]:
    if p.kind in ray_kinds.KINDS:
        return ray_kinds.candidates(p)
    if p.kind in ("grid_search", "choice"):
        return list(p.values)
    if p.kind == "randint":
        return [int(p.low), int(p.high) - 1]
    return [p.low, p.high]
