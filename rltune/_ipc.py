"""How rltune's processes talk: one framing, typed messages, one error path.

Three channels, each between a parent and a child process started with
``subprocess`` (``python -c "from MODULE import FUNC; FUNC(fd)"`` with one end
of a socket pair as ``fd``; never ``multiprocessing``'s spawn, which re-runs
the user's ``__main__``), or forked from a warm template that imported the
same modules once (:mod:`rltune._warm`: trial and rollout-worker processes):

- a trainer and its **rollout workers** (``rltune.trainers.sampling._remote``): one
  message class per request in (``rltune.trainers.sampling._worker_messages``, run by
  type) and :class:`Shutdown`, :class:`Reply` / :class:`RemoteError` out;
- the orchestrator and a **trial process** (``rltune.orchestrator._trial_process``),
  and the env check before a study's first trial: :class:`TrialInit` first (the
  init payload), then :class:`Result`,
  :class:`CheckpointSaved`, :class:`Done`, :class:`Failed` (and
  :class:`EnvCheckFailed`) out, :class:`Continue` / :class:`Stop` / :class:`Exploit` in;
- the orchestrator and the study's **tracking process**
  (``rltune.tracking._process``): one message class per tracker call in,
  :class:`LogLine`, :class:`Progress`, :class:`Reconciled` and :class:`Closed` out.

Every child dies with its parent, SIGKILL included (:mod:`rltune._parent_death`,
armed by :func:`spawn` before the child imports anything), except the tracking
process, which records what its killed orchestrator had queued and then exits.

Framing: a :class:`Channel` wraps a ``multiprocessing.connection.Connection``
on the socket, whose ``send_bytes`` / ``recv_bytes`` prefix each frame with
its length; a frame is one pickled message (``cloudpickle`` where functions
of the user's ``__main__`` travel: :data:`CLOUDPICKLE` to the rollout workers,
:data:`PICKLE_OR_CLOUDPICKLE` back). Before any
message the parent sends two raw frames: its ``sys.path`` and the child's
init payload (:func:`send_init`, :func:`receive_init`).

One error path: a peer that closed its end, crashed or was killed is
:class:`ChannelClosed` on the next send or receive, whatever the OS said
(EOF, reset, broken pipe); a peer that reported an exception sends a message
(:class:`RemoteError`, :class:`Failed`) that the receiving side turns into
its own typed error in the one place that reads the channel.

Messages are frozen dataclasses pickled by reference to this module: both
ends run the same rltune (the child gets the parent's ``sys.path``), so no
versioning is needed. Add fields at the end, with defaults.
"""

from __future__ import annotations

import os
import pickle
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import IO, Any, Callable, ClassVar

from rltune._parent_death import spawn_arguments
from rltune._tracking_messages import (  # noqa: F401 - the tracking process's messages, here with the others
    TrackingInit, OpenTrial, LogResult, LogCheckpoint, LogFiles, LogCurve, TagTrial, LogModel, LogSeedRuns, EndTrial, UpdateBest, Reconcile, DrawPlots, FinishStudy, CloseTracking, LogLine, Progress, Reconciled, Closed,
)

Encoder = Callable[[Any], bytes]


def _pickle_dumps(message: Any) -> bytes:
    return pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)


def _cloudpickle_dumps(message: Any) -> bytes:
    import cloudpickle  # only where callables travel (cloudpickle's output loads with plain pickle)

    return cloudpickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)


def _pickle_or_cloudpickle_dumps(message: Any) -> bytes:
    # What plain pickle can carry it pickles by reference, as cloudpickle would, without cloudpickle's
    # Python-level hook on every object of a batch. Only for a child's replies: its __main__ is rltune's
    # ``-c`` stub, whereas in the user's process plain pickle would send functions of the user's
    # __main__ by reference, which the child cannot import.
    try:
        return pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001 - a lambda, a local class, a class that came by value: cloudpickle
        return _cloudpickle_dumps(message)


PICKLE: Encoder = _pickle_dumps  # plain data (results, tracking calls)
CLOUDPICKLE: Encoder = _cloudpickle_dumps  # also functions and classes by value (calls to rollout workers)
PICKLE_OR_CLOUDPICKLE: Encoder = _pickle_or_cloudpickle_dumps  # a rollout worker's replies


class ChannelClosed(ConnectionError):
    """The peer process closed its end of the channel, crashed or was killed (EOF, reset or broken pipe)."""


# -- rollout workers -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Shutdown:
    """Close your envs, answer ``Reply(None)`` and exit."""


@dataclass(frozen=True)
class Reply:
    """What the worker's call returned (also ``Reply(None)``: ready, after the worker was built)."""

    value: Any = None


