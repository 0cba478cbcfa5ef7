"""Function trainables of tests/orchestrator/test_warm_start.py: each reports what its process looks like."""

from __future__ import annotations

import os
import signal
import sys
import time


def _parent_command_line() -> str:
    with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
        return f.read().replace(b"\0", b" ").decode()


def describe(config, reporter):
    """Prints on every channel, then reports its parent, session, environment, cwd, modules and torch threads."""
    import ctypes

    import torch

    print("trial stdout of python", flush=True)
    print("trial stderr of python", file=sys.stderr, flush=True)
    libc = ctypes.CDLL(None)
    libc.puts(b"trial stdout of C puts")
    libc.fflush(None)
    x = torch.randn(256, 256)
    reporter(score=1.0, pid=os.getpid(), sid=os.getsid(0), pgid=os.getpgid(0), parent=_parent_command_line(),
             trial_number=os.environ.get("RLTUNE_TRIAL_NUMBER"), value=os.environ.get("RLTUNE_TEST_VALUE"),
             cwd=os.getcwd(), optuna="optuna" in sys.modules, mlflow="mlflow" in sys.modules,
             threads=[torch.get_num_threads(), torch.get_num_interop_threads()], matmul=float((x @ x).sum()) == float((x @ x).sum()))


def crash(config, reporter):
    """Reports once, then segfaults (``how``: "segfault") or exits without a word (``how``: "exit")."""
    reporter(score=1.0)
    if config["how"] == "segfault":
        import ctypes

        ctypes.string_at(0)
    os._exit(5)


def with_workers(config, reporter):
    """Builds a PPO with one rollout worker on ``env`` (registered by the test), reports its workers, then
    SIGKILLs its own process group, as the orchestrator kills a trial (a timeout, Ctrl-C twice)."""
    from rltune.trainers import PPO

    trainer = PPO(config={"env": config["env"], "num_workers": 1, "torch_num_threads": 1, "train_batch_size": 64,
                          "sgd_minibatch_size": 32, "num_sgd_iter": 1, "rollout_fragment_length": 64,
                          "model": {"fcnet_hiddens": [8]}})
    trainer.train()

    def about(worker):
        import torch

        with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
            parent = f.read().replace(b"\0", b" ").decode()
        return {"pid": os.getpid(), "pgid": os.getpgid(0), "parent": parent, "threads": torch.get_num_threads()}

    workers = [w for w in trainer.foreach_worker(about) if w["pid"] != os.getpid()]
    reporter(score=1.0, pid=os.getpid(), workers=workers)  # returns once the orchestrator has the result
    os.killpg(0, signal.SIGKILL)  # host.kill's signal, to the trial's group: its workers go with it
    time.sleep(60)
