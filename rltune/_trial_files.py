"""The layout of a trial directory, as the trial process writes it and the tracking reads it back.

Below both the orchestrator and the tracking: ``trial_<number:05d>/`` holds
``params.json``, ``result.json`` (one JSON result a line), ``error.txt`` and
committed ``checkpoint_<iteration>`` directories.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from rltune._atomic_dir import recover_leftovers

CHECKPOINT_PREFIX = "checkpoint_"
RESULT_FILE = "result.json"
PARAMS_FILE = "params.json"
ERROR_FILE = "error.txt"
DEFAULT_RESULTS_DIR = "~/rltune_results"


def default_results_dir() -> Path:
    """``$RLTUNE_RESULTS_DIR``, or ``~/rltune_results``."""
    return Path(os.path.expanduser(os.environ.get("RLTUNE_RESULTS_DIR") or DEFAULT_RESULTS_DIR))


def trial_dir_name(number: int) -> str:
    """``trial_00003``: the directory of trial 3 in its study's directory."""
    return f"trial_{number:05d}"


def list_checkpoints(trial_dir: str | os.PathLike[str]) -> list[tuple[int, Path]]:
    """The committed checkpoints of a trial directory as ``(iteration, path)``, oldest first.

    Leftovers of a writer that crashed are cleaned up first (one that a crash
    left under a temporary name is put back).
    """
    found = []
    directory = Path(trial_dir)
    if not directory.is_dir():
        return []
    recover_leftovers(directory)
    for path in directory.glob(f"{CHECKPOINT_PREFIX}*"):
        suffix = path.name[len(CHECKPOINT_PREFIX):]
        if path.is_dir() and suffix.isdigit():
            found.append((int(suffix), path))
    return sorted(found)


def json_safe(value: Any) -> Any:
    """A JSON form of a config or result value: numpy scalars as numbers, classes as 'module:qualname'."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    item = getattr(value, "item", None)
    if callable(item) and getattr(value, "shape", None) == ():
        try:
            return json_safe(item())
        except (TypeError, ValueError):
            pass
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        try:
            return json_safe(tolist())
        except (TypeError, ValueError):
            pass
    module = getattr(value, "__module__", None)
    qualname = getattr(value, "__qualname__", None)
    if module and qualname and "<" not in qualname and module != "__main__":
        return f"{module}:{qualname}"
    return repr(value)
