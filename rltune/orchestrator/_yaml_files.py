"""Reading the YAML files users write (train files, study files): one mapping, errors with file and line."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from rltune.errors import ConfigError


MAX_EXPANDED_NODES = 100_000  # values of a file once its aliases are expanded: far above any real study


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader, reading ``1e5`` and ``3e-4`` as numbers (as YAML 1.2, JSON and RLlib's files do).

    PyYAML follows YAML 1.1, where a float needs a dot: ``1e5`` would be the
    string "1e5", and ``lr_schedule: [[0, 1e-3], [1e5, 0]]`` a type error.

    It also refuses a key given twice in one mapping (PyYAML keeps the last
    silently), and a document whose aliases (``*name``) expand to more than
    :data:`MAX_EXPANDED_NODES` values or refer to themselves: PyYAML shares
    an aliased object, but everything after it (validation, copies, JSON)
    walks the expanded tree, so a 1 KB "billion laughs" file would hang.
    """

    def get_single_node(self) -> yaml.Node | None:
        node = super().get_single_node()
        if node is not None:
            _check_expansion(node)
        return node

    def construct_mapping(self, node: yaml.Node, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, yaml.MappingNode):
            _check_duplicate_keys(node)
        return super().construct_mapping(node, deep=deep)


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"), list("-+0123456789")
)


def _check_duplicate_keys(node: yaml.MappingNode) -> None:
    """Raise for a scalar key written twice in one mapping, naming both lines (merge keys ``<<`` excepted)."""
    seen: dict[tuple[str, str], int] = {}
    for key_node, _ in node.value:
        if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = (key_node.tag, key_node.value)
        line = key_node.start_mark.line + 1
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key_node.value!r} (first at line {seen[key]}, again at line {line}); "
                "give each key once", key_node.start_mark)
        seen[key] = line


def _check_expansion(root: yaml.Node) -> None:
    """Raise if the node tree, aliases expanded, has more than MAX_EXPANDED_NODES nodes or a cycle.

    Sizes are memoized per node (an alias is the same node object), so this
    takes time linear in the file, not in the expansion; iterative, so a
    deeply nested file cannot exhaust the stack here.
    """
    size: dict[int, int] = {}
    active: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        children = _children(node)
        if done:
            active.discard(id(node))
            total = 1 + sum(size[id(c)] for c in children)
            if total > MAX_EXPANDED_NODES:
                raise yaml.composer.ComposerError(
                    None, None, f"its aliases (*name) expand it to more than {MAX_EXPANDED_NODES:,} values; "
                    "write the values out, or use fewer nested aliases", node.start_mark)
            size[id(node)] = total
            continue
        if id(node) in size:
            continue
        if id(node) in active:
            raise yaml.composer.ComposerError(None, None, "an alias (*name) refers to the value that contains it",
                                              node.start_mark)
        active.add(id(node))
        stack.append((node, True))
        stack.extend((c, False) for c in children if id(c) not in size)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


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
    except RecursionError:
        raise ConfigError("not valid YAML: nested too deeply", where=where) from None
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
        elif isinstance(node, yaml.SequenceNode) and str(part).isdigit() and int(part) < len(node.value):
            node = node.value[int(part)]
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
