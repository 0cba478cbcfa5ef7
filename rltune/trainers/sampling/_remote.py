"""Rollout worker processes: a RolloutWorker in a fresh Python process, driven through a socket.

The process is started with ``subprocess`` (not ``multiprocessing``'s spawn,
which re-runs the user's ``__main__`` script and so demands an
``if __name__ == "__main__"`` guard that RLlib users do not write), or
forked from the warm template of the study trial it belongs to
(:func:`rltune._warm.local_template`), on a
:class:`rltune._ipc.Channel`. Requests are the typed messages of
:mod:`rltune.trainers.sampling._worker_messages`, cloudpickled so that lambdas and
functions from ``__main__`` reach the worker, and run by type
(:func:`~rltune.trainers.sampling._worker_messages.handle`); replies are
:class:`~rltune._ipc.Reply` or :class:`~rltune._ipc.RemoteError`. A worker exits
when its pipe closes, and dies with the trainer's process even while an env
step hangs (:mod:`rltune._parent_death`); it ignores SIGINT so that Ctrl-C is
handled once, by the trainer. Every call is bounded by ``sample_timeout_s``
(:class:`RemoteWorker`).
"""

from __future__ import annotations

import logging
import os
import pickle
import signal
import subprocess
import time
import traceback
from typing import Any

import cloudpickle

from rltune import _warm
from rltune._ipc import (CLOUDPICKLE, PICKLE_OR_CLOUDPICKLE, Channel, ChannelClosed, Reply, Shutdown, receive_init,
                         remote_error, send_init)
from rltune.errors import RLTuneError, WorkerError
from rltune.trainers.sampling._worker_messages import WorkerRequest, handle

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
    channel, payload = receive_init(fd, PICKLE_OR_CLOUDPICKLE)
    _worker_main(channel, payload)


def _worker_main(channel: Channel, payload: bytes) -> None:
    try:
        init = pickle.loads(payload)
    except BaseException as exc:
        _reply_error(channel, exc)
        return
    config = init["config"]
    setup_process(config.log_level, config.torch_num_threads)
    from rltune.trainers.sampling._rollout_worker import RolloutWorker

    try:
        worker = RolloutWorker(**init)
    except BaseException as exc:
        _reply_error(channel, exc)
        return
    try:
        channel.send(Reply(None))  # ready
        while True:
            message = channel.receive()
            if isinstance(message, Shutdown):
                worker.stop()
                channel.send(Reply(None))
                break
            try:
                reply = channel.encode(Reply(handle(worker, message)))
            except BaseException as exc:
                _reply_error(channel, exc)
                continue
            channel.send_bytes(reply)
    except ChannelClosed:  # the trainer is gone: so is this worker
        pass


def _reply_error(channel: Channel, exc: BaseException) -> None:
    try:
        channel.send(remote_error(exc, traceback.format_exc()))
    except ChannelClosed:
        pass


START = "its start (building its envs and policy)"
START_TIMEOUT_S = 300.0  # the least a worker's start may take (it imports torch and builds every env), as the study's env check
TERM_GRACE_S = 2.0  # a stuck worker gets SIGTERM (its env may stop a simulator of its own), then SIGKILL


