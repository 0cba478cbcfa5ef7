"""``torch_compile_learner: auto``: compile the learner step when the compile will pay for itself.

The rule (documented in the config field and the README):

1. The ``inductor`` backend needs a C++ compiler: without the one inductor
   would run (``$CXX``, else ``g++``; ``clang++`` on macOS) on ``PATH``, the
   step stays eager for the whole run.
2. Otherwise the step starts eager and is compiled once the run has shown
   it is long enough to repay the compile: after :data:`WARM_STEPS` SGD
   steps when this step's graph was compiled before in this inductor cache
   (a warm compile: a few seconds), after :data:`COLD_STEPS` otherwise (a
   cold compile: tens of seconds). Each threshold is about the number of
   steps whose saving (compiled vs eager step of the PPO benchmark:
   ``benchmarks/README.md``, "Compiled learner step") repays that compile,
   so a run that lasts at least as long again breaks even (a run's length
   is not known to the trainer up front: studies stop trials by results and
   pruners).

"This graph was compiled before" is a marker file rltune writes into
inductor's cache directory (``$TORCHINDUCTOR_CACHE_DIR``, default
``<tmp>/torchinductor_<user>``) after each compile, named by a fingerprint of
the step (torch release, backend and mode, the model's architecture, the
loss, its trace key and the input shapes). Removing the cache removes the
markers. Every trial of a study runs as the same user with the study's
environment, so the trials share one cache: the first trial that compiles
makes the compile warm for the others.
"""

from __future__ import annotations

import getpass
import hashlib
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Optional

import torch

WARM_STEPS = 500
COLD_STEPS = 20_000


def cxx_compiler() -> Optional[str]:
    """Path of the C++ compiler inductor would run, or None when it is not on ``PATH``."""
    name = os.environ.get("CXX") or ("clang++" if sys.platform == "darwin" else "g++")
    return shutil.which(name)


def inductor_cache_dir() -> Path:
    """Inductor's on-disk cache: ``$TORCHINDUCTOR_CACHE_DIR``, else torch's default per user."""
    configured = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if configured:
        return Path(configured)
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (e.g. in a container)
        user = "unknown"
    return Path(tempfile.gettempdir()) / f"torchinductor_{user.replace('/', '_')}"


def step_fingerprint(parts: list[Any], inputs: tuple[Any, ...]) -> str:
    """A name for one compiled step: ``parts`` (what shapes the graph) and the inputs' shapes and dtypes.

    A 0-d tensor and a Python number count alike: an eager step is given
    floats where a compiled one gets 0-d tensors.
    """
    shapes = [
        (tuple(x.shape), str(x.dtype)) if isinstance(x, torch.Tensor) and x.dim() > 0 else "scalar"
        for x in inputs
    ]
    text = repr([torch.__version__, *parts, shapes])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _marker(fingerprint: str) -> Path:
    return inductor_cache_dir() / "rltune_compiled_steps" / fingerprint


def compiled_before(fingerprint: str) -> bool:
    """Whether a step of this fingerprint was compiled with this cache (its compile is warm)."""
    return _marker(fingerprint).exists()


def mark_compiled(fingerprint: str) -> None:
    """Note in the cache that a step of this fingerprint was compiled; best effort."""
    path = _marker(fingerprint)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
    except OSError:
        pass  # an unwritable cache only makes later compiles count as cold


class AutoCompile:
    """Counts a step's eager calls and says when to compile it (the rule above)."""

    def __init__(self) -> None:
        self.steps = 0
        self.threshold: Optional[int] = None
        self.warm = False

    def due(self, fingerprint: Callable[[], str]) -> bool:
        """Count one eager step; True once the step should be compiled from the next update on."""
        if self.threshold is None:
            self.warm = compiled_before(fingerprint())
            self.threshold = WARM_STEPS if self.warm else COLD_STEPS
        self.steps += 1
        return self.steps >= self.threshold
