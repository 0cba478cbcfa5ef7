"""Entries for children started by tests/test_warm.py (``"warm_entries:NAME"``, called with the child's socket fd).

Each reads its init (sys.path and a payload), then answers one message
describing the process it runs in, or ends in a known way.
"""

from __future__ import annotations

import os
import sys

from rltune._ipc import receive_init


def describe(fd: int) -> None:
    """Answer a dict describing this process: parent, session, environment, threads, RNG, stdio."""
    conn, payload = receive_init(fd)
    import numpy as np
    import torch

    print("stdout of python", flush=True)
    print("stderr of python", file=sys.stderr, flush=True)
    os.write(1, b"stdout of os.write\n")
    import ctypes

    libc = ctypes.CDLL(None)
    libc.puts(b"stdout of C puts")
    libc.fflush(None)
    before = torch.get_num_threads(), torch.get_num_interop_threads()
    x = torch.randn(512, 512)
    product = float((x @ x).sum())  # the intra-op pool works (a pool copied by fork would hang here)
    conn.send({
        "pid": os.getpid(), "ppid": os.getppid(), "sid": os.getsid(0), "pgid": os.getpgid(0),
        "cwd": os.getcwd(), "env": dict(os.environ), "sys_path": list(sys.path), "umask": _umask(),
        "threads": before, "product_finite": product == product, "numpy_draw": float(np.random.rand()),
        "payload": payload, "modules": sorted(m for m in ("optuna", "mlflow", "sqlalchemy") if m in sys.modules),
        "cmdline": open("/proc/self/cmdline", "rb").read().replace(b"\0", b" ").decode(),
    })
    conn.receive()  # hold until the test says so (or closes)


def segfault(fd: int) -> None:
    receive_init(fd)
    import ctypes

    ctypes.string_at(0)


def exit_3(fd: int) -> None:
    receive_init(fd)
    os._exit(3)


def raise_error(fd: int) -> None:
    receive_init(fd)
    raise RuntimeError("raised in the child")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
