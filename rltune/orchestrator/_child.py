"""A child process of the orchestrator on a channel of its own: started, handed its ``sys.path`` and payload.

The trial processes and the env check before a study's first trial start
the same way, in a session of their own (Ctrl-C reaches the orchestrator
only), with stdout and stderr in one file: forked from the orchestrator's
warm template (:mod:`rltune._warm`, with the modules a trial needs imported
once), or started cold (:func:`rltune._ipc.spawn`) when warm start is off
(``RLTUNE_WARM_START=0``) or the template cannot serve. The parent then
sends its ``sys.path`` and one payload; the child reads both first
(:func:`rltune._ipc.receive_init`).
"""

from __future__ import annotations

import subprocess
from typing import IO, Any

from rltune import _warm
from rltune._ipc import Channel, receive_init, send_init

# What a trial process or the env check imports: "module", or "module:function" to call, a function that imports
# (torch.compiler.list_backends imports the compiler and every backend, as a trainer's learner does when it is built).
# Nothing that starts a thread or imports Optuna or MLflow: the template checks the first, a test the second.
TRIAL_PRELOAD = [
    "cloudpickle", "numpy", "torch", "torch.compiler:list_backends", "gymnasium",
    "gymnasium.envs.classic_control",
    "rltune.trainers", "rltune.trainers.algorithms._dqn", "rltune.trainers.sampling._remote",
    "rltune.trainers.sampling._rollout_worker", "rltune.orchestrator._trial_process", "rltune.orchestrator._env_check",
]
# A study of a function trainable: what every trial process imports, and no more (a template importing torch
# would compete for the cores with the study's first trials, which start cold meanwhile, for nothing they use).
FUNCTION_PRELOAD = ["cloudpickle", "rltune.orchestrator._trial_process"]


def preload_for(kind: str) -> list[str]:
    """What the template of a study whose trainable is of ``kind`` ("trainer" or "function") imports."""
    return TRIAL_PRELOAD if kind == "trainer" else FUNCTION_PRELOAD


def spawn(
    entry: str, *, stdout: IO[bytes] | int, env: dict[str, str] | None = None, worker_template: bool = False,
    preload: list[str] = TRIAL_PRELOAD,
) -> tuple[Any, Channel]:
    """Start ``entry`` (``"pkg.module:function"``, called with the child's socket fd); its process and channel.

    The child's stdout and stderr both go to ``stdout``. The process is a
    ``subprocess.Popen`` or a :class:`rltune._warm.WarmProcess` (the same
    ``pid``, ``poll``, ``wait``, ``kill``). ``worker_template``: a warm child
    forks a template of its own for its rollout workers. ``preload``: what
    its template imports (:func:`preload_for`).
    """
    return _warm.spawn(entry, template=_warm.template_for(preload, env), env=env, stdin=subprocess.DEVNULL,
                       stdout=stdout, stderr=subprocess.STDOUT, new_session=True, worker_template=worker_template)


def prestart(kind: str) -> None:
    """Start the warm template of a study of ``kind`` now (if warm start is on): it imports while the study sets up."""
    _warm.template_for(preload_for(kind))


__all__ = ["FUNCTION_PRELOAD", "TRIAL_PRELOAD", "preload_for", "prestart", "receive_init", "send_init", "spawn"]
