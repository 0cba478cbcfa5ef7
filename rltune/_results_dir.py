"""Where runs and studies are written unless told otherwise (stdlib only)."""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_RESULTS_DIR = "~/rltune_results"


def default_results_dir() -> Path:
    """``$RLTUNE_RESULTS_DIR`` (unless empty), or ``~/rltune_results``."""
    return Path(os.path.expanduser(os.environ.get("RLTUNE_RESULTS_DIR") or DEFAULT_RESULTS_DIR))
