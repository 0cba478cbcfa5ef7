"""Real full and read-only file systems for the disk tests: a small tmpfs, a read-only bind mount, a disk filler.

The tests run as root, whom ``chmod 0o555`` does not stop, so a read-only
directory is a read-only bind mount of it onto itself, and a full disk a
tmpfs of a few hundred kilobytes filled with a ballast file: the kernel's
own ENOSPC and EROFS, no fault injected. Both need the right to mount (root
in a container that allows it); where it is missing, :func:`read_only`
falls back to ``chmod`` for a user that is not root (the errors then say
"permission denied"), and :func:`mount_problem` says why a test is skipped.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from pathlib import Path
from typing import Iterator

_CHECKED: list[str | None] = []


def mount_problem() -> str | None:
    """Why this process cannot mount a tmpfs (None: it can), checked once."""
    if not _CHECKED:
        _CHECKED.append(_try_mount())
    return _CHECKED[0]


def _try_mount() -> str | None:
    if os.geteuid() != 0:
        return "mounting needs root (the disk tests use a real tmpfs and read-only bind mounts)"
    if shutil.which("mount") is None:
        return "no mount command"
    probe = Path(f"/tmp/rltune-mount-probe-{os.getpid()}")
    probe.mkdir(exist_ok=True)
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(probe)], capture_output=True,
                              text=True)
        if done.returncode != 0:
            return f"this sandbox refuses mount: {done.stderr.strip()}"
        subprocess.run(["umount", str(probe)], check=True)
        return None
    finally:
        probe.rmdir()


def _umount(path: Path) -> None:
    if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)  # a process still inside: detach


@contextlib.contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` (e.g. ``"512k"``) mounted at ``path`` (created) for the block; unmounted after."""
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        _umount(path)


def resize(path: Path, size: str) -> None:
    """Give the tmpfs at ``path`` a new size (more room: the disk is freed without touching its files)."""
    subprocess.run(["mount", "-o", f"remount,size={size}", str(path)], check=True)


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[Path]:
    """``path`` (created) made read-only for the block: a read-only bind mount of it onto itself.

    Without the right to mount, as a user that is not root: ``chmod 0o555``
    (writes then fail with "permission denied" rather than "read-only").
    """
    path.mkdir(parents=True, exist_ok=True)
    if mount_problem() is None:
        subprocess.run(["mount", "--bind", str(path), str(path)], check=True)
        try:
            subprocess.run(["mount", "-o", "remount,bind,ro", str(path)], check=True)
            yield path
        finally:
            _umount(path)
        return
    if os.geteuid() == 0:
        import pytest

        pytest.skip(mount_problem())
    mode = path.stat().st_mode
    path.chmod(0o555)
    try:
        yield path
    finally:
        path.chmod(mode)


def fill(directory: "str | os.PathLike[str]") -> Path:
    """Fill the file system of ``directory`` with a ballast file until not one more byte fits; its path.

    A file that already has a partly used last block can still grow into it;
    anything that needs a new block (a new file's contents) fails with ENOSPC.
    """
    ballast = Path(directory) / "ballast"
    with open(ballast, "ab", buffering=0) as f:
        for chunk in (1 << 16, 4096, 512, 64, 1):
            while True:
                try:
                    f.write(b"\0" * chunk)
                except OSError:
                    break
    return ballast


def _fill_callbacks() -> type:
    from rltune.callbacks import DefaultCallbacks

    class FillDiskAtIteration3(DefaultCallbacks):
        """Fills the trainer's results disk once, in iteration 3 (after the checkpoint of iteration 2)."""

        def on_train_result(self, *, trainer, result, **kwargs) -> None:
            if result["training_iteration"] == 3:
                fill(Path(trainer.logdir).parent)

    return FillDiskAtIteration3


def __getattr__(name: str) -> type:  # the callbacks class, importable by name without importing rltune here
    if name == "FillDiskAtIteration3":
        return _fill_callbacks()
    raise AttributeError(name)