@dataclass(frozen=True)
class RemoteError:
    """The call (or building the worker) raised ``exception``; ``traceback`` is its text in the worker."""

    exception: BaseException
    traceback: str


def remote_error(exc: BaseException, traceback_text: str) -> RemoteError:
    """A :class:`RemoteError` that unpickles on the other side (else one carrying a RuntimeError in its place)."""
    message = RemoteError(exc, traceback_text)
    try:
        pickle.loads(_cloudpickle_dumps(message))
    except Exception:  # noqa: BLE001 - e.g. an exception whose __init__ needs other arguments
        message = RemoteError(RuntimeError(f"{type(exc).__name__}: {exc}"), traceback_text)
    return message


# -- trial processes (and the env check) ---------------------------------------------------------
@dataclass(frozen=True)
class TrialInit:
    """What a trial process starts from: its init payload (cloudpickled: ``ref`` and env creators may be
    functions of the user's ``__main__``), sent once by :func:`send_init` before any message."""

    kind: str  # "trainer" (``ref``: a trainer name or class) or "function" (``ref``: a callable or "module:name")
    ref: Any
    config: dict[str, Any]
    trial_dir: str
    trial_number: int | None = 0  # None: a trial of no study (its results carry no trial_number)
    seed: int | None = None
    restore: str | None = None  # the checkpoint to restore, or None: from scratch
    start_iteration: int = 0  # the restored checkpoint's iteration
    checkpoint_freq: int = 0
    keep_checkpoints_num: int | None = None
    tensorboard: bool = False
    env_registrations: dict[str, Any] = field(default_factory=dict)  # register_env creators to install first
    seed_group: "SeedGroup | None" = None  # seeds_per_trial > 1: this process runs the seeds (_seed_group)


@dataclass(frozen=True)
class SeedGroup:
    """A trial judged on several seeds (``seeds_per_trial``): how its process runs them and aggregates them."""

    seeds: tuple[int, ...]  # the seed of each run, in order
    mode: str = "parallel"  # "parallel" (one process each, at once) or "race" (one after another)
    aggregate: str = "mean"  # mean | median | iqm | min (the worst seed)
    metric: str = "episode_reward_mean"
    direction: str = "max"  # the study's mode
    stop: dict[str, Any] | None = None  # race: the study's stop criteria, judged per seed in the group
    checkpoint_at_end: bool = True


@dataclass(frozen=True)
class Result:
    """One reported result of a trial; the trial then waits for :class:`Continue` or :class:`Stop`."""

    result: dict[str, Any]


@dataclass(frozen=True)
class CheckpointSaved:
    """The trial committed a checkpoint of ``iteration`` at ``path``."""

    path: str
    iteration: int


@dataclass(frozen=True)
class Done:
    """The trainable returned or stopped when told to (the env check: every env built and passed)."""


@dataclass(frozen=True)
class Failed:
    """The trainable raised; ``traceback`` is its text, ``kind`` the disk error behind it (``"no_space"``, ...) or None."""

    traceback: str
    kind: str | None = None


@dataclass(frozen=True)
class Continue:
    """The orchestrator's answer to a result: go on (``want_checkpoint``: save one of this iteration first)."""

    want_checkpoint: bool = False


@dataclass(frozen=True)
class Stop:
    """The orchestrator's answer to a result: end the trial (``want_checkpoint``: write a last one first)."""

    reason: str
    want_checkpoint: bool


@dataclass(frozen=True)
class Exploit:
    """The orchestrator's answer to a result (PBT): restore ``checkpoint`` (another trial's), go on with ``config``.

    The new config's hyperparameters apply after the restore (the checkpoint
    carries weights and state, never the config it was trained with).
    """

    checkpoint: str
    config: dict[str, Any]


@dataclass(frozen=True)
class EnvCheckFailed:
    """The env check's answer when an env failed: ``kind`` "ConfigError" or "EnvError", ``when`` which config.

    ``where`` names what a ConfigError is about: the env, or the config
    (a ``multiagent`` block that does not fit the env's agents).
    """

    kind: str
    when: str
    problems: list[str]
    where: str = "env"


