"""Search-space entries as values (stdlib only): what a config builder and the orchestrator both recognise.

An entry is a :class:`Domain` (``tune.choice([...])``, ``tune.uniform(a, b)``,
...) or its written form, a one-key dict such as ``{"grid_search": [...]}``.
The orchestrator parses entries into a search space
(:mod:`rltune.orchestrator._search_space`); a config builder only needs to
keep them as they are and to validate the values they can take
(:func:`entry_candidates`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

KINDS = ("grid_search", "choice", "uniform", "loguniform", "randint", "quniform",
         "qloguniform", "lograndint", "qrandint", "randn")
ARITY = {"quniform": 3, "qloguniform": 3, "qrandint": 3}  # arguments of a range entry (2 for the others)


@dataclass(frozen=True)
class Domain:
    """A search-space entry written in Python: ``kind`` (one of :data:`KINDS`) and its ``args``."""

    kind: str
    args: tuple[Any, ...]

    def to_yaml(self) -> dict[str, Any]:
        """The entry as it is written in a study file (``{"loguniform": [0.0001, 0.01]}``)."""
        values = self.args[0] if self.kind in ("grid_search", "choice") else self.args
        return {self.kind: list(values)}


def as_entry(value: Any) -> tuple[str, Any] | None:
    """``(kind, args)`` if ``value`` is a search-space entry (a :class:`Domain` or a one-key dict), else None."""
    if isinstance(value, Domain):
        if value.kind in ("grid_search", "choice"):
            return value.kind, value.args[0]
        return value.kind, list(value.args)
    if isinstance(value, Mapping) and len(value) == 1:
        (kind, args), = value.items()
        if kind in KINDS:
            return kind, args
    return None


def entry_candidates(kind: str, args: Any) -> list[Any] | None:
    """Values an entry can take that together exercise a config check (every listed value, or both ends).

    None for an entry whose arguments are malformed (the orchestrator's
    search-space parser says what is wrong with it).
    """
    if not isinstance(args, (list, tuple)) or not args:
        return None
    if kind in ("grid_search", "choice"):
        return list(args)
    if len(args) != ARITY.get(kind, 2):
        return None
    if kind in ("randint", "lograndint", "qrandint"):
        if not all(isinstance(a, int) and not isinstance(a, bool) for a in args):
            return None
        return [args[0], args[1]] if kind == "qrandint" else [args[0], args[1] - 1]
    if kind == "randn":
        if not all(isinstance(a, (int, float)) and not isinstance(a, bool) for a in args):
            return None
        mean, sd = args
        return [mean - 3 * sd, mean + 3 * sd]  # a normal has no ends: three standard deviations
    return [args[0], args[1]]


@dataclass(frozen=True)
class SampleFrom:
    """Ray Tune's ``tune.sample_from(fn)``: a config value computed per trial by ``fn(spec)``.

    ``fn`` gets a ``spec`` whose ``spec.config`` is the trial's config with
    every search-space entry already drawn (``spec.config.lr``,
    ``spec["config"]["lr"]``); values that depend on other ``sample_from``
    values are computed after them.
    """

    func: Any
