"""The warm template's side: a process that imported torch, gymnasium and rltune once and forks the children.

:class:`rltune._warm.Template` starts it (``python -c "...template_entry(fd, ...)"``,
in a session of its own) on a ``SOCK_SEQPACKET`` socket pair. It imports the
modules it is told to preload, says it is ready, then serves one request per
message: fork a child that becomes what a cold ``subprocess`` start of
``python -c "from MODULE import FUNC; FUNC(fd)"`` would be, with the file
descriptors that came with the request (``socket.send_fds``): the child's end
of its channel, its stdin, stdout and stderr, and the pipe on which the
template writes the child's exit code when it reaps it.

The child, before it runs ``FUNC(fd)``: takes its stdio (C-level writes go to
them too), the caller's environment, working directory and umask, a session
of its own when asked, SIGKILL when the template dies (``prctl``; the
template dies when the process that started it does), a freshly seeded
numpy global RNG (Python's ``random`` reseeds itself after ``fork``), and,
when asked, a template of its own for its rollout workers, forked before any
code of the user runs (the workers are then in the trial's process group and
die with it).

Nothing here starts a thread: ``fork`` copies only the calling thread, and a
pool started before it (torch's intra-op threads) would be broken in every
child. The template checks that importing its modules started none.
"""

from __future__ import annotations

import atexit
import importlib
import os
import pickle
import select
import signal
import socket
import sys
import threading
import traceback
import warnings
from typing import Any

from rltune._parent_death import POLL_S, _arm_parent_death_signal

MAX_MESSAGE = 1 << 20  # a request (the child's environment) or a reply, in one SOCK_SEQPACKET message
FD_NAMES = ("channel", "status", "stdin", "stdout", "stderr")  # the descriptors of a request, in order


def template_entry(fd: int, parent_pid: int, by_main_thread: bool) -> None:
    """Entry point of the template process: preload, report ready (or why not), then serve until the parent goes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the orchestrator's; it stops the trials in order
    armed = by_main_thread and _arm_parent_death_signal()
    if os.getppid() != parent_pid:
        os._exit(1)
    sock = socket.socket(fileno=fd)
    init = pickle.loads(sock.recv(MAX_MESSAGE))
    sys.path[:] = init["sys_path"]
    try:
        for name in init["preload"]:  # "module", or "module:function" to call (a function that imports)
            module, _, function = name.partition(":")
            imported = importlib.import_module(module)
            if function:
                getattr(imported, function)()
        if threading.active_count() != 1:
            raise RuntimeError(f"importing {init['preload']} started {threading.active_count() - 1} thread(s): "
                               "a fork would copy them broken")
        ready: dict[str, Any] = {"pid": os.getpid()}
    except BaseException:  # noqa: BLE001 - reported; the caller starts its children cold
        ready = {"error": traceback.format_exc()}
    sock.send(pickle.dumps(ready))
    if "error" in ready:
        os._exit(1)
    _Server(sock, parent_pid, watch=not armed).serve()


class _Server:
    """The fork loop on one socket: requests in, pids out, exit codes on each child's status pipe."""

    def __init__(self, sock: socket.socket, parent_pid: int, *, watch: bool) -> None:
        self.sock = sock
        self.parent_pid = parent_pid
        self.watch = watch  # no parent-death signal armed: poll os.getppid() (no thread: see the module doc)
        self.children: dict[int, int] = {}  # pid -> the write end of its status pipe
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes the select through the wakeup fd

    def serve(self) -> None:
        while True:
            ready, _, _ = select.select([self.sock, self.wake_r], [], [], POLL_S)
            if self.wake_r in ready:
                os.read(self.wake_r, 4096)
            self._reap()
            if self.watch and os.getppid() != self.parent_pid:
                os._exit(1)
            if self.sock in ready:
                try:
                    data, fds, _, _ = socket.recv_fds(self.sock, MAX_MESSAGE, len(FD_NAMES))
                except OSError:
                    data, fds = b"", []
                if not data:  # the parent closed its end or died: so do we, and our children with us
                    os._exit(0)
                self._fork(pickle.loads(data), dict(zip(FD_NAMES, fds)))

    def _reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            fd = self.children.pop(pid, None)
            if fd is not None:
                try:
                    os.write(fd, str(os.waitstatus_to_exitcode(status)).encode())
                except OSError:
                    pass
                os.close(fd)

    def _fork(self, request: dict[str, Any], fds: dict[str, int]) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            pid = fork()
        except OSError as exc:
            _close(fds.values())
            self.sock.send(pickle.dumps({"error": f"fork failed: {exc}"}))
            return
        if pid == 0:
            try:
                self._become_child(request, fds)
            finally:
                os._exit(1)  # _become_child never returns
        self.children[pid] = fds.pop("status")
        _close(fds.values())
        self.sock.send(pickle.dumps({"pid": pid}))

    def _become_child(self, request: dict[str, Any], fds: dict[str, int]) -> None:
        """In the forked child: the process a cold start would have made; runs the entry, then exits."""
        template_pid = os.getppid()
        for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
            os.dup2(fds[name], fd)
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        self.sock.close()
        close_all_but(fds["channel"])  # as subprocess's close_fds: the template's, the other children's
        if request["new_session"]:
            os.setsid()
        if not _arm_parent_death_signal() or os.getppid() != template_pid:
            os._exit(1)  # no way to die with the template (not Linux), or it is gone already
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        os.umask(request["umask"])
        if "numpy" in sys.modules:  # a cold process seeds it from the OS: so does each child, not as its template
            sys.modules["numpy"].random.seed()
        if request["worker_template"]:
            _start_worker_template()
        module, _, function = request["entry"].partition(":")
        set_command_line(f"from {module} import {function}; {function}({fds['channel']})")
        run_entry(request["entry"], fds["channel"])


