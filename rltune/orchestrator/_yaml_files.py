"""Reading the YAML files users write (train files, study files): one mapping, errors with file and line."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from rltune.errors import ConfigError


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader, reading ``1e5`` and ``3e-4`` as numbers (as YAML 1.2, JSON and RLlib's files do).

    PyYAML follows YAML 1.1, where a float needs a dot: ``1e5`` would be the
    string "1e5", and ``lr_schedule: [[0, 1e-3], [1e5, 0]]`` a type error.
    """


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"), list("-+0123456789")
)


def read_mapping(path: str | Path, *, kind: str, fields: list[str], required: str) -> tuple[dict[str, Any], yaml.Node]:
    """Parse ``path`` into a dict of fields and its YAML node tree (for line numbers).

    RLlib's tuned-example layout, the fields under one top-level key that
    becomes ``name`` (``cartpole-ppo: {run: PPO, ...}``), is read too.
    ``kind`` ("train file", "study file") and ``required`` name the file and
    what it needs in the messages of the :class:`ConfigError` raised.
    """
    where = f"{kind} {str(path)!r}"
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        raise ConfigError("the file does not exist", where=where) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read it ({exc})", where=where) from None
    try:
        data = yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
        root = yaml.compose(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        raise ConfigError(describe_yaml_error(exc), where=where) from None
    if data is None:
        raise ConfigError(f"the file is empty; it needs at least {required} (fields: {', '.join(fields)})", where=where)
    if not isinstance(data, dict):
        raise ConfigError(
            f"line 1: must be a mapping of fields ({', '.join(fields)}), but got a {type(data).__name__}", where=where
        )
    if len(data) == 1:
        (key, value), = data.items()
        if key not in fields and isinstance(value, dict) and "run" in value:
            data = {"name": str(key), **value}
            root = root.value[0][1]
    return data, root


def describe_yaml_error(exc: yaml.YAMLError) -> str:
    """A YAML syntax error as 'line L, column C: not valid YAML: ...'."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    context = getattr(exc, "context", None)
    text = f"{context}, {problem}" if context else problem
    if mark is None:
        return f"not valid YAML: {text}"
    return f"line {mark.line + 1}, column {mark.column + 1}: not valid YAML: {text}"


def line_of(node: yaml.Node, loc: tuple[Any, ...]) -> int | None:
    """1-based line of the YAML node at ``loc`` (the deepest one found), or None."""
    line = None
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            match = next(((k, v) for k, v in node.value if k.value == str(part)), None)
            if match is None:
                break
            line = match[0].start_mark.line + 1
            node = match[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            break
    return line


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """``base`` updated by ``override``, nested dicts merged key by key."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged
