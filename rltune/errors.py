"""Typed exceptions shared by every part of rltune.

Every error a user can cause (a bad config key, an env that breaks the
gymnasium API, a corrupt checkpoint) is an :class:`RLTuneError`; the CLI turns
any of them into one message on stderr and exit status 2.
"""

from __future__ import annotations


class RLTuneError(Exception):
    """Base class of the errors rltune raises for bad input or a failed component."""


class ConfigError(RLTuneError, ValueError):
    """A config (dict, JSON, YAML) is invalid; ``problems`` lists every error found, by path."""

    def __init__(self, problems: list[str] | str, *, where: str = "config") -> None:
        self.problems = [problems] if isinstance(problems, str) else list(problems)
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
