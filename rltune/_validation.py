"""Checks shared by every edge that reads user input: names, booleans given for numbers, paths.

Each returns a problem (a message) or None, so that callers can collect
every problem into one :class:`~rltune.errors.ConfigError`.
"""

from __future__ import annotations

import os
import re
import types
import typing
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator

NAME_MAX_LENGTH = 128
MAX_SEED = 2**31 - 1  # numpy's legacy RandomState (Optuna's samplers) takes < 2**32; a study adds the trial number
MAX_TRIALS = 100_000  # trials of one study: grid points are enqueued up front, so this bounds the storage too
NAME_RULE = (
    f"letters, digits, '-', '_' and '.', at most {NAME_MAX_LENGTH} characters, "
    "starting with a letter, digit or '_'"
)
_NAME = re.compile(rf"[A-Za-z0-9_][A-Za-z0-9_.-]{{0,{NAME_MAX_LENGTH - 1}}}")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def name_problem(name: Any) -> str | None:
    """Why ``name`` cannot name a study or trial directory (it becomes a path under the results dir), or None.

    The one rule for ``rltune train --name``, ``rltune tune --name``,
    ``tune.run(name=...)`` and a study file's ``name``: no '/', '..', NUL,
    newline or leading dot, so a name never leaves the results dir nor hides in it.
    """
    if not isinstance(name, str):
        return f"must be a string of {NAME_RULE}, but got {type(name).__name__}"
    if not _NAME.fullmatch(name):
        shown = repr(name) if len(name) <= 60 else repr(name[:57]) + "..."
        return f"must be {NAME_RULE}, but got {shown}"
    return None


def safe_name(text: str) -> str:
    """``text`` made into a valid name (a study file's stem as its default name): unsafe runs become '_'."""
    name = _UNSAFE.sub("_", text).lstrip(".-")[:NAME_MAX_LENGTH]
    return name or "study"


def results_dir_problem(path: Any) -> str | None:
    """Why ``path`` cannot be a results directory (a NUL byte, a file, a file above it), or None."""
    if path is None:
        return None
    text = str(path)
    if "\x00" in text:
        return "must not contain a NUL byte"
    if not text.strip():
        return "must be a directory path, but got an empty string"
    directory = Path(os.path.expanduser(text))
    for candidate in (directory, *directory.parents):
        if candidate.exists():
            if not candidate.is_dir():
                which = "is a file" if candidate == directory else f"is under {str(candidate)!r}, which is a file"
                return f"{text!r} {which}, not a directory"
            return None
    return None


def nul_problem(value: Any) -> str | None:
    """A problem if the string ``value`` holds a NUL byte (no path, URL or name can), else None."""
    if isinstance(value, str) and "\x00" in value:
        return f"must not contain a NUL byte (got {value!r})"
    return None


def error_text(err: Any) -> str:
    """A pydantic error's message without pydantic's "Value error, " prefix on our validators' messages."""
    return str(err["ctx"]["error"]) if err["type"] == "value_error" else err["msg"]


def bool_for_number(annotation: Any, value: Any) -> bool:
    """True if ``value`` holds a bool where ``annotation`` wants an int or float (pydantic would read True as 1)."""
    if isinstance(value, bool):
        return _wants_number(annotation)
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        return any(bool_for_number(a, value) for a in args if a is not type(None))
    if origin in (list, tuple) and isinstance(value, (list, tuple)) and args:
        if origin is tuple and args[-1] is not Ellipsis:
            return any(bool_for_number(a, v) for a, v in zip(args, value))
        return any(bool_for_number(args[0], v) for v in value)
    return False


def _wants_number(annotation: Any) -> bool:
    if annotation in (int, float):
        return True
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = typing.get_args(annotation)
        return bool not in args and any(a in (int, float) for a in args)
    return False


class UserInput(BaseModel):
    """Base of every pydantic model that reads user input (configs, study and train files, curricula).

    Unknown keys are errors, numbers must be finite (``lr: .inf``, JSON's
    ``Infinity``), and a bool is never a number (``num_samples: true`` would
    be 1). Models whose strings become paths or names set ``refuse_nul``.
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    refuse_nul: ClassVar[bool] = False

    @field_validator("*", mode="before")
    @classmethod
    def _plain_values(cls, value: Any, info: ValidationInfo) -> Any:
        field = cls.model_fields.get(info.field_name) if info.field_name else None
        if field is not None and bool_for_number(field.annotation, value):
            raise ValueError("a bool is not a number here")
        problem = nul_problem(value) if cls.refuse_nul else None
        if problem:
            raise ValueError(problem)
        return value
