"""rltune.tracking sits beside the orchestrator, which uses it: it imports nothing of the orchestrator."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import rltune.tracking

TRACKING_DIR = Path(rltune.tracking.__file__).parent


def test_tracking_never_imports_the_orchestrator():
    found = []
    for path in sorted(TRACKING_DIR.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            found += [f"{path.name}: {n}" for n in names if n.startswith(("rltune.orchestrator", "rltune.tune"))]
    assert found == []


def test_importing_tracking_loads_neither_mlflow_nor_torch_nor_the_orchestrator():
    code = ("import sys, rltune.tracking, rltune.tracking._process, rltune.tracking._ui; "
            "print(sorted(m for m in ('mlflow', 'torch', 'rltune.orchestrator') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip() == "[]", proc.stderr
