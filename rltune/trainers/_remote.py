"""Rollout worker processes: a RolloutWorker in a fresh Python process, driven through a socket.

The process is started with ``subprocess`` (not ``multiprocessing``'s spawn,
which re-runs the user's ``__main__`` script and so demands an
``if __name__ == "__main__"`` guard that RLlib users do not write). Messages are cloudpickled ``(fn_or_method_name, args, kwargs)`` so that
lambdas and functions from ``__main__`` reach the worker; replies are
``("ok", value)`` or ``("err", exception, traceback_text)``. A worker exits
when its pipe closes, so it never outlives the trainer (even after SIGKILL);
it ignores SIGINT so that Ctrl-C is handled once, by the trainer.
"""

from __future__ import annotations

import logging
import os
import pickle
import signal
import socket
import subprocess
import sys
import traceback
from multiprocessing.connection import Connection
from typing import Any, Callable

import cloudpickle

from rltune.errors import RLTuneError, WorkerError

logger = logging.getLogger(__name__)


def setup_logging(log_level: str, *, in_users_process: bool = False) -> None:
    """Show log records of ``log_level`` and above, rltune's and the env code's, on stderr.

    In a worker process (rltune's own) a stderr handler is installed. In the
    user's process (``in_users_process``: the trainer, sampling there with
    ``num_workers: 0``) no handler is added, so that a ``logging.basicConfig``
    the user calls later still takes effect: with no logging configured yet,
    the root logger's level and that of logging's last-resort stderr handler
    are set; logging the user configured is left alone (only rltune's level is set).
    """
    level = logging.WARNING if log_level in ("WARN", "WARNING") else getattr(logging, log_level)
    root = logging.getLogger()
    if not in_users_process:
        logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(processName)s %(name)s: %(message)s")
        root.setLevel(level)
    elif not root.handlers:
        root.setLevel(level)
        if logging.lastResort is not None:
            logging.lastResort.setLevel(level)
    logging.getLogger("rltune").setLevel(level)


def set_compute_threads(num_threads: int | None) -> None:
    """Threads of torch's intra-op pool and of numpy's BLAS in this process (None: leave both as they are).

    Rollout inference runs in numpy (``_numpy_mlp.py``); OpenBLAS would
    otherwise start a thread per core for it in every worker process, and
    spin them between calls.
    """
    if not num_threads:
        return
    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(num_threads)
    threadpool_limits(limits=num_threads, user_api="blas")  # for the process's lifetime


def setup_process(log_level: str, torch_num_threads: int | None) -> None:
    """Logging and compute threads of a process that samples or learns."""
    setup_logging(log_level)
    set_compute_threads(torch_num_threads)


