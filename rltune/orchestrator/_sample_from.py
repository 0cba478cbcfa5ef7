"""``tune.sample_from(fn)`` values of a config, computed per trial from its drawn config (Ray Tune's semantics).

``fn(spec)`` reads the trial's config as ``spec.config.x`` or
``spec["config"]["x"]`` (nested keys alike). A value that reads another
``sample_from`` value is computed after it; a cycle, or an exception in
``fn``, is a :class:`~rltune.errors.ConfigError` naming the key. Values run
in the orchestrator (never in the trial process), so a ``fn`` need not be
picklable; a trial continued after an interruption keeps the values it drew.
"""

from __future__ import annotations

from typing import Any, Iterator, Mapping

from rltune._search_entries import SampleFrom
from rltune.errors import ConfigError


class _Pending(Exception):
    """``fn`` read a value that is itself still to be computed."""


class _Spec(dict):
    """A dict whose keys read as attributes too (``spec.config.lr``), as Ray's resolved spec."""

    def __getattr__(self, key: str) -> Any:
        try:
            return self[key]
        except KeyError:
            raise AttributeError(key) from None

    def __getitem__(self, key: Any) -> Any:
        value = dict.__getitem__(self, key)
        if isinstance(value, SampleFrom):
            raise _Pending(key)
        return value


def _view(node: Any) -> Any:
    """``node`` with its dicts as :class:`_Spec` (read-only use: a function's copy of the config)."""
    if isinstance(node, Mapping) and not isinstance(node, SampleFrom):
        return _Spec({k: _view(v) for k, v in node.items()})
    return node


def _paths(node: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], SampleFrom]]:
    if isinstance(node, SampleFrom):
        yield path, node
    elif isinstance(node, Mapping):
        for key, value in node.items():
            yield from _paths(value, (*path, key))


def has_sample_from(config: Mapping[str, Any]) -> bool:
    """Whether ``config`` holds a ``tune.sample_from`` value (in nested dicts)."""
    return next(_paths(config), None) is not None


def _at(node: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(node, Mapping) or key not in node:
            return _MISSING
        node = node[key]
    return node


_MISSING = object()


def resolve_sample_from(config: dict[str, Any], drawn: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``config`` (changed in place and returned) with every ``sample_from`` value computed, or taken from ``drawn``."""
    pending = list(_paths(config))
    while pending:
        waiting = []
        for path, entry in pending:
            value = _at(drawn, path) if drawn is not None else _MISSING
            if value is _MISSING:
                try:
                    value = entry.func(_Spec(config=_view(config)))
                except _Pending:
                    waiting.append((path, entry))
                    continue
                except Exception as exc:  # the user's function: named, not a traceback from the orchestrator
                    raise ConfigError(f"config.{'.'.join(map(str, path))}: tune.sample_from's function raised "
                                      f"{type(exc).__name__}: {exc}", where="config") from None
            node = config
            for key in path[:-1]:
                node = node[key]
            node[path[-1]] = value
        if len(waiting) == len(pending):
            names = ", ".join("config." + ".".join(map(str, p)) for p, _ in waiting)
            raise ConfigError(f"{names}: tune.sample_from values that read each other (a cycle); compute one "
                              "from the other's inputs instead", where="config")
        pending = waiting
    return config
