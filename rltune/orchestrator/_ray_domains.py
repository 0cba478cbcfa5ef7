"""Ray Tune's other search-space functions: ``qloguniform``, ``lograndint``, ``qrandint``, ``randn``, ``sample_from``.

Each is an entry of :mod:`rltune.orchestrator._search_space` (written in YAML
as ``{qloguniform: [low, high, q]}``, ``{lograndint: [low, high]}``,
``{qrandint: [low, high, q]}``, ``{randn: [mean, sd]}``); this module holds
their Optuna side: the parameter a trial draws and the value it becomes.

- ``qloguniform``: Optuna draws a log-uniform float; the value is it rounded
  to a multiple of ``q`` (as Ray rounds), kept in ``[low, high]``.
- ``lograndint``: an int in ``[low, high)`` drawn log-uniformly (``high``
  excluded, as Ray's ``lograndint``).
- ``qrandint``: an int in ``[low, high]`` in steps of ``q`` (``high``
  included, as Ray's ``qrandint``).
- ``randn``: a normal draw. Optuna has no normal distribution, so it draws
  the quantile ``u`` in ``[U_LOW, U_HIGH]`` (stored as the parameter) and the
  value is ``mean + sd * Phi^-1(u)``: normal up to 4.75 standard deviations,
  and a model-based sampler (TPE, GP) searches ``u`` like any float.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Any, Callable

from rltune._search_entries import Domain, SampleFrom

U_LOW, U_HIGH = 1e-6, 1.0 - 1e-6  # randn's quantile range: +-4.75 standard deviations
INTEGER_KINDS = ("lograndint", "qrandint")
KINDS = ("qloguniform", "lograndint", "qrandint", "randn")


# -- the Python API ---------------------------------------------------------------------------
def qloguniform(low: float, high: float, q: float, base: float = 10) -> Domain:
    """A float drawn log-uniformly from ``[low, high]``, rounded to a multiple of ``q`` (``base`` changes nothing)."""
    return Domain("qloguniform", (low, high, q))


def lograndint(low: int, high: int, base: float = 10) -> Domain:
    """An int from ``low`` (included) to ``high`` (excluded), drawn log-uniformly (``base`` changes nothing)."""
    return Domain("lograndint", (low, high))


def qrandint(low: int, high: int, q: int = 1) -> Domain:
    """An int from ``low`` to ``high`` (both included) in steps of ``q``, as Ray Tune's ``qrandint``."""
    return Domain("qrandint", (low, high, q))


def randn(mean: float = 0.0, sd: float = 1.0) -> Domain:
    """A float drawn from the normal distribution of ``mean`` and standard deviation ``sd``."""
    return Domain("randn", (mean, sd))


def sample_from(func: Callable[[Any], Any]) -> SampleFrom:
    """A value computed per trial by ``func(spec)``; ``spec.config`` is the trial's drawn config (Ray's form)."""
    if not callable(func):
        from rltune.errors import ConfigError

        raise ConfigError(f"needs a function of the trial's spec (lambda spec: spec.config.x), but got {func!r}",
                          where="tune.sample_from")
    return SampleFrom(func)


# -- parsing -----------------------------------------------------------------------------------
RULES = {
    "qloguniform": "needs [low, high, q] with 0 < low < high and q > 0",
    "lograndint": "needs [low, high] of ints with 0 < low < high (high excluded)",
    "qrandint": "needs [low, high, q] of ints with low < high, q >= 1 and high - low a multiple of q",
    "randn": "needs [mean, sd] with sd > 0",
}


def range_problem(kind: str, nums: list[float], args: list[Any]) -> str | None:
    """What is wrong with the (finite) numbers of a ``kind`` entry, or None."""
    if kind == "randn":
        return None if len(nums) == 2 and nums[1] > 0 else RULES[kind]
    low, high = nums[0], nums[1]
    if kind in INTEGER_KINDS:
        if any(isinstance(a, float) and not float(a).is_integer() for a in args):
            return RULES[kind]
        if kind == "lograndint":
            return None if 0 < low < high else RULES[kind]
        q = nums[2]
        return None if low < high and q >= 1 and (high - low) % q == 0 else RULES[kind]
    return None if 0 < low < high and nums[2] > 0 else RULES[kind]