class RemoteWorker:
    """Handle on one rollout worker process: start it, call it within ``timeout_s``, stop it.

    Each request is answered within ``timeout_s`` seconds of being sent (the
    start within ``max(timeout_s, START_TIMEOUT_S)``), or the worker is
    killed and the wait ends in :class:`WorkerTimeoutError`; requests sent to
    several workers at once run in parallel, each against its own deadline.
    """

    def __init__(self, worker_index: int, init: dict[str, Any], *, env_name: str = "?", timeout_s: float = 60.0) -> None:
        self.worker_index = worker_index
        self.env_name = env_name
        self.timeout_s = timeout_s
        self._payload = cloudpickle.dumps(init)
        self.restarts = 0
        self._start()

    def _start(self) -> None:
        self.process, self._channel = _warm.spawn(  # forked from a warm trial's template, or cold
            "rltune.trainers.sampling._remote:worker_entry", template=_warm.local_template(), encoder=CLOUDPICKLE,
            env=dict(os.environ, RLTUNE_WORKER_INDEX=str(self.worker_index)),
        )
        send_init(self._channel, self._payload)
        self._pending = True  # the ready message
        self._awaited = (START, time.monotonic() + max(self.timeout_s, START_TIMEOUT_S))

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

    def send(self, request: WorkerRequest) -> None:
        """Ask the worker to run ``request``; its answer is due within ``timeout_s``."""
        what = request.what if isinstance(request, WorkerRequest) else f"a {type(request).__name__} message"
        self._awaited = (what, time.monotonic() + self.timeout_s)
        try:
            self._channel.send(request)
        except ChannelClosed as exc:
            raise self._died() from exc

    def receive(self) -> Any:
        """The reply to the oldest request; raises the worker's own exception, WorkerDiedError if it died, or
        WorkerTimeoutError (after killing it) if the reply is not there by the request's deadline."""
        what, deadline = self._awaited
        try:
            if not self._channel.poll(max(0.0, deadline - time.monotonic())):
                raise self._timed_out(what)
            reply = self._channel.receive()
        except ChannelClosed as exc:
            raise self._died() from exc
        if isinstance(reply, Reply):
            return reply.value
        exc, text = reply.exception, reply.traceback
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

    def call(self, request: WorkerRequest) -> Any:
        """``send`` then ``receive``."""
        self.wait_ready()
        self.send(request)
        return self.receive()

    def _where(self) -> str:
        return f"rollout worker {self.worker_index} (pid {self.process.pid}) of env {self.env_name!r}"

    def _died(self) -> "WorkerDiedError":
        try:
            code = self.process.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            code = None
        return WorkerDiedError(
            f"{self._where()} died" + (f" with exit code {code}" if code is not None else ""),
            "set 'recreate_failed_workers': True to restart dead workers",
        )

    def _timed_out(self, what: str) -> "WorkerTimeoutError":
        self.kill()
        limit = max(self.timeout_s, START_TIMEOUT_S) if what == START else self.timeout_s
        return WorkerTimeoutError(
            f"{self._where()} did not answer {what} within {limit:g} s (sample_timeout_s: {self.timeout_s:g}); "
            "it was killed",
            "raise 'sample_timeout_s' if its envs need longer; set 'recreate_failed_workers': True to replace "
            "a stuck worker and go on",
        )

    def stop(self, timeout: float = 5.0) -> None:
        """Ask the worker to close its envs and exit; kill it if it does not within ``timeout`` (each step)."""
        if self.is_alive():
            try:
                if self._pending and self._channel.poll(timeout):
                    self._channel.receive_bytes()  # the ready message
                self._pending = False
                self._channel.send(Shutdown())
                if self._channel.poll(timeout):
                    self._channel.receive_bytes()
            except ChannelClosed:
                pass
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
        self.kill()

    def kill(self) -> None:
        """End the process now (SIGTERM, then SIGKILL after a short grace) and release the pipe."""
        if self.is_alive():
            self.process.terminate()
            try:
                self.process.wait(timeout=TERM_GRACE_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
        try:
            self.process.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            logger.warning("rollout worker %d (pid %d) did not exit after SIGKILL", self.worker_index, self.pid)
        self._channel.close()


class WorkerDiedError(WorkerError):
    """A rollout worker process exited or was killed: ``what`` happened, and ``hint``, the way out."""

    def __init__(self, what: str, hint: str) -> None:
        super().__init__(f"{what} ({hint})")
        self.what = what
        self.hint = hint

    def __reduce__(self) -> tuple[Any, ...]:  # picklable (a trial process sends its errors as text, but still)
        return type(self), (self.what, self.hint)


class WorkerTimeoutError(WorkerDiedError):
    """A rollout worker did not answer a call within ``sample_timeout_s`` and was killed."""
