"""Processes a test started, by pid: whether they still run, waiting for them to end, ending what is left."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from typing import Iterable


def process_alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie (a zombie has exited; only its exit code is left)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return False
    state = stat.rsplit(")", 1)[1].split()[0]
    return state not in ("Z", "X")


def wait_gone(pids: Iterable[int], timeout: float = 10.0) -> list[int]:
    """Wait until none of ``pids`` runs; return the ones still running after ``timeout``."""
    deadline = time.monotonic() + timeout
    alive = [p for p in pids if process_alive(p)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.1)
        alive = [p for p in alive if process_alive(p)]
    return alive


def kill_left(pids: Iterable[int]) -> None:
    """SIGKILL those of ``pids`` that still run: a failed test leaves nothing hanging on the machine."""
    for pid in pids:
        if process_alive(pid):
            os.kill(pid, signal.SIGKILL)


def survivors_of_sigkill(proc: subprocess.Popen, children: list[int], timeout: float = 30.0) -> list[int]:
    """SIGKILL ``proc``; those of its ``children`` still running ``timeout`` s later (then killed too)."""
    try:
        proc.kill()
        proc.wait(timeout=30)
        return wait_gone(children, timeout)
    finally:
        kill_left(children)
