"""A child process of the orchestrator on a channel of its own: started, handed its ``sys.path`` and payload.

The trial processes and the env check before a study's first trial start
the same way (:func:`rltune._ipc.spawn`), in a session of their own (Ctrl-C
reaches the orchestrator only), with stdout and stderr in one file. The
parent then sends its ``sys.path`` and one payload; the child reads both
first (:func:`rltune._ipc.receive_init`).
"""

from __future__ import annotations

import subprocess
from typing import IO

from rltune._ipc import Channel, receive_init, send_init
from rltune._ipc import spawn as _spawn


def spawn(
    entry: str, *, stdout: IO[bytes] | int, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen, Channel]:
    """Start ``entry`` (``"pkg.module:function"``, called with the child's socket fd); its process and channel.

    The child's stdout and stderr both go to ``stdout``.
    """
    return _spawn(entry, env=env, stdin=subprocess.DEVNULL, stdout=stdout, stderr=subprocess.STDOUT,
                  new_session=True)


__all__ = ["receive_init", "send_init", "spawn"]
