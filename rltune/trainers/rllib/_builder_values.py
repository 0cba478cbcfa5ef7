"""The values of a config builder: merging later calls into earlier ones, search-space entries, validation.

Helpers of :mod:`rltune.trainers.rllib._config_builder`. Values are nested dicts
with rltune's config-dict keys; a search-space entry (``tune.grid_search``,
``tune.uniform``, ...) is a leaf, never merged into; validation runs the
trainer's typed settings on each value an entry can take.
"""

from __future__ import annotations

from typing import Any, Iterator

from pydantic import BaseModel

from rltune._search_entries import as_entry, entry_candidates
from rltune.errors import UNKNOWN_KEY, ConfigError, Problem
from rltune.trainers.rllib._builder_keys import (
    ALGORITHM_TRAINING_KEYWORDS,
    INSTEAD,
    METHOD_KEYWORDS,
    RLLIB_BUILDER_NAMES,
    SAME_AS_RLTUNE,
)
from rltune.trainers._config import TrainerSettings, validate_config
from rltune.trainers.rllib._rllib_names import translate_config

# Blocks that a later call updates key by key, as RLlib does (a new exploration or replay buffer
# 'type' replaces the block); every other key is replaced whole.
_DEEP_MERGED = frozenset({"env_config", "model", "exploration_config", "replay_buffer_config", "optimizer"})
_KEY_MERGED = frozenset({"multiagent"})
# Every RLlib builder keyword: one that the settings lack is "not supported yet" rather than unknown.
_RLLIB_KEYWORDS = frozenset(
    k for keywords in (*METHOD_KEYWORDS.values(), *ALGORITHM_TRAINING_KEYWORDS.values()) for k in keywords
) | frozenset(RLLIB_BUILDER_NAMES.values())


def put_value(values: dict[str, Any], target: str, value: Any) -> None:
    """Set ``target`` ('key' or 'block.key') in ``values``, merging the blocks RLlib merges."""
    key, _, inner = target.partition(".")
    if inner:
        block = values.get(key)
        block = dict(block) if isinstance(block, dict) and as_entry(block) is None else {}
        block[inner] = value
        values[key] = block
    else:
        values[key] = merged(key, values.get(key), value)


def merged(key: str, old: Any, new: Any) -> Any:
    if not (_is_block(old) and _is_block(new)):
        return new
    if key in _KEY_MERGED:
        return {**old, **new}
    if key in _DEEP_MERGED and not ("type" in new and new.get("type") != old.get("type")):
        return _deep_merge(old, new)
    return new


def _is_block(value: Any) -> bool:
    return isinstance(value, dict) and as_entry(value) is None


def _deep_merge(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    out = dict(old)
    for k, v in new.items():
        out[k] = _deep_merge(out[k], v) if _is_block(out.get(k)) and _is_block(v) else v
    return out


def copy_tree(node: Any) -> Any:
    """A copy of the dicts and lists of a config; other values (classes, functions, specs) are shared."""
    if isinstance(node, dict):
        return {k: copy_tree(v) for k, v in node.items()}
    if isinstance(node, list):
        return [copy_tree(v) for v in node]
    return node


def entries(node: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], tuple[str, Any]]]:
    """Every search-space entry in a nested config, with its key path."""
    entry = as_entry(node)
    if entry is not None and path:
        yield path, entry
    elif isinstance(node, dict):
        for k, v in node.items():
            yield from entries(v, (*path, str(k)))


def _set_path(config: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    """A copy of ``config`` with the dicts along ``path`` copied and the value at ``path`` replaced."""
    out = dict(config)
    if len(path) == 1:
        out[path[0]] = value
    else:
        out[path[0]] = _set_path(out[path[0]], path[1:], value)
    return out


def candidates(config: dict[str, Any]) -> Iterator[tuple[dict[str, Any], Problem | None]]:
    """Configs to validate for one with search-space entries: every entry at its first value, then each
    entry's other values in turn (the orchestrator checks a study's configs the same way). A malformed
    entry yields ``(config, problem)`` once, and is left out of the rest."""
    found = [(path, entry_candidates(*entry), entry) for path, entry in entries(config)]
    base = config
    for path, values, (kind, args) in found:
        if values is None:
            yield config, Problem(path, f"a malformed {kind} entry ({args!r:.60})", f"see rltune.tune.{kind}")
            base = _without(base, path)
        else:
            base = _set_path(base, path, values[0])
    yield base, None
    for path, values, _ in found:
        for value in (values or [])[1:]:
            yield _set_path(base, path, value), None


def _without(config: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    if len(path) == 1:
        return {k: v for k, v in config.items() if k != path[0]}
    return {**config, path[0]: _without(config[path[0]], path[1:])}


def problems_of(settings: type[TrainerSettings], values: dict[str, Any]) -> list[Problem]:
    """Every problem of ``values`` (search-space entries at each of their values), evaluation overrides too."""
    problems: list[Problem] = []

    def add(found: list[Problem]) -> None:
        problems.extend(p for p in found if p not in problems)

    for candidate, problem in candidates(values):
        if problem:
            add([problem])
            continue
        translation = translate_config(candidate, settings)  # RLlib's other names, as Trainer.validate reads them
        try:
            validate_config(settings, translation.config)
        except ConfigError as exc:
            add(translation.problems + translation.name_problems(exc.details))
            continue
        add(translation.problems)
        candidate = translation.config
        overrides = candidate.get("evaluation_config")
        if isinstance(overrides, dict) and overrides:
            try:
                validate_config(settings, {**candidate, **overrides})
            except ConfigError as exc:
                add([p.under("evaluation_config") for p in exc.details if p.path and p.path[0] in overrides])
    # A key named by a clearer problem (an RLlib key rltune lacks, from the name translation) is not also 'unknown'.
    named = {p.path for p in problems if p.kind != UNKNOWN_KEY}
    return [p for p in problems if not (p.kind == UNKNOWN_KEY and p.path in named)]


def explain(problem: Problem, renamed: dict[str, str], given: dict[str, str]) -> Problem:
    """A validation problem in the caller's words: the keyword given, and 'not supported yet' for RLlib keys."""
    if problem.shown is not None:  # already shown as the user wrote it (RLlib's name of a key)
        return problem
    keyword = given.get(".".join(problem.path))
    if keyword in _RLLIB_KEYWORDS and problem.kind == UNKNOWN_KEY:
        return Problem(problem.path, "an RLlib setting rltune does not support yet", INSTEAD.get(keyword, ""),
                       kind="unsupported", shown=keyword)
    for target, keyword in renamed.items():
        key = tuple(target.split("."))
        if problem.path[:len(key)] == key:
            return problem.shown_as(keyword + "".join(f".{k}" for k in problem.path[len(key):]))
    return problem


def settings_keys(settings: type[BaseModel]) -> frozenset[str]:
    """The keys of the settings ('lambda' and 'lambda_' both) and of their blocks ('model.fcnet_hiddens')."""
    keys: set[str] = set()
    for name, field in settings.model_fields.items():
        names = {name, field.alias or name}
        keys |= names
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            for inner, inner_field in annotation.model_fields.items():
                keys |= {f"{n}.{i}" for n in names for i in (inner, inner_field.alias or inner)}
    return frozenset(keys)


def same_as_rltune(keyword: str, value: Any) -> bool:
    try:
        return any(value is v or (type(value) is type(v) and value == v) for v in SAME_AS_RLTUNE.get(keyword, ()))
    except (TypeError, ValueError):
        return False
