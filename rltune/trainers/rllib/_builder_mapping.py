"""A config builder read and written like the config dict it stands for (RLlib 2.x kept the classic dict API on it).

RLlib 2.x's ``PPO.get_default_config()`` returns a ``PPOConfig``, and scripts
written for the dict go on using it as one: ``config["lr"] = 0.01``,
``config["model"]["fcnet_hiddens"] = [64]``, ``config.get("gamma")``,
``"lr" in config``, ``dict(config)``, ``config.copy()``, ``config.update({...})``.
These functions are the builder's mapping methods (bound in
:class:`~rltune.trainers.rllib._config_builder.AlgorithmConfig`).

Invariant: reading a dict-valued key (``model``, ``env_config``, ...) hands
out the builder's own copy of that block (its defaults filled in), kept in
the builder's values, so that changing it in place changes the builder, as
it changes RLlib's; a block changed that way is checked when the config is
built or validated, like RLlib's.
"""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING, Any, Iterator, Mapping

from rltune._search_entries import as_entry
from rltune.trainers.rllib._builder_keys import RLLIB_BUILDER_NAMES

if TYPE_CHECKING:
    from rltune.trainers.rllib._config_builder import AlgorithmConfig

_MISSING = object()


def getitem(builder: AlgorithmConfig, key: str) -> Any:
    """``config[key]``: the value the trainer would get; a block is the builder's own (changes stick)."""
    config = builder.to_dict()
    target = RLLIB_BUILDER_NAMES.get(key, key) if isinstance(key, str) else key
    head = target.split(".")[0] if isinstance(target, str) else target
    if head not in config:  # still a KeyError (the mapping protocol), with a message
        close = difflib.get_close_matches(str(key), list(config), n=1, cutoff=0.6)
        raise KeyError(f"{type(builder).__name__} has no setting {key!r}" + (f"; did you mean {close[0]!r}?" if close else ""))
    value = config[head]
    if isinstance(value, dict) and as_entry(value) is None:
        builder._values[head] = value  # the live block: config["model"]["fcnet_hiddens"] = [...] changes the builder
    if head != target:
        for part in target.split(".")[1:]:
            value = value[part]
    return value


def setitem(builder: AlgorithmConfig, key: str, value: Any) -> None:
    """``config[key] = value``: :meth:`~AlgorithmConfig.update_from_dict` of that one key (checked at once)."""
    builder.update_from_dict({key: value})


def delitem(builder: AlgorithmConfig, key: str) -> None:
    """``del config[key]``: the key goes back to its default."""
    pop(builder, key)


def pop(builder: AlgorithmConfig, key: str, default: Any = _MISSING) -> Any:
    """``config.pop(key[, default])``: the key's value; the key goes back to its default."""
    if key not in builder:
        if default is _MISSING:
            raise KeyError(key)
        return default
    value = getitem(builder, key)
    builder._values.pop(RLLIB_BUILDER_NAMES.get(key, key).split(".")[0], None)
    return value


def iterate(builder: AlgorithmConfig) -> Iterator[str]:
    """``for key in config``: the config keys (of ``to_dict()``)."""
    return iter(builder.to_dict())


def length(builder: AlgorithmConfig) -> int:
    """``len(config)``: how many config keys (of ``to_dict()``)."""
    return len(builder.to_dict())


def equals(builder: AlgorithmConfig, other: object) -> bool:
    """``config == other``: the same config dict (``other`` a dict, or a builder of the same algorithm)."""
    from rltune.trainers.rllib._config_builder import AlgorithmConfig

    if isinstance(other, AlgorithmConfig):
        return builder.algo_class is other.algo_class and builder.to_dict() == other.to_dict()
    if isinstance(other, Mapping):
        return builder.to_dict() == dict(other)
    return NotImplemented


def values(builder: AlgorithmConfig) -> list[Any]:
    """``config.values()``: the values of ``to_dict()``."""
    return list(builder.to_dict().values())


def update(builder: AlgorithmConfig, other: Mapping[str, Any] = {}, **kwargs: Any) -> None:  # noqa: B006 - never changed
    """``config.update(d)``: the keys of ``d`` (and keywords) set, checked at once, as ``update_from_dict``."""
    builder.update_from_dict({**dict(other), **kwargs})


def deep_copy(builder: AlgorithmConfig, memo: dict[int, Any]) -> AlgorithmConfig:
    """``copy.deepcopy(config)``: an independent builder (dicts and lists copied; classes and functions shared)."""
    return builder.copy()
