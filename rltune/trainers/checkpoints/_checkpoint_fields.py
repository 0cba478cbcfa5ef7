"""Type-checked entries of a checkpoint's metadata: each wrong entry is one CheckpointError naming it."""

from __future__ import annotations

import os
from typing import Any

from rltune.errors import CheckpointError

_REQUIRED = object()


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (torch's run to many), for a one-line error."""
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def describe(value: Any) -> str:
    """A value's type and (shortened) repr, for an error message."""
    text = repr(value)
    return f"{a_noun(type(value).__name__)}: {text if len(text) <= 60 else text[:57] + '...'}"


def a_noun(noun: str) -> str:
    """``noun`` with its indefinite article."""
    return f"{'an' if noun[0] in 'aeiou' else 'a'} {noun}"


def is_kind(value: Any, kinds: tuple[type, ...]) -> bool:
    """``isinstance``, except that a bool is no int (JSON true/false)."""
    if isinstance(value, bool) and bool not in kinds:
        return False
    return isinstance(value, kinds)


def field_error(path: str | os.PathLike[str], name: str, problem: str, where: str = "metadata field") -> CheckpointError:
    """``checkpoint '<path>': metadata field '<name>' <problem>``."""
    return CheckpointError(f"checkpoint {str(path)!r}: {where} {name!r} {problem}")


class Fields:
    """Type-checked entries of a checkpoint's metadata (or tensors) dict; a wrong entry is a CheckpointError naming it."""

    def __init__(self, path: str | os.PathLike[str], values: dict[str, Any], where: str = "metadata field") -> None:
        self.path = path
        self.values = values
        self.where = where

    def error(self, name: str, problem: str) -> CheckpointError:
        """The error for entry ``name``: 'checkpoint ...: metadata field ``name`` ``problem``'."""
        return field_error(self.path, name, problem, self.where)

    def get(self, name: str, kind: type | tuple[type, ...], default: Any = _REQUIRED) -> Any:
        """Entry ``name``, which must be a ``kind`` (a bool is no int); ``default`` when absent, if given."""
        if name not in self.values:
            if default is _REQUIRED:
                raise self.error(name, "is missing")
            return default
        kinds = kind if isinstance(kind, tuple) else (kind,)
        value = self.values[name]
        if not is_kind(value, kinds):
            expected = " or ".join(a_noun("None" if k is type(None) else k.__name__) for k in kinds)
            raise self.error(name, f"must be {expected}, but is {describe(value)}")
        return value

    def count(self, name: str, default: Any = _REQUIRED) -> int:
        """Entry ``name``, which must be an int >= 0."""
        value = self.get(name, int, default)
        if value < 0:
            raise self.error(name, f"must be >= 0, but is {value}")
        return value
