"""Disk errors told plainly: which path, and whether it is full, read-only, forbidden or missing (stdlib only).

Every place that writes under a results directory (trial files, checkpoints,
the study's journal, the tracking log) turns an ``OSError`` into one
:class:`~rltune.errors.DiskError` with :func:`disk_error` or :func:`writing`,
and the edges check a results directory before any compute with
:func:`check_writable_dir`. :func:`disk_kind` classifies an exception (its
causes included) by errno, never by its text, so that a study can decide to
retry the trials that failed for lack of space.
"""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path
from typing import Iterator

from rltune.errors import DiskError

NO_SPACE = "no_space"
READ_ONLY = "read_only"
PERMISSION_DENIED = "permission_denied"
MISSING = "missing"

_KINDS = {errno.ENOSPC: NO_SPACE, errno.EDQUOT: NO_SPACE, errno.EROFS: READ_ONLY, errno.EACCES: PERMISSION_DENIED,
          errno.EPERM: PERMISSION_DENIED}
_SQLITE_FULL = 13  # sqlite3's SQLITE_FULL ("database or disk is full"), in sqlite3 errors' sqlite_errorcode
REASONS = {NO_SPACE: "no space left on device", READ_ONLY: "read-only file system",
           PERMISSION_DENIED: "permission denied", MISSING: "does not exist"}


def disk_kind(exc: BaseException | None) -> str | None:
    """``"no_space"``, ``"read_only"`` or ``"permission_denied"`` if ``exc`` or an exception it came from is that
    disk error (by errno; sqlite's "disk is full" by its error code), else None (``"missing"`` only from a DiskError)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, DiskError) and exc.kind is not None:
            return exc.kind
        if isinstance(exc, OSError) and exc.errno in _KINDS:
            return _KINDS[exc.errno]
        if getattr(exc, "sqlite_errorcode", None) == _SQLITE_FULL:
            return NO_SPACE
        exc = exc.__cause__ or exc.__context__
    return None


def disk_error(exc: BaseException, path: str | os.PathLike[str], what: str, hint: str = "") -> DiskError:
    """A :class:`DiskError` for ``exc`` raised writing ``what`` at ``path``: "cannot write <what> '<path>': <reason>"."""
    if isinstance(exc, DiskError):
        return exc
    kind = disk_kind(exc)
    reason = REASONS[kind] if kind else (getattr(exc, "strerror", None) or str(exc) or type(exc).__name__)
    return DiskError(f"cannot write {what} {str(path)!r}: {reason}{hint}", path=path, kind=kind)


@contextlib.contextmanager
def writing(path: str | os.PathLike[str], what: str, hint: str = "") -> Iterator[None]:
    """Run the block; an ``OSError`` in it becomes a :class:`DiskError` naming ``what`` and ``path``."""
    try:
        yield
    except OSError as exc:
        raise disk_error(exc, path, what, hint) from exc


def ensure_dir(path: str | os.PathLike[str], what: str) -> Path:
    """``mkdir -p path``; a :class:`DiskError` naming ``what`` if it cannot be made."""
    directory = Path(path)
    with writing(directory, what):
        directory.mkdir(parents=True, exist_ok=True)
    return directory


def unwritable(directory: str | os.PathLike[str]) -> str | None:
    """Why nothing can be written in the existing ``directory`` (a kind), or None.

    By the file system's flags and ``access(2)`` (so root, whom mode bits do
    not stop, is judged as it will be treated), and a file system with no
    free block left (``no_space``).
    """
    try:
        stats = os.statvfs(directory)
    except OSError:
        stats = None
    if stats is not None and stats.f_flag & os.ST_RDONLY:
        return READ_ONLY
    effective = os.access in os.supports_effective_ids
    if not os.access(directory, os.W_OK | os.X_OK, effective_ids=effective):
        return PERMISSION_DENIED
    if stats is not None and stats.f_blocks and (stats.f_bfree if os.geteuid() == 0 else stats.f_bavail) == 0:
        return NO_SPACE
    return None


def check_writable_dir(path: str | os.PathLike[str], what: str, *, must_exist: bool = False, hint: str = "") -> None:
    """Raise a :class:`DiskError` if ``path`` cannot be written (or created), before any work is done.

    The nearest existing directory of ``path`` (itself, or the ancestor it
    would be created in) must be writable; with ``must_exist``, ``path``
    itself must exist. A path under a regular file is left to the callers'
    own check (``results_dir_problem``).
    """
    directory = Path(os.path.expanduser(str(path)))
    shown = str(path)
    if must_exist and not directory.is_dir():
        raise DiskError(f"{what} {shown!r} {REASONS[MISSING]}{hint}", path=directory, kind=MISSING)
    existing = directory
    while not os.path.lexists(existing) and existing.parent != existing:
        existing = existing.parent
    if not existing.is_dir():
        return
    kind = unwritable(existing)
    if kind is None:
        return
    if existing == directory:
        reason = "it is read-only (a read-only file system)" if kind == READ_ONLY else REASONS[kind]
        message = f"{what} {shown!r} cannot be written: {reason}"
    elif kind == READ_ONLY:
        message = f"{what} {shown!r} cannot be created: {str(existing)!r} is read-only (a read-only file system)"
    else:
        message = f"{what} {shown!r} cannot be created: {REASONS[kind]} in {str(existing)!r}"
    raise DiskError(message + hint, path=directory, kind=kind)
