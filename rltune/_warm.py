"""Warm start: child processes forked from a template that imported torch, gymnasium and rltune once.

A cold start of a trial or rollout-worker process (``python -c``, see
:func:`rltune._ipc.spawn`) spends about 2.5 s importing. A :class:`Template`
(:mod:`rltune._warm_server`) pays that once per orchestrator; each child is
then a ``fork`` of it that becomes what the cold start would have made: the
same entry called with its channel's fd, the same stdio (C-level writes
included), environment, working directory, session, parent-death binding
(SIGKILL when the template goes, which goes with this process), and exit code
(read by :class:`WarmProcess`, a ``Popen`` look-alike). A warm trial process
forks a template of its own for its rollout workers (:func:`local_template`),
so they start warm too and stay in the trial's process group.

``RLTUNE_WARM_START=0`` turns it off (every child starts cold, as before).
A child starts cold as well when no template can serve it: not Linux, or
the template failed to import. A child whose environment differs from its
template's in a variable read when an interpreter or library starts
(``PYTHON*``, locale, thread-pool sizes, ``LD_*``: :func:`startup_env`) gets
a template started with its values (:func:`template_for`, up to
``MAX_TEMPLATES`` of them per process).
One difference remains: a warm child's parent is the template, not the
process that asked for it (``os.getppid()``).
"""

from __future__ import annotations

import atexit
import logging
import os
import pickle
import select
import signal
import socket
import subprocess
import sys
import threading
from multiprocessing.connection import Connection
from typing import IO, Any

from rltune._ipc import PICKLE, Channel, Encoder
from rltune._ipc import spawn as cold_spawn
from rltune._parent_death import spawn_arguments
from rltune._warm_server import FD_NAMES, MAX_MESSAGE

logger = logging.getLogger(__name__)

ENV_VAR = "RLTUNE_WARM_START"
COMMAND_LINE_ROOM = 400  # characters of the template's command line: each child writes its own over it
READY_TIMEOUT_S = 300.0  # the longest :meth:`Template.wait_ready` waits by default (importing torch on a loaded machine)
# Variables read when an interpreter or a preloaded library starts: a child whose values differ starts cold.
# Not CUDA_*: the template never initializes CUDA (a trial given its own CUDA_VISIBLE_DEVICES starts warm).
_STARTUP_PREFIXES = ("PYTHON", "LC_", "LANG", "OMP_", "KMP_", "GOMP_", "MKL_", "OPENBLAS_", "GOTO", "BLIS_",
                     "VECLIB_", "NUMEXPR_", "TORCH", "PYTORCH_", "LD_", "MALLOC_")
# PYTHONUNBUFFERED: the template runs unbuffered (a child asking for buffering gets it unbuffered);
# KMP_DUPLICATE_LIB_OK: threadpoolctl sets it in a trainer's process; read only when a second libiomp loads.
_HANDLED = {"PYTHONUNBUFFERED", "KMP_DUPLICATE_LIB_OK"}


def enabled() -> bool:
    """Whether children may start warm (``RLTUNE_WARM_START`` unset or not ``0``/``false``/``no``/``off``)."""
    return sys.platform.startswith("linux") and \
        os.environ.get(ENV_VAR, "1").strip().lower() not in ("0", "false", "no", "off")


def _waits() -> bool:
    """``RLTUNE_WARM_START=wait``: a child waits for a template still importing rather than start cold."""
    return os.environ.get(ENV_VAR, "").strip().lower() == "wait"


def startup_env(env: dict[str, str]) -> dict[str, str]:
    """The variables of ``env`` that an interpreter or library reads when it starts (see the module doc)."""
    return {k: v for k, v in env.items() if k.startswith(_STARTUP_PREFIXES) and k not in _HANDLED}


