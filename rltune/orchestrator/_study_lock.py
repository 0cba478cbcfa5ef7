"""One orchestrator per study on the embedded storage: an exclusive lock on a file in the study directory.

The lock is ``flock`` on ``<study_dir>/orchestrator.lock``, held by an open
file descriptor for the orchestrator's lifetime, so the kernel releases it
when the orchestrator dies, even by ``kill -9``: a stale lock never blocks
the next run. The file holds the holder's host, pid and start time, for the
message that refuses a second orchestrator. The file itself is never
deleted (deleting a lock file lets two processes lock two different files).

Holding the lock also tells the orchestrator that no other one writes the
study: a lock file of Optuna's journal left by a killed writer can be
removed at once instead of after Optuna's 30 s grace period.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import time
from pathlib import Path
from typing import Any, Callable

from rltune.errors import StudyLockedError

LOCK_FILE = "orchestrator.lock"
JOURNAL_LOCK_SUFFIX = ".lock"  # Optuna's JournalFileOpenLock creates <journal>.lock while it appends
OPTUNA_LOCK_GRACE_S = 30  # Optuna's default grace period before it breaks a journal lock file
LIVE_WRITER_WAIT_S = 1.0  # a live writer holds the journal lock for one append: milliseconds


class StudyLock:
    """The exclusive lock of a study directory, held until :meth:`release` (or the process's death)."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, study_dir: Path, study_name: str) -> "StudyLock":
        """Lock ``study_dir`` for this process; :class:`StudyLockedError` names the orchestrator holding it."""
        path = Path(study_dir) / LOCK_FILE
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = _read_holder(fd) if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN) else None
            os.close(fd)
            if holder is None and exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise
            raise StudyLockedError(_refusal(study_name, path, holder or {}), holder=holder) from None
        record = {"host": socket.gethostname(), "pid": os.getpid(), "started": time.time()}
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(record) + "\n").encode(), 0)
        except OSError:  # a full disk: the lock holds all the same, only its holder goes unnamed
            pass
        return cls(path, fd)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Unlock (and empty the file, so that it names no holder); a second call does nothing."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)


def _read_holder(fd: int) -> dict[str, Any] | None:
    """What the holder wrote; it may be writing it right now, so a few tries."""
    for _ in range(20):
        try:
            data = json.loads(os.pread(fd, 4096, 0).decode() or "null")
        except (ValueError, OSError):
            data = None
        if isinstance(data, dict):
            return data
        time.sleep(0.025)
    return None


def _refusal(study_name: str, path: Path, holder: dict[str, Any]) -> str:
    pid, host = holder.get("pid", "?"), holder.get("host", "?")
    started = holder.get("started")
    since = f", running since {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(started))}" \
        if isinstance(started, (int, float)) else ""
    return (f"study {study_name!r} is already run by another orchestrator (host {host}, pid {pid}{since}; it holds "
            f"{path}); one orchestrator runs a study at a time on the journal storage: wait for it to finish, "
            f"or stop it (Ctrl-C, or kill {pid} on {host}) and then --resume")


def clear_stale_journal_lock(journal: Path, *, own_journal: bool, say: Callable[[str], None]) -> None:
    """Deal with ``<journal>.lock`` (Optuna's) found while this process holds the study lock.

    A writer holds that file for one append (milliseconds); one that stays
    was left by a writer killed while appending. If the journal is the
    study's own (``own_journal``), only this study's orchestrator writes it,
    so it is removed at once. A journal given as ``storage`` may be written by
    orchestrators of other studies too: it is left to Optuna, which breaks it
    after 30 s, and ``say`` tells why the start waits.
    """
    lock = Path(str(journal) + JOURNAL_LOCK_SUFFIX)
    deadline = time.monotonic() + LIVE_WRITER_WAIT_S
    while lock.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    if not lock.exists():
        return
    if not own_journal:
        say(f"Optuna's journal lock {lock} is held (left by a killed process, or another study writing to this "
            f"journal); Optuna breaks a stale one after {OPTUNA_LOCK_GRACE_S} s: the study may wait that long")
        return
    try:
        os.unlink(lock)
    except FileNotFoundError:
        return
    say(f"removed Optuna's journal lock {lock}, left by an orchestrator killed while writing (no other "
        "orchestrator runs this study)")