def worker_entry(fd: int) -> None:
    """Entry point of a worker process (``python -c``): read sys.path and the init payload, then serve."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    conn = Connection(fd)
    try:
        sys.path[:] = pickle.loads(conn.recv_bytes())
        payload = conn.recv_bytes()
    except (EOFError, OSError):
        return
    _worker_main(conn, payload)


def _worker_main(conn: Connection, payload: bytes) -> None:
    try:
        init = cloudpickle.loads(payload)
    except BaseException as exc:
        _reply_error(conn, exc)
        return
    config = init["config"]
    setup_process(config.log_level, config.torch_num_threads)
    from rltune.trainers._rollout_worker import RolloutWorker

    try:
        worker = RolloutWorker(**init)
    except BaseException as exc:
        _reply_error(conn, exc)
        return
    conn.send_bytes(cloudpickle.dumps(("ok", None)))
    while True:
        try:
            message = conn.recv_bytes()
        except (EOFError, OSError):
            break
        fn, args, kwargs = cloudpickle.loads(message)
        if fn is None:
            worker.stop()
            conn.send_bytes(cloudpickle.dumps(("ok", None)))
            break
        try:
            value = getattr(worker, fn)(*args, **kwargs) if isinstance(fn, str) else fn(worker, *args, **kwargs)
            reply = cloudpickle.dumps(("ok", value))
        except BaseException as exc:
            _reply_error(conn, exc)
            continue
        try:
            conn.send_bytes(reply)
        except (BrokenPipeError, OSError):
            break


def _reply_error(conn: Connection, exc: BaseException) -> None:
    text = traceback.format_exc()
    try:
        payload = cloudpickle.dumps(("err", exc, text))
        pickle.loads(payload)  # the exception must also unpickle on the other side
    except Exception:
        payload = cloudpickle.dumps(("err", RuntimeError(f"{type(exc).__name__}: {exc}"), text))
    try:
        conn.send_bytes(payload)
    except (BrokenPipeError, OSError):
        pass


class RemoteWorker:
    """Handle on one rollout worker process: start it, call it, stop it."""

    def __init__(self, worker_index: int, init: dict[str, Any]) -> None:
        self.worker_index = worker_index
        self._payload = cloudpickle.dumps(init)
        self.restarts = 0
        self._start()

    def _start(self) -> None:
        parent_sock, child_sock = socket.socketpair()
        child_fd = child_sock.fileno()
        self.process = subprocess.Popen(
            [sys.executable, "-c", f"from rltune.trainers._remote import worker_entry; worker_entry({child_fd})"],
            pass_fds=(child_fd,),
            env=dict(os.environ, RLTUNE_WORKER_INDEX=str(self.worker_index)),
        )
        child_sock.close()
        self._conn = Connection(parent_sock.detach())
        self._conn.send_bytes(pickle.dumps(list(sys.path)))
        self._conn.send_bytes(self._payload)
        self._pending = True  # the ready message

    def restart(self) -> None:
        """Kill the process if it still runs and start a new one with the same init."""
        self.kill()
        self.restarts += 1
        self._start()

    @property
    def pid(self) -> int:
        return self.process.pid

    def is_alive(self) -> bool:
        return self.process.poll() is None

    def send(self, fn: str | Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        """Ask the worker to run ``fn`` (a RolloutWorker method name, or ``fn(worker, ...)``)."""
        try:
            self._conn.send_bytes(cloudpickle.dumps((fn, args, kwargs)))
        except (BrokenPipeError, OSError) as exc:
            raise self._died() from exc

    def receive(self) -> Any:
        """The reply to the oldest request; raises the worker's own exception, or WorkerError if it died."""
        try:
            status, *rest = pickle.loads(self._conn.recv_bytes())
        except (EOFError, OSError) as exc:
            raise self._died() from exc
        if status == "ok":
            return rest[0]
        exc, text = rest
        if isinstance(exc, RLTuneError):
            raise exc
        raise WorkerError(
            f"rollout worker {self.worker_index} raised {type(exc).__name__}: {exc}\n"
            f"--- traceback in worker {self.worker_index} ---\n{text}"
        )

    def wait_ready(self) -> None:
        """Block until the worker has built its envs and policy (raises what it raised)."""
        if self._pending:
            self._pending = False
            self.receive()

    def call(self, fn: str | Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``send`` then ``receive``."""
        self.wait_ready()
        self.send(fn, *args, **kwargs)
        return self.receive()

    def _died(self) -> "WorkerDiedError":
        try:
            code = self.process.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            code = None
        return WorkerDiedError(
            f"rollout worker {self.worker_index} (pid {self.process.pid}) died"
            + (f" with exit code {code}" if code is not None else "")
            + " (set 'recreate_failed_workers': True to restart dead workers)"
        )

    def stop(self, timeout: float = 5.0) -> None:
        """Ask the worker to close its envs and exit; kill it if it does not."""
        if self.is_alive():
            try:
                if self._pending and self._conn.poll(timeout):
                    self._conn.recv_bytes()  # the ready message
                self._pending = False
                self._conn.send_bytes(cloudpickle.dumps((None, (), {})))
                if self._conn.poll(timeout):
                    self._conn.recv_bytes()
            except (BrokenPipeError, EOFError, OSError):
                pass
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
        self.kill()

    def kill(self) -> None:
        """Terminate the process now and release the pipe."""
        if self.is_alive():
            self.process.kill()
        try:
            self.process.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            logger.warning("rollout worker %d (pid %d) did not exit after SIGKILL", self.worker_index, self.pid)
        try:
            self._conn.close()
        except OSError:
            pass


class WorkerDiedError(WorkerError):
    """A rollout worker process exited or was killed."""
