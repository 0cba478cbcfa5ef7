"""The CLI and ``rltune.tune`` sit above the orchestrator: nothing in it imports ``rltune.tune``."""

import ast
from pathlib import Path

import rltune.orchestrator


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_the_orchestrator_never_imports_rltune_tune():
    package = Path(rltune.orchestrator.__file__).parent
    up = {f"{path.relative_to(package)}" for path in package.rglob("*.py") if "rltune.tune" in _imports(path)}
    assert not up, f"these orchestrator modules import rltune.tune: {sorted(up)}"
