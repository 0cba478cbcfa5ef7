"""The package layout cannot regress: dependencies point one way (../shared/DESIGN.md, Layout).

cli/tune -> orchestrator (+ tracking) -> trainers -> callbacks -> env, each
importing nothing from a layer above it except under ``TYPE_CHECKING``. The
shared helpers at the top of the package (``rltune.errors``, ``rltune._*``)
are below them all. Imports are read with ``ast``, so an import inside a
function counts as much as one at the top of a module.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import rltune

PACKAGE_DIR = Path(rltune.__file__).parent

# Layer of each top-level name under rltune; a module's layer is its first name's.
LAYERS = {
    "": 0,  # rltune/__init__.py (``__version__``; ``rltune.tune`` loads lazily through importlib)
    "errors": 0,
    "env": 1,
    "callbacks": 2,
    "trainers": 3,
    "orchestrator": 4,
    "tracking": 4,  # MLflow tracking, beside the orchestrator (issue 15, part "tracking")
    "tune": 5,
    "cli": 5,
    "train": 5,  # Ray Train / AIR names (issue 26, part "tuner"): re-exports beside rltune.tune
    "air": 5,
}
# Modules whose layer is not their package's.
MODULE_LAYERS = {
    "rltune.orchestrator.cli": 5,  # the command line; it lives in the orchestrator package today
    "rltune.orchestrator._cli_rollout": 5,  # its ``rollout`` subcommand
}
# Imports that break the rule today, each with the issue part that removes it: (importer, imported).
KNOWN_EXCEPTIONS: set[tuple[str, str]] = set()


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _layer(module: str) -> int:
    if module in MODULE_LAYERS:
        return MODULE_LAYERS[module]
    top = module.split(".")[1] if "." in module else ""
    if top.startswith("_"):
        return 0  # shared private helpers: rltune._imports, rltune._validation, ...
    if top not in LAYERS:
        pytest.fail(f"{module}: package rltune.{top} has no layer; add it to LAYERS in {__file__}")
    return LAYERS[top]


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            inside.update(id(child) for stmt in node.body for child in ast.walk(stmt))
    return inside


def _imported_modules(node: ast.AST, module: str, is_package: bool) -> list[str]:
    """The rltune modules an import statement loads (``from rltune import tune`` loads ``rltune.tune``)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    base = node.module or ""
    if node.level:
        anchor = module.split(".") if is_package else module.split(".")[:-1]
        anchor = anchor[: len(anchor) - node.level + 1]
        base = ".".join(anchor + ([base] if base else []))
    found = [base]
    for alias in node.names:
        sub = f"{base}.{alias.name}"
        path = PACKAGE_DIR.parent.joinpath(*sub.split("."))
        if path.with_suffix(".py").exists() or path.is_dir():
            found.append(sub)
    return found


def upward_imports() -> list[tuple[str, str]]:
    """Every (importer, imported) pair under rltune/ where the imported module is in a higher layer."""
    found = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        module = _module_name(path)
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        type_only = _type_checking_nodes(tree)
        for node in ast.walk(tree):
            if id(node) in type_only:
                continue
            for imported in _imported_modules(node, module, path.name == "__init__.py"):
                if (imported == "rltune" or imported.startswith("rltune.")) and _layer(imported) > _layer(module):
                    found.append((module, imported))
    return found


def test_no_module_imports_from_a_layer_above_it():
    broken = sorted(set(upward_imports()) - KNOWN_EXCEPTIONS)
    assert not broken, "imports against the layout (env < callbacks < trainers < orchestrator < cli/tune):\n" + "\n".join(
        f"  {importer} imports {imported}" for importer, imported in broken
    )


def test_known_exceptions_still_exist():
    # A removed exception must leave the list, so that the rule is not weakened for nothing.
    assert KNOWN_EXCEPTIONS <= set(upward_imports())


def test_the_check_sees_function_level_and_relative_imports(tmp_path):
    tree = ast.parse("def f():\n    from rltune.trainers import PPO\nfrom . import _registry\n")
    imported = [m for node in ast.walk(tree) for m in _imported_modules(node, "rltune.env", True)]
    assert "rltune.trainers" in imported and "rltune.env._registry" in imported
    assert _layer("rltune.trainers") > _layer("rltune.env._registry") > _layer("rltune.errors")


MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80


def oversized() -> list[str]:
    """Every rltune module over MAX_MODULE_LINES lines and function over MAX_FUNCTION_LINES (decorators excluded)."""
    found = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        name = path.relative_to(PACKAGE_DIR.parent).as_posix()
        text = path.read_text(encoding="utf-8")
        lines = len(text.splitlines())
        if lines > MAX_MODULE_LINES:
            found.append(f"{name}: {lines} lines (at most {MAX_MODULE_LINES})")
        for node in ast.walk(ast.parse(text, name)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    found.append(f"{name}:{node.lineno}: {node.name}() has {length} lines (at most {MAX_FUNCTION_LINES})")
    return found


def test_no_module_or_function_is_oversized():
    """Issue 15: no module over ~500 lines, no function over ~80 (split them by job)."""
    too_big = oversized()
    assert not too_big, "split these by job:\n" + "\n".join(f"  {entry}" for entry in too_big)


MAX_TRAINERS_TOP_MODULES = 12
TRAINERS_SUBPACKAGES = {"algorithms", "policies", "learning", "sampling", "checkpoints", "rllib", "ppo", "dqn"}


def test_trainers_is_split_into_subpackages_by_role():
    """Issue 25: rltune/trainers/ keeps a handful of modules at its top; the rest live in sub-packages by role."""
    trainers = PACKAGE_DIR / "trainers"
    top = sorted(p.name for p in trainers.glob("*.py"))
    assert len(top) <= MAX_TRAINERS_TOP_MODULES, f"{len(top)} modules at rltune/trainers/'s top: {top}"
    packages = {p.parent.name for p in trainers.glob("*/__init__.py")}
    assert packages == TRAINERS_SUBPACKAGES, f"sub-packages of rltune/trainers: {sorted(packages)}"