# -- the channel -------------------------------------------------------------------------------------
class Channel:
    """One end of a socket between two rltune processes: a pickled message per length-prefixed frame.

    ``encoder`` pickles outgoing messages (:data:`PICKLE` or :data:`CLOUDPICKLE`);
    incoming ones are read with ``pickle.loads``. Every OS error of the socket
    is :class:`ChannelClosed`; an outgoing message that cannot be pickled raises
    pickle's own error (nothing was sent). ``fileno()`` makes a channel usable
    with ``multiprocessing.connection.wait``.
    """

    def __init__(self, conn: Connection, encoder: Encoder = PICKLE) -> None:
        self.conn = conn
        self.encode = encoder

    @classmethod
    def from_fd(cls, fd: int, encoder: Encoder = PICKLE) -> "Channel":
        return cls(Connection(fd), encoder)

    def send(self, message: Any) -> None:
        """Send one message; ChannelClosed if the peer is gone."""
        self.send_bytes(self.encode(message))

    def send_bytes(self, data: bytes) -> None:
        """Send one message already encoded (e.g. pickled on another thread than the sender's)."""
        try:
            self.conn.send_bytes(data)
        except (OSError, EOFError, ValueError) as exc:  # ValueError: this end was closed
            raise ChannelClosed(f"the peer process is gone ({type(exc).__name__}: {exc})") from exc

    def receive_bytes(self) -> bytes:
        """The next frame as it came; blocks. ChannelClosed if the peer is gone."""
        try:
            return self.conn.recv_bytes()
        except (OSError, EOFError, ValueError) as exc:
            raise ChannelClosed(f"the peer process is gone ({type(exc).__name__}: {exc})") from exc

    def receive(self) -> Any:
        """The next message; blocks. ChannelClosed if the peer is gone; a message that does not unpickle
        here raises what ``pickle.loads`` raised."""
        return pickle.loads(self.receive_bytes())

    def poll(self, timeout: float | None = 0.0) -> bool:
        """Whether a frame (or the peer's close, seen on the next receive) is there to read within ``timeout``."""
        try:
            return self.conn.poll(timeout)
        except (OSError, EOFError, ValueError):
            return True  # the next receive raises ChannelClosed

    def fileno(self) -> int:
        return self.conn.fileno()

    def close(self) -> None:
        try:
            self.conn.close()
        except OSError:
            pass


# -- starting a child ----------------------------------------------------------------------------------
def spawn(
    entry: str,
    *,
    encoder: Encoder = PICKLE,
    env: dict[str, str] | None = None,
    stdout: IO[bytes] | int | None = None,
    stderr: IO[bytes] | int | None = None,
    stdin: IO[bytes] | int | None = None,
    new_session: bool = False,
    outlive_parent: bool = False,
) -> tuple[subprocess.Popen, Channel]:
    """Start ``entry`` (``"pkg.module:function"``, called with the child's socket fd); its process and channel.

    The child dies with this process (:mod:`rltune._parent_death`), even
    SIGKILLed, unless ``outlive_parent``: for a child that finishes its own
    work after its parent is gone and then exits (the tracking process).
    """
    module, _, function = entry.partition(":")
    parent_sock, child_sock = socket.socketpair()
    child_fd = child_sock.fileno()
    guard = "" if outlive_parent else \
        "from rltune._parent_death import die_with_parent; die_with_parent(%d, %r); " % spawn_arguments()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-c", f"{guard}from {module} import {function}; {function}({child_fd})"],
            pass_fds=(child_fd,), stdin=stdin, stdout=stdout, stderr=stderr,
            start_new_session=new_session, env=env,
        )
    except BaseException:
        parent_sock.close()
        raise
    finally:
        child_sock.close()
    return proc, Channel(Connection(parent_sock.detach()), encoder)


def send_init(channel: Channel, payload: bytes) -> None:
    """Hand the child this process's ``sys.path`` and ``payload`` (a child already gone is seen when read)."""
    try:
        channel.send_bytes(pickle.dumps(list(sys.path)))
        channel.send_bytes(payload)
    except ChannelClosed:
        pass


def receive_init(fd: int, encoder: Encoder = PICKLE) -> tuple[Channel, bytes]:
    """In the child: its channel, with ``sys.path`` set as the parent's; the payload. Exits if the parent is gone."""
    channel = Channel.from_fd(fd, encoder)
    try:
        sys.path[:] = pickle.loads(channel.receive_bytes())
        return channel, channel.receive_bytes()
    except ChannelClosed:
        os._exit(1)


__all__ = [
    "CLOUDPICKLE", "Channel", "ChannelClosed", "CheckpointSaved", "Closed", "CloseTracking", "Continue",
    "Done", "DrawPlots", "EndTrial", "EnvCheckFailed", "Exploit", "Failed", "LogCheckpoint", "LogCurve", "LogFiles",
    "LogLine", "LogModel", "LogSeedRuns", "LogResult", "OpenTrial", "PICKLE", "PICKLE_OR_CLOUDPICKLE", "Reconcile", "RemoteError",
    "Reply", "Result", "SeedGroup", "Shutdown", "Stop", "TagTrial", "TrackingInit", "TrialInit", "UpdateBest", "receive_init",
    "remote_error", "send_init", "spawn",
]
