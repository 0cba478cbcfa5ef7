"""One scan for the private-name tests of torch, Optuna and MLflow: lines of rltune that match outside an adapter.

Attribute-style uses of values the libraries hand out (``study._storage``) are found with ``ast`` by
tests/private_attributes.py instead.
"""

from __future__ import annotations

import re
from pathlib import Path

import rltune

ROOT = Path(rltune.__file__).resolve().parent.parent


def private_uses(pattern: re.Pattern[str], adapter: str, *, ignore_comments: bool = False) -> list[str]:
    """``path:line: text`` of every line of ``rltune/**.py`` but ``adapter`` (repo-relative) that ``pattern`` matches."""
    hits = []
    for path in sorted((ROOT / "rltune").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel == adapter:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0] if ignore_comments else line
            if pattern.search(code):
                hits.append(f"{rel}:{number}: {line.strip()}")
    return hits
