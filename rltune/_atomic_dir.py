"""Directories put in place atomically, and the leftovers of writers that crashed (stdlib only).

A writer builds the new directory under a temporary name next to its
target, ``.<name>.tmp-<host>-<pid>-<id>``, then :func:`replace_dir` puts it
in place: with nothing under the target's name, one rename; else, on Linux,
one ``renameat2(RENAME_EXCHANGE)`` that swaps the two directories (the old
one is then under the temporary name, and deleted). Where the swap is not
available it falls back to two renames through ``.<name>.old-<host>-<pid>-<id>``;
a crash between them leaves no directory under the name, and
:func:`recover_leftovers` (run before every checkpoint write and read)
renames the ``.old-`` one back.

Leftovers are touched only when their writer is surely gone: its pid (on
this host) is not running (or nothing changed in them for a day: the pid
was reused), or (another host, or names from older rltune versions without
a pid) nothing changed in them for :data:`STALE_AFTER_S`.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import re
import shutil
import socket
import sys
import time
import uuid
from pathlib import Path

STALE_AFTER_S = 15 * 60
PID_REUSED_AFTER_S = 24 * 3600  # a leftover whose pid runs but that nothing changed in for a day: the pid was reused

_HOST = re.sub(r"[^A-Za-z0-9.]", "_", socket.gethostname()) or "host"
_LEFTOVER = re.compile(r"^\.(?P<name>.+)\.(?P<kind>tmp|old)-(?P<host>[A-Za-z0-9._]+)-(?P<pid>\d+)-[0-9a-f]{8}$")
# What rltune wrote before hosts and pids were in the names: .<name>.tmp-<pid>-<id>, .<name>.tmp-<id>, .<name>.old-<id>.
_LEGACY = re.compile(r"^\.(?P<name>.+)\.(?P<kind>tmp|old)-(?:\d+-)?[0-9a-f]{8}$")

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2
_renameat2: object = None  # None: not looked up yet; False: unavailable


def leftover_path(target: Path, kind: str) -> Path:
    """A fresh ``.<name>.<kind>-<host>-<pid>-<id>`` path next to ``target`` (``kind``: 'tmp' or 'old')."""
    return target.parent / f".{target.name}.{kind}-{_HOST}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def fsync_dir(path: Path) -> None:
    """fsync a directory (its entries' renames); ignored where directories cannot be opened."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _libc_renameat2():
    global _renameat2
    if _renameat2 is None:
        _renameat2 = False
        if sys.platform.startswith("linux"):
            with contextlib.suppress(OSError, AttributeError):
                func = ctypes.CDLL(None, use_errno=True).renameat2
                func.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
                func.restype = ctypes.c_int
                _renameat2 = func
    return _renameat2


def exchange(a: Path, b: Path) -> bool:
    """Swap two existing paths atomically (Linux ``renameat2(RENAME_EXCHANGE)``); False where unsupported."""
    func = _libc_renameat2()
    if not func:
        return False
    if func(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EPERM):  # kernel or filesystem without it
        return False
    raise OSError(err, os.strerror(err), str(a), None, str(b))


def replace_dir(tmp: Path, target: Path) -> None:
    """Put the complete directory ``tmp`` at ``target``, replacing what is there; a reader sees old or new."""
    if not os.path.lexists(target):
        os.rename(tmp, target)
    elif exchange(tmp, target):
        shutil.rmtree(tmp, ignore_errors=True)  # now the old directory
    else:
        old = leftover_path(target, "old")
        os.rename(target, old)
        try:
            os.rename(tmp, target)
        except BaseException:
            os.rename(old, target)
            raise
        shutil.rmtree(old, ignore_errors=True)
    fsync_dir(target.parent)


def _writer_gone(path: Path, match: re.Match[str], now: float) -> bool:
    try:
        age = now - path.stat().st_mtime
    except OSError:
        return False
    if "pid" in match.re.groupindex and match["host"] == _HOST:
        pid = int(match["pid"])
        if pid == os.getpid():
            return False
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except OSError:  # EPERM: running as another user
            pass
        return age > PID_REUSED_AFTER_S  # running: the writer, or a process that got its pid later
    return age > STALE_AFTER_S


def recover_leftovers(directory: str | os.PathLike[str]) -> None:
    """Clean up after writers in ``directory`` that crashed; never raises (a read-only directory is left as is).

    A ``.<name>.old-`` directory whose ``<name>`` is missing is the last
    complete one before a crash between two renames: it is renamed back to
    ``<name>``. Other ``.tmp-``/``.old-`` leftovers of gone writers are deleted.
    """
    directory = Path(directory)
    now = time.time()
    try:
        entries = sorted(directory.iterdir(), key=lambda p: _mtime(p), reverse=True)  # newest first
    except OSError:
        return
    for path in entries:
        match = _LEFTOVER.match(path.name) or _LEGACY.match(path.name)
        if match is None or not path.is_dir() or path.is_symlink() or not _writer_gone(path, match, now):
            continue
        target = directory / match["name"]
        with contextlib.suppress(OSError):
            if match["kind"] == "old" and not os.path.lexists(target):
                os.rename(path, target)
                fsync_dir(directory)
                continue
            shutil.rmtree(path)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0
