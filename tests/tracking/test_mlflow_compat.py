"""MLflow outside its public API only in rltune/tracking/_mlflow_compat.py."""

from __future__ import annotations

import re
from pathlib import Path

from private_names import private_uses

import rltune

# private modules (mlflow.utils, mlflow.store), private names (mlflow.x._y, from mlflow.x import _y)
PRIVATE = re.compile(r"mlflow\.(utils|store)\b|mlflow(\.\w+)*\._\w|from mlflow[\w.]* import \(?\s*_\w")


def test_no_private_mlflow_outside_the_adapter():
    assert private_uses(PRIVATE, "rltune/tracking/_mlflow_compat.py", ignore_comments=True) == []


def test_the_pattern_finds_what_the_adapter_uses():
    text = (Path(rltune.__file__).parent / "tracking" / "_mlflow_compat.py").read_text()
    assert len(PRIVATE.findall(text)) >= 2
