"""A child process of the orchestrator on a socket of its own: started, handed its ``sys.path`` and payload.

The trial processes and the env check before a study's first trial start
the same way: ``python -c "from MODULE import FUNC; FUNC(fd)"`` with one end
of a socket pair as ``fd`` (so user scripts need no ``__main__`` guard), in a
session of their own (Ctrl-C reaches the orchestrator only). The parent then
sends its ``sys.path`` and one payload; the child reads both first.
"""

from __future__ import annotations

import os
import pickle
import socket
import subprocess
import sys
from multiprocessing.connection import Connection
from typing import IO


def spawn(
    entry: str, *, stdout: IO[bytes] | int, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen, Connection]:
    """Start ``entry`` (``"pkg.module:function"``, called with the child's socket fd); its process and socket.

    The child's stdout and stderr both go to ``stdout``.
    """
    module, _, function = entry.partition(":")
    parent_sock, child_sock = socket.socketpair()
    child_fd = child_sock.fileno()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-c", f"from {module} import {function}; {function}({child_fd})"],
            pass_fds=(child_fd,), stdin=subprocess.DEVNULL, stdout=stdout, stderr=subprocess.STDOUT,
            start_new_session=True, env=env,
        )
    finally:
        child_sock.close()
    return proc, Connection(parent_sock.detach())


def send_init(conn: Connection, payload: bytes) -> None:
    """Hand the child this process's ``sys.path`` and ``payload`` (a child already gone is seen when read)."""
    try:
        conn.send_bytes(pickle.dumps(list(sys.path)))
        conn.send_bytes(payload)
    except (BrokenPipeError, OSError):
        pass


def receive_init(fd: int) -> tuple[Connection, bytes]:
    """In the child: its socket, with ``sys.path`` set as the parent's; the payload. Exits if the parent is gone."""
    conn = Connection(fd)
    try:
        sys.path[:] = pickle.loads(conn.recv_bytes())
        return conn, conn.recv_bytes()
    except (EOFError, OSError):
        os._exit(1)


__all__ = ["receive_init", "send_init", "spawn"]
