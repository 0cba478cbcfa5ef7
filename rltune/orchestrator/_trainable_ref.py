"""What a study runs: a trainer (name, class, import string) or a function, resolved from the ``run`` field."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

from rltune._imports import import_object
from rltune.errors import ConfigError


@dataclass
class Trainable:
    """What a trial runs: ``kind`` is ``"trainer"`` or ``"function"``; ``ref`` is shipped to the trial process."""

    kind: str
    ref: Any  # a trainer name or import string (resolved in the trial), or the class / function itself
    name: str


def resolve_trainable(run: Any) -> Trainable:
    """A trainer (name, class, import string) or a function; ConfigError says which forms are accepted."""
    if isinstance(run, str):
        if ":" in run:
            attr = run.partition(":")[2]
            obj = import_object(run, "")
            kind = _kind_of(obj, run)
            return Trainable(kind, run, getattr(obj, "name", None) if kind == "trainer" else attr)
        from rltune.trainers import get_trainer_class

        cls = get_trainer_class(run)  # ConfigError: unknown algorithm, did you mean
        return Trainable("trainer", cls.name, cls.name)
    if isinstance(run, type):
        return Trainable(_kind_of(run, repr(run)), run, getattr(run, "name", run.__name__))
    if callable(run):
        return Trainable(_kind_of(run, repr(run)), run, getattr(run, "__name__", "function"))
    raise ConfigError(
        f"must be a trainer name (PPO, DQN), a Trainer class, a function fn(config, reporter), "
        f"or an import string 'pkg.module:Name', but got {run!r}"
    )


def _kind_of(obj: Any, text: str) -> str:
    if isinstance(obj, type):
        from rltune.trainers import Trainer

        if issubclass(obj, Trainer):
            return "trainer"
        raise ConfigError(f"{text} is a class but not a rltune Trainer subclass")
    if not callable(obj):
        raise ConfigError(f"{text} is neither a Trainer class nor a function")
    try:
        params = [p for p in inspect.signature(obj).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty]
    except (TypeError, ValueError):
        return "function"
    if len(params) > 2:
        raise ConfigError(f"function {text} must take (config) or (config, reporter), but takes {len(params)} arguments")
    return "function"