class WarmProcess:
    """A child forked by a template: the part of ``subprocess.Popen`` that rltune uses (pid, poll, wait, signals).

    Its exit code comes on a pipe from the template, which reaps it; the
    pipe closing without one means the template died, and the child with it
    (SIGKILL).
    """

    def __init__(self, pid: int, status_fd: int, args: str) -> None:
        self.pid = pid
        self.args = args
        self.returncode: int | None = None
        self._status_fd = status_fd

    def poll(self) -> int | None:
        if self.returncode is None and select.select([self._status_fd], [], [], 0)[0]:
            self._read_status()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not select.select([self._status_fd], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired(self.args, timeout)
            self._read_status()
        return self.returncode  # type: ignore[return-value]

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def _read_status(self) -> None:
        data = b""
        while chunk := os.read(self._status_fd, 64):
            data += chunk
        os.close(self._status_fd)
        self.returncode = int(data) if data else -signal.SIGKILL

    def __del__(self) -> None:
        if self.returncode is None:
            try:
                os.close(self._status_fd)
            except OSError:
                pass


class Template:
    """A template process (started, or attached to when this process forked it) and the forks it makes."""

    def __init__(self, sock: socket.socket, proc: Any, fingerprint: dict[str, str], *, ready: bool) -> None:
        self._sock = sock
        self._proc = proc
        self.fingerprint = fingerprint
        self._ready = ready
        self.failed: str | None = None  # why it serves no more
        self.restartable = True  # it died (start another), rather than could not import or fork
        self._lock = threading.Lock()

    @classmethod
    def start(cls, preload: list[str], startup: dict[str, str] | None = None) -> "Template":
        """Start a template that imports ``preload``; it gets ready in the background (see :meth:`spawn`).

        ``startup``: the start-up variables (:func:`startup_env`) it runs
        with, in place of this process's (default: this process's).
        """
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = dict(os.environ)
        if startup is not None:
            env = {k: v for k, v in env.items() if k not in startup_env(env)} | startup
        env["PYTHONUNBUFFERED"] = "1"
        code = ("from rltune._warm_server import template_entry; template_entry(%d, %d, %r)"
                % (theirs.fileno(), *spawn_arguments())).ljust(COMMAND_LINE_ROOM)  # room for a child's own
        try:
            proc = subprocess.Popen([sys.executable, "-c", code], pass_fds=(theirs.fileno(),),
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                    start_new_session=True, env=env)  # Ctrl-C is not for it
        except BaseException:
            mine.close()
            raise
        finally:
            theirs.close()
        mine.send(pickle.dumps({"sys_path": list(sys.path), "preload": list(preload)}))
        return cls(mine, proc, startup_env(env), ready=False)

    def usable(self) -> bool:
        return self.failed is None

    def spawn(self, entry: str, *, env: dict[str, str], stdio: tuple[int, int, int], new_session: bool,
              worker_template: bool) -> tuple[WarmProcess, socket.socket] | None:
        """Fork ``entry``; its process and the parent's end of its socket, or None: start it cold (the template
        is still importing, or cannot serve this child)."""
        if startup_env(env) != self.fingerprint:
            return None
        request = {"entry": entry, "env": env, "cwd": os.getcwd(), "umask": _umask(), "new_session": new_session,
                   "worker_template": worker_template}
        with self._lock:
            if not self._check_ready(READY_TIMEOUT_S if _waits() else 0):  # still importing: start cold
                return None
            parent_sock, child_sock = socket.socketpair()
            status_r, status_w = os.pipe()
            try:
                fds = dict(zip(FD_NAMES, (child_sock.fileno(), status_w, *stdio)))
                socket.send_fds(self._sock, [pickle.dumps(request)], [fds[n] for n in FD_NAMES])
                reply = pickle.loads(self._sock.recv(MAX_MESSAGE) or pickle.dumps({"error": "the template died"}))
            except OSError as exc:
                reply = {"error": f"{type(exc).__name__}: {exc}"}
            finally:
                child_sock.close()
                os.close(status_w)
            if "error" in reply:
                self.restartable = not reply["error"].startswith("fork failed")
                self._fail(reply["error"])
                os.close(status_r)
                parent_sock.close()
                return None
        return WarmProcess(reply["pid"], status_r, entry), parent_sock

    def wait_ready(self, timeout: float | None = READY_TIMEOUT_S) -> bool:
        """Whether the template has imported its modules and serves, waiting up to ``timeout`` s for it."""
        with self._lock:
            return self._check_ready(timeout)

    def _check_ready(self, timeout: float | None) -> bool:
        if not self._ready and self.failed is None:
            if not select.select([self._sock], [], [], timeout)[0]:
                return False
            reply = pickle.loads(self._sock.recv(MAX_MESSAGE) or pickle.dumps({"error": "it died while importing"}))
            if "error" in reply:
                self.restartable = False
                self._fail(reply["error"])
            self._ready = self.failed is None
        return self._ready

    def _fail(self, why: str) -> None:
        if self.failed is None:
            logger.warning("the warm-start template stopped serving; processes start cold from now on: %s", why)
            self.failed = why
            self.close()

    def close(self) -> None:
        """Close the socket: the template exits (and kills any child still running)."""
        try:
            self._sock.close()
        except OSError:
            pass
        if self._proc is not None:
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()


# A template per preload list and set of start-up variables: a process whose environment changed after its
# template started (torch.compile sets TORCHINDUCTOR_CACHE_DIR in it, a user sets OMP_NUM_THREADS) gets a new one
# rather than cold children from then on. The old ones stay: closing a template kills its running children.
MAX_TEMPLATES = 4
_templates: dict[tuple[tuple[str, ...], tuple[tuple[str, str], ...]], Template] = {}
_templates_lock = threading.Lock()
_local: Template | None = None  # in a warm child: the template it forked for its own children


def template_for(preload: list[str], env: dict[str, str] | None = None) -> Template | None:
    """This process's template preloading ``preload`` for children of environment ``env`` (default: this
    process's), started now if need be; None when warm start is off, or the child is to start cold."""
    if not enabled():
        return None
    startup = startup_env(dict(os.environ if env is None else env))
    key = (tuple(preload), tuple(sorted(startup.items())))
    with _templates_lock:
        template = _templates.get(key)
        if template is None or not template.usable():
            if template is not None and not template.restartable:
                return None  # it could not import (or fork): do not pay its start again
            if template is None and sum(t.usable() for t in _templates.values()) >= MAX_TEMPLATES:
                return None  # children of ever new environments: start them cold, not a template each
            _templates[key] = template = Template.start(list(preload), startup)
        return template


def local_template() -> Template | None:
    """The template a warm child forked for its own children (a trial's rollout workers), or None."""
    return _local if _local is not None and _local.usable() and enabled() else None


def attach_local_template(sock: socket.socket, pid: int) -> None:
    """In a warm child: take the template it just forked (:mod:`rltune._warm_server`) as its :func:`local_template`."""
    global _local
    _local = Template(sock, None, startup_env(dict(os.environ)), ready=True)


Stream = IO[bytes] | int | None


def spawn(entry: str, *, template: Template | None, encoder: Encoder = PICKLE, env: dict[str, str] | None = None,
          stdout: Stream = None, stderr: Stream = None, stdin: Stream = None, new_session: bool = False,
          worker_template: bool = False) -> tuple[Any, Channel]:
    """:func:`rltune._ipc.spawn`, forked from ``template`` when it can serve the child (else started cold).

    ``worker_template``: the child forks a template of its own for its own
    children (a trial for its rollout workers).
    """
    if template is not None and template.usable() and subprocess.PIPE not in (stdin, stdout, stderr):
        opened: list[int] = []
        try:
            stdio = (_fd(stdin, 0, opened, None), _fd(stdout, 1, opened, None))
            stdio = (*stdio, _fd(stderr, 2, opened, stdio[1]))
            started = template.spawn(entry, env=dict(os.environ if env is None else env), stdio=stdio,
                                     new_session=new_session, worker_template=worker_template)
        finally:
            for fd in opened:
                os.close(fd)
        if started is not None:
            proc, sock = started
            return proc, Channel(Connection(sock.detach()), encoder)
    return cold_spawn(entry, encoder=encoder, env=env, stdout=stdout, stderr=stderr, stdin=stdin,
                      new_session=new_session)


def _fd(stream: Stream, default: int, opened: list[int], stdout_fd: int | None) -> int:
    """The descriptor a child's stdin/stdout/stderr gets from ``stream`` as ``subprocess.Popen`` reads it."""
    if stream is None:
        return default
    if stream == subprocess.DEVNULL:
        opened.append(os.open(os.devnull, os.O_RDWR))
        return opened[-1]
    if stream == subprocess.STDOUT and stdout_fd is not None:
        return stdout_fd
    if isinstance(stream, int):
        return stream
    return stream.fileno()


def _umask() -> int:
    """This process's umask, read without setting it (``os.umask`` would change it for every thread a moment)."""
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1], 8) for line in f if line.startswith("Umask:"))
    except (OSError, StopIteration, ValueError):
        return 0o022


@atexit.register
def _close_templates() -> None:
    with _templates_lock:
        for template in _templates.values():
            template.close()
        _templates.clear()