# -- Optuna ---------------------------------------------------------------------------------
def distribution(p: Any) -> Any:
    """The Optuna distribution of entry ``p`` (a parsed ``Param``)."""
    from optuna.distributions import FloatDistribution, IntDistribution

    if p.kind == "qloguniform":
        return FloatDistribution(p.low, p.high, log=True)
    if p.kind == "lograndint":
        return IntDistribution(int(p.low), int(p.high) - 1, log=True)
    if p.kind == "qrandint":
        return IntDistribution(int(p.low), int(p.high), step=int(p.q))
    return FloatDistribution(U_LOW, U_HIGH)


def suggest(trial: Any, p: Any) -> Any:
    """Draw ``p`` with ``trial``; its value."""
    return value_of(p, _suggest(trial, p))


def _suggest(trial: Any, p: Any) -> Any:
    if p.kind == "qloguniform":
        return trial.suggest_float(p.name, p.low, p.high, log=True)
    if p.kind == "lograndint":
        return trial.suggest_int(p.name, int(p.low), int(p.high) - 1, log=True)
    if p.kind == "qrandint":
        return trial.suggest_int(p.name, int(p.low), int(p.high), step=int(p.q))
    return trial.suggest_float(p.name, U_LOW, U_HIGH)


def value_of(p: Any, raw: Any) -> Any:
    """The config value of Optuna's stored parameter ``raw``."""
    if p.kind == "qloguniform":
        return quantize(raw, p.q, p.low, p.high)
    if p.kind == "randn":
        return p.low + p.high * NormalDist().inv_cdf(min(max(raw, U_LOW), U_HIGH))  # low: the mean, high: the sd
    return int(raw)


def raw_of(p: Any, value: Any) -> Any:
    """Optuna's parameter for config value ``value`` (a point to evaluate); ValueError if ``p`` cannot take it."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{value!r} is not a number")
    if p.kind == "randn":
        u = NormalDist().cdf((value - p.low) / p.high)
        if not U_LOW <= u <= U_HIGH:
            raise ValueError(f"{value!r} is more than 4.75 standard deviations from the mean {p.low:g}")
        return u
    if p.kind in INTEGER_KINDS:
        top = p.high - 1 if p.kind == "lograndint" else p.high
        step = p.q if p.kind == "qrandint" else 1
        if not float(value).is_integer() or not p.low <= value <= top or (value - p.low) % step:
            raise ValueError(f"{value!r} is not a value of {describe(p)}")
        return int(value)
    if not p.low <= value <= p.high:
        raise ValueError(f"{value!r} is not within {describe(p)}")
    return float(value)


def quantize(value: float, q: float, low: float, high: float) -> float:
    """``value`` rounded to a multiple of ``q`` (Ray's rounding), kept within ``[low, high]``."""
    decimals = max(0, -int(math.floor(math.log10(abs(q))))) + 6
    rounded = round(round(value / q) * q, decimals)
    return min(max(rounded, low), high)


def candidates(p: Any) -> list[Any]:
    """Values to validate a trainer config with: both ends (three standard deviations for randn)."""
    if p.kind == "randn":
        return [p.low - 3 * p.high, p.low + 3 * p.high]
    if p.kind == "qloguniform":
        return [quantize(p.low, p.q, p.low, p.high), quantize(p.high, p.q, p.low, p.high)]
    if p.kind == "lograndint":
        return [int(p.low), int(p.high) - 1]
    return [int(p.low), int(p.high)]


def discrete_values(p: Any) -> list[Any] | None:
    """Every value of an int entry; None for a float one."""
    if p.kind == "lograndint":
        return list(range(int(p.low), int(p.high)))
    if p.kind == "qrandint":
        return list(range(int(p.low), int(p.high) + 1, int(p.q)))
    return None


def count(p: Any) -> float:
    """How many values :func:`discrete_values` lists (inf for a float entry)."""
    if p.kind == "lograndint":
        return p.high - p.low
    if p.kind == "qrandint":
        return (p.high - p.low) // p.q + 1
    return math.inf


def describe(p: Any) -> str:
    """The entry as text (``qrandint(0, 12, 3)``), for the stored space signature and messages."""
    args = [p.low, p.high] + ([p.q] if p.q is not None else [])
    return f"{p.kind}({', '.join(f'{a:g}' for a in args)})"
