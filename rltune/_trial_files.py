"""The layout of a trial directory, as the trial process writes it and the tracking reads it back.

Below both the orchestrator and the tracking: ``trial_<number:05d>/`` holds
``params.json``, ``result.json`` (one JSON result a line), ``error.txt`` and
committed ``checkpoint_<iteration>`` directories.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from rltune._atomic_dir import recover_leftovers
from rltune._json import json_safe  # noqa: F401 - the JSON form of params.json and result.json
from rltune._results_dir import DEFAULT_RESULTS_DIR, default_results_dir  # noqa: F401 - where trial dirs go

CHECKPOINT_PREFIX = "checkpoint_"
RESULT_FILE = "result.json"
PARAMS_FILE = "params.json"
ERROR_FILE = "error.txt"
def trial_dir_name(number: int) -> str:
    """``trial_00003``: the directory of trial 3 in its study's directory."""
    return f"trial_{number:05d}"


def checkpoint_iteration(path: str | os.PathLike[str] | None) -> int | None:
    """The iteration a checkpoint directory is numbered with (``.../checkpoint_000012``: 12), or None."""
    if not isinstance(path, (str, os.PathLike)):
        return None
    digits = Path(path).name.rpartition("_")[2]
    return int(digits) if digits.isdigit() else None


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


def last_result(trial_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The last complete line of a trial directory's ``result.json``, or None (no file, or no complete line)."""
    try:
        lines = (Path(trial_dir) / RESULT_FILE).read_text().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        try:
            result = json.loads(line)
        except ValueError:  # a line cut short by a kill
            continue
        return result if isinstance(result, dict) else None
    return None
