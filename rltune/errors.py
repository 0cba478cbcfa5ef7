"""Typed exceptions shared by every part of rltune.

Every error a user can cause (a bad config key, an env that breaks the
gymnasium API, a corrupt checkpoint) is an :class:`RLTuneError`; the CLI turns
any of them into one message on stderr and exit status 2.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

UNKNOWN_KEY = "unknown key"  # Problem.kind of a key the settings lack (other kinds: "invalid", "unsupported", "conflict")


@dataclass(frozen=True)
class Problem:
    """One problem of a config, structured: where (``path``, the keys to it), what is wrong, and a ``hint``.

    ``kind`` lets a caller decide without reading the text (:data:`UNKNOWN_KEY`,
    "invalid", "unsupported", "conflict"); ``shown`` is the path as the user
    wrote it when it differs (RLlib's name of a key, a builder keyword).
    ``str(problem)`` is the line a :class:`ConfigError` shows.
    """

    path: tuple[str, ...]
    what: str
    hint: str = ""
    kind: str = "invalid"
    shown: str | None = None

    def __str__(self) -> str:
        where = self.where()
        text = f"{where}: {self.what}" if where else self.what
        return f"{text}; {self.hint}" if self.hint else text

    def where(self) -> str:
        """The path as the user reads it (``shown``, else the keys joined by dots)."""
        return self.shown if self.shown is not None else ".".join(self.path)

    def under(self, *prefix: str) -> "Problem":
        """The same problem one block deeper (``evaluation_config.<path>``)."""
        shown = None if self.shown is None else ".".join((*prefix, self.shown))
        return Problem((*prefix, *self.path), self.what, self.hint, self.kind, shown)

    def shown_as(self, shown: str) -> "Problem":
        """The same problem with its path written as ``shown``."""
        return Problem(self.path, self.what, self.hint, self.kind, shown)


class RLTuneError(Exception):
    """Base class of the errors rltune raises for bad input or a failed component."""


class ConfigError(RLTuneError, ValueError):
    """A config (dict, JSON, YAML) is invalid; ``problems`` lists every error found, by path, as text.

    ``details`` holds the same problems as :class:`Problem` records (a
    problem given as text has an empty path and ``kind`` "text").
    """

    def __init__(self, problems: Sequence[str | Problem] | str | Problem, *, where: str = "config") -> None:
        given = [problems] if isinstance(problems, (str, Problem)) else list(problems)
        self.details = [p if isinstance(p, Problem) else Problem((), str(p), kind="text") for p in given]
        self.problems = [str(p) for p in given]
        self.where = where
        if len(self.problems) == 1:
            message = f"invalid {where}: {self.problems[0]}"
        else:
            message = f"invalid {where} ({len(self.problems)} problems):\n" + "\n".join(
                f"  - {p}" for p in self.problems
            )
        super().__init__(message)


class EnvError(RLTuneError):
    """An environment could not be created, breaks the gymnasium API, or raised while stepping."""


class SpaceError(RLTuneError, ValueError):
    """An observation or action space that the chosen model or algorithm cannot handle."""


class CheckpointError(RLTuneError):
    """A checkpoint is missing, partial, corrupt, or belongs to another algorithm or model."""


class WorkerError(RLTuneError):
    """A rollout worker process died, did not answer within ``sample_timeout_s``, or a function run on it raised."""


class DiskError(RLTuneError):
    """A file or directory rltune writes cannot be written: no space left, read-only, permission denied, missing.

    ``path`` names it; ``kind`` is ``"no_space"``, ``"read_only"``,
    ``"permission_denied"``, ``"missing"`` or None (another OS error), so that
    a caller decides without parsing the message (a study retries trials that
    failed on ``"no_space"`` when resumed).
    """

    def __init__(self, message: str, *, path: object = None, kind: str | None = None) -> None:
        super().__init__(message)
        self.path = None if path is None else str(path)
        self.kind = kind


class CallbackError(RLTuneError):
    """A user callback hook raised; the message names the hook, the worker and the episode."""


class StudyLockedError(RLTuneError):
    """Another orchestrator runs the study (embedded storage: one at a time); ``holder`` tells which one.

    ``holder`` is what that orchestrator wrote in its lock file: ``host``,
    ``pid`` and ``started`` (a Unix time), as far as they could be read.
    """

    def __init__(self, message: str, *, holder: dict | None = None) -> None:
        super().__init__(message)
        self.holder = holder or {}


class StudyFailedError(RLTuneError):
    """Every trial of a study failed (or, with ``raise_on_failed_trial``, some did); ``analysis`` has them all."""

    def __init__(self, message: str, *, analysis: object = None, failed: list[int] | None = None) -> None:
        super().__init__(message)
        self.analysis = analysis
        self.failed = failed or []
