"""A child process of rltune never outlives its parent, SIGKILL of the parent included.

:func:`rltune._ipc.spawn` starts every child (rollout workers, trial
processes, the env check) with ``die_with_parent(parent_pid, by_main_thread)``
as the first statement of its ``python -c`` line, before the child imports
anything heavy, so a parent killed while the child starts is seen too.

On Linux the child asks the kernel for SIGKILL when its parent goes
(``prctl(PR_SET_PDEATHSIG)``): it fires even while the child is stuck in
native code, an env's ``step()`` for instance, where no thread of the child
could run. The kernel sends it when the parent *thread* that started the
child ends, not the parent process: so the signal is armed only when the
main thread spawned the child (CPython's main thread lives as long as the
process); a child of another thread (a trainer built in a thread pool, a
worker restarted from ``train()`` there) is watched the portable way
instead: a daemon thread that polls ``os.getppid()`` and calls
``os._exit`` when it changes (the child was reparented: the parent died).
That watch needs the GIL, which native code stuck without releasing it
would hold; the signal does not. Other platforms have only the watch.

Either way the parent may already be gone when the child runs this (a
parent killed right after ``fork``): the child compares ``os.getppid()``
with the pid its parent wrote into the command line, after arming the
signal, and exits at once if they differ.

A child forked from a warm template (:mod:`rltune._warm_server`) arms the
signal against the template, which is forked from in its main thread only;
the template dies with the process that started it (the signal, or the
end of its socket to that process).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

POLL_S = 0.5  # the portable watch's period: a child outlives its parent by at most this long
_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


def spawn_arguments() -> tuple[int, bool]:
    """In the parent, about to start a child: ``(parent_pid, by_main_thread)`` for :func:`die_with_parent`."""
    return os.getpid(), threading.current_thread() is threading.main_thread()


def die_with_parent(parent_pid: int, by_main_thread: bool) -> None:
    """In a child: make sure it ends when ``parent_pid`` does (see the module doc); exits now if it already has."""
    armed = by_main_thread and _arm_parent_death_signal()
    if os.getppid() != parent_pid:  # the parent died before the signal was armed (or it never was)
        os._exit(1)
    if not armed:
        threading.Thread(target=_watch, args=(parent_pid,), name="rltune-parent-watch", daemon=True).start()


def exec_dying_with_parent(parent_pid: int, by_main_thread: bool, argv: list[str]) -> None:
    """In a child: become ``argv`` (``execv``), a program that gets SIGTERM when its parent ends.

    For a server that stops its own children on SIGTERM (``mlflow ui`` and
    its uvicorn): SIGKILL would orphan them. Only the kernel's signal
    survives ``exec``, not a watch thread, so a child started by a thread
    other than the main one is not bound (the signal would come when that
    thread ends).
    """
    if by_main_thread:
        _arm_parent_death_signal(signal.SIGTERM)
    if os.getppid() != parent_pid:
        os._exit(1)
    os.execv(argv[0], argv)


def _arm_parent_death_signal(sig: int = signal.SIGKILL) -> bool:
    """``prctl(PR_SET_PDEATHSIG, sig)`` on Linux; False where there is no such call or it failed."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        ulong = ctypes.c_ulong
        return libc.prctl(ctypes.c_int(_PR_SET_PDEATHSIG), ulong(sig), ulong(0), ulong(0), ulong(0)) == 0
    except (OSError, AttributeError):  # no libc symbols in this process (a static build): the watch does it
        return False


def _watch(parent_pid: int) -> None:
    while True:
        time.sleep(POLL_S)
        if os.getppid() != parent_pid:
            os._exit(1)