def run_entry(entry: str, fd: int) -> None:
    """Call ``FUNC(fd)`` of ``"MODULE:FUNC"`` and exit as ``python -c`` would: 0, the SystemExit code, or 1."""
    code: Any = 0
    try:
        module, _, function = entry.partition(":")
        getattr(importlib.import_module(module), function)(fd)
    except SystemExit as exc:
        code = exc.code
    except BaseException:  # noqa: BLE001 - printed on the child's stderr, as the interpreter would
        traceback.print_exc()
        code = 1
    try:
        threading._shutdown()  # type: ignore[attr-defined]  # wait for non-daemon threads, as at exit
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code if isinstance(code, int) else (0 if code is None else 1))


def _start_worker_template() -> None:
    """Fork this new child's own template (for its rollout workers), before any code of the user runs here."""
    from rltune import _warm

    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    parent_pid = os.getpid()
    pid = fork()
    if pid == 0:
        mine.close()
        close_all_but(theirs.fileno())
        set_command_line(f"from rltune._warm_server import template_entry  # the template of process {parent_pid}")
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if not _arm_parent_death_signal() or os.getppid() != parent_pid:
            os._exit(1)
        _Server(theirs, parent_pid, watch=False).serve()
    theirs.close()
    _warm.attach_local_template(mine, pid)


def set_command_line(code: str) -> None:
    """Show this process as ``python -c CODE`` (``ps``, ``/proc/PID/cmdline``), as a cold start of it would be.

    A fork keeps its template's command line; this writes over the argument
    strings in place (the template's is padded long enough for it), as
    ``setproctitle`` does. Best effort: nothing else depends on it.
    """
    try:
        import ctypes

        with open("/proc/self/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        start, end = int(fields[45]), int(fields[46])  # arg_start, arg_end (proc(5), fields 48 and 49)
        text = b"\0".join([os.fsencode(sys.executable), b"-c", code.encode()])[: end - start - 1]
        ctypes.memmove(start, text.ljust(end - start, b"\0"), end - start)
    except (OSError, ValueError, IndexError, AttributeError):
        pass


def fork() -> int:
    """``os.fork`` without Python 3.12's warning about a multi-threaded parent: OpenBLAS's idle pool is the
    only other thread here, and its own ``pthread_atfork`` handler stops it around the fork."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return os.fork()


def close_all_but(fd: int) -> None:
    """Close every descriptor but stdin, stdout, stderr and ``fd``."""
    os.closerange(3, fd)
    os.closerange(fd + 1, os.sysconf("SC_OPEN_MAX"))


def _close(fds: Any) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass
