"""MLflow outside its public API only in rltune/tracking/_mlflow_compat.py."""

from __future__ import annotations

import re
from pathlib import Path

import rltune

# private modules (mlflow.utils, mlflow.store), private names (mlflow.x._y, from mlflow.x import _y)
PRIVATE = re.compile(r"mlflow\.(utils|store)\b|mlflow(\.\w+)*\._\w|from mlflow[\w.]* import \(?\s*_\w")


def test_no_private_mlflow_outside_the_adapter():
    root = Path(rltune.__file__).parent
    found = []
    for path in root.rglob("*.py"):
        if path == root / "tracking" / "_mlflow_compat.py":
            continue
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            if PRIVATE.search(line.split("#", 1)[0]):
                found.append(f"{path.relative_to(root)}:{number}: {line.strip()}")
    assert found == []


def test_the_pattern_finds_what_the_adapter_uses():
    text = (Path(rltune.__file__).parent / "tracking" / "_mlflow_compat.py").read_text()
    assert len(PRIVATE.findall(text)) >= 2
