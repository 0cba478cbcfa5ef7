"""Attribute-style uses of private names of torch, Optuna and MLflow, found with ``ast`` (the regexes of
tests/private_names.py see only the names rltune spells out: ``study._storage`` slips past them).

A use is an attribute ``x._name`` (not a dunder), a ``getattr``/``setattr``/``hasattr`` of a private
name, or a private module in an import, where ``x`` is known statically to come from the library:

- a name imported from it (``torch._dynamo``, ``mlflow.pyfunc._x``, ``PythonModel._y``);
- a name or ``self.<attr>`` bound to an expression rooted at such a name (``study = optuna.load_study(...)``;
  ``for t in study.trials``; ``self.study = ...``), or a parameter annotated with a type of it
  (``study: optuna.Study``); a name bound in one scope both to the library and to something else is skipped;
- ``self``, ``cls`` or ``super()`` in a subclass of one of its classes, and assignments in such a class's
  body, when the library class has that private name (``_skip_type_hint_validation = True`` in a
  ``mlflow.pyfunc.PythonModel``).

rltune's own private names (``self._x`` of its own classes, its ``_modules``) are never library ones.
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import re
import sys
from pathlib import Path
from typing import Any, Iterator, Optional

ADAPTERS = {
    "torch": "rltune/trainers/learning/_torch_compat.py",
    "optuna": "rltune/orchestrator/_optuna_compat.py",
    "mlflow": "rltune/tracking/_mlflow_compat.py",
}
_ACCESSORS = {"getattr", "setattr", "hasattr", "delattr"}
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_Env = dict[str, Optional[str]]  # name -> dotted library path it holds (None: bound to something else)


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _root(expr: ast.AST) -> ast.AST:
    """The leftmost part of ``a.b(c)[d].e``: ``a``."""
    while True:
        if isinstance(expr, (ast.Attribute, ast.Subscript, ast.Starred, ast.Await)):
            expr = expr.value
        elif isinstance(expr, ast.Call):
            expr = expr.func
        else:
            return expr


def _dotted(expr: ast.AST) -> Optional[str]:
    """``a.b.c`` of an expression made of names and attributes only."""
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        base = _dotted(expr.value)
        return f"{base}.{expr.attr}" if base else None
    return None


def _resolve(path: str) -> Any:
    """The library object a dotted path names (a module or a class), or None."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except Exception:  # noqa: BLE001 - a path the library does not have (or an uninstalled extra)
            continue
        for part in parts[cut:]:
            obj = getattr(obj, part, None)
        return obj
    return None


def _class_has(cls: Any, name: str) -> bool:
    """Whether a library class knows ``name``: defines it, annotates it, or its module's code names it
    (MLflow's ``PythonModel.__init_subclass__`` reads ``_skip_type_hint_validation`` that no class defines)."""
    mro = [c for c in getattr(cls, "__mro__", ()) if c.__module__.split(".")[0] in ADAPTERS]
    if any(name in vars(c) or name in getattr(c, "__annotations__", {}) for c in mro):
        return True
    return any(name in _identifiers(c.__module__) for c in mro)


@functools.lru_cache(maxsize=None)
def _identifiers(module: str) -> frozenset[str]:
    """The private identifiers a library module's source spells (attribute names, names, strings)."""
    try:
        text = inspect.getsource(sys.modules[module])
    except (OSError, TypeError, KeyError):
        return frozenset()
    return frozenset(re.findall(r"\b_[A-Za-z0-9]\w*", text))


class _Scanner:
    """One module's hits: (line, library, text)."""

    def __init__(self, tree: ast.Module, libraries: set[str]) -> None:
        self.libraries = libraries
        self.hits: list[tuple[int, str, str]] = []
        self._scan_scope(tree, {}, None, {})

    def _hit(self, node: ast.AST, path: str, what: str) -> None:
        self.hits.append((node.lineno, path.split(".")[0], what))

    def _library_of(self, expr: ast.AST, env: _Env, attrs: _Env) -> Optional[str]:
        """The library path an expression's value comes from, or None."""
        root = _root(expr)
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id in ("self", "cls"):
            return attrs.get(f"self.{expr.attr}")
        if isinstance(root, ast.Name):
            if root.id in ("self", "cls"):
                key = _self_key(expr)
                return attrs.get(key) if key else None
            lib, dotted = env.get(root.id), _dotted(expr)
            return f"{lib}{dotted[len(root.id):]}" if lib and dotted else lib
        return None

    def _bindings(self, scope: ast.AST, outer: _Env, attrs: _Env) -> tuple[_Env, dict[str, str]]:
        """The names a scope binds (library path or None), and the ``self.<attr>`` it assigns library values to."""
        env: _Env = dict(outer)
        for _ in range(3):  # to a fixpoint for chains such as ``study = ...; trials = study.trials``
            found: dict[str, set[Optional[str]]] = {}
            self_attrs: dict[str, set[Optional[str]]] = {}
            for target, value in _binding_pairs(scope, self.libraries):
                lib = value if isinstance(value, str) or value is None else self._library_of(value, env, attrs)
                if isinstance(target, str):
                    found.setdefault(target, set()).add(lib)
                else:
                    self_attrs.setdefault(target[0], set()).add(lib)
            local = {name: _agreed(libs) for name, libs in found.items()}
            new = {**outer, **local}
            if new == env:
                break
            env = new
        owned = {key: lib for key, lib in ((k, _agreed(libs)) for k, libs in self_attrs.items()) if lib}
        return env, owned

    def _scan_scope(self, scope: ast.AST, outer: _Env, cls: Any, attrs: _Env) -> None:
        env, _ = self._bindings(scope, outer, attrs)
        for node in _own_nodes(scope):
            if isinstance(node, ast.ClassDef):
                self._scan_class(node, env)
            elif isinstance(node, _FUNCTIONS):
                self._scan_scope(node, env, cls, attrs)
            else:
                self._check(node, env, cls, attrs)

    def _scan_class(self, node: ast.ClassDef, env: _Env) -> None:
        bases = [p for p in (self._library_of(b, env, {}) for b in node.bases) if p]
        base = next((c for c in map(_resolve, bases) if isinstance(c, type)), None)
        attrs: _Env = {}
        for item in node.body:  # ``self.x = <library value>`` anywhere in the class marks ``self.x``
            if isinstance(item, _FUNCTIONS):
                attrs.update(self._bindings(item, env, {})[1])
        for item in node.body:
            if isinstance(item, _FUNCTIONS):
                self._scan_scope(item, env, base, attrs)
                if base is not None and _private(item.name) and _class_has(base, item.name):
                    self._hit(item, bases[0], f"overrides {bases[0]}.{item.name}")
            elif isinstance(item, ast.ClassDef):
                self._scan_class(item, env)
            else:
                for target in _assigned(item):
                    if base is not None and _private(target.id) and _class_has(base, target.id):
                        self._hit(item, bases[0], f"sets {bases[0]}.{target.id}")
                for sub in ast.walk(item):
                    self._check(sub, env, None, attrs)

    def _check(self, node: ast.AST, env: _Env, cls: Any, attrs: _Env) -> None:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for path in _imported_paths(node):
                if path.split(".")[0] in self.libraries and any(_private(p) for p in path.split(".")):
                    self._hit(node, path, f"imports {path}")
            return
        name, owner = None, None
        if isinstance(node, ast.Attribute) and _private(node.attr):
            name, owner = node.attr, node.value
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _ACCESSORS
              and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
              and isinstance(node.args[1].value, str) and _private(node.args[1].value)):
            name, owner = node.args[1].value, node.args[0]
        if name is None:
            return
        lib = self._library_of(owner, env, attrs)
        if lib:
            self._hit(node, lib, f"{ast.unparse(owner)}.{name}")
        elif cls is not None and _is_self(owner) and _class_has(cls, name):
            self._hit(node, f"{cls.__module__}.{cls.__qualname__}", f"{ast.unparse(owner)}.{name} (of {cls.__qualname__})")


def _agreed(libs: set[Optional[str]]) -> Optional[str]:
    """What a name bound several times holds: None unless every binding is of one library."""
    if None in libs or len({lib.split(".")[0] for lib in libs}) != 1:  # type: ignore[union-attr]
        return None
    return libs.pop() if len(libs) == 1 else next(iter(libs)).split(".")[0]


def _is_self(expr: ast.AST) -> bool:
    if isinstance(expr, ast.Name):
        return expr.id in ("self", "cls")
    return isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "super"


def _self_key(expr: ast.AST) -> Optional[str]:
    """``self.x`` of an expression rooted at ``self.x`` (``self.x.y()[0]``)."""
    while not (isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name)):
        if isinstance(expr, (ast.Attribute, ast.Subscript)):
            expr = expr.value
        elif isinstance(expr, ast.Call):
            expr = expr.func
        else:
            return None
    return f"self.{expr.attr}"


def _own_nodes(scope: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a scope, stopping at (and yielding) nested functions and classes."""
    todo = list(ast.iter_child_nodes(scope))
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, (ast.ClassDef, *_FUNCTIONS)):
            todo.extend(ast.iter_child_nodes(node))


def _imported_paths(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom) and not node.level and node.module:
        return [f"{node.module}.{a.name}" for a in node.names]
    return []


def _assigned(node: ast.AST) -> list[ast.Name]:
    targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
    return [t for t in targets if isinstance(t, ast.Name)]


def _annotation_library(annotation: Optional[ast.AST]) -> Optional[ast.AST]:
    """An expression of the annotation naming a type (a quoted annotation is parsed)."""
    if annotation is None:
        return None
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        try:
            annotation = ast.parse(annotation.value, mode="eval").body
        except SyntaxError:
            return None
    return next((n for n in ast.walk(annotation) if isinstance(n, (ast.Name, ast.Attribute))), None)


def _targets(target: ast.AST) -> Iterator[Any]:
    """A binding target's names (str) and ``self.<attr>`` keys (a 1-tuple)."""
    if isinstance(target, ast.Name):
        yield target.id
    elif isinstance(target, (ast.Tuple, ast.List)):
        for element in target.elts:
            yield from _targets(element)
    elif isinstance(target, ast.Starred):
        yield from _targets(target.value)
    elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
        yield (f"self.{target.attr}",)


def _binding_pairs(scope: ast.AST, libraries: set[str]) -> Iterator[tuple[Any, Any]]:
    """(target, value) of each binding in a scope: value is an expression, a library path, or None."""
    if isinstance(scope, _FUNCTIONS):
        args = scope.args
        for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
            if arg is not None:
                yield arg.arg, _annotation_library(arg.annotation)
    for node in _own_nodes(scope):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                bound = alias.asname or alias.name.split(".")[0]
                path = (alias.name if alias.asname else alias.name.split(".")[0]) if isinstance(node, ast.Import) \
                    else f"{node.module}.{alias.name}" if not node.level and node.module else ""
                yield bound, path if path.split(".")[0] in libraries else None
        elif isinstance(node, (ast.ClassDef, *_FUNCTIONS[:2])):
            yield node.name, None
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                for t in _targets(target):
                    yield t, node.value
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.NamedExpr)):
            value = node.value if node.value is not None else _annotation_library(getattr(node, "annotation", None))
            for t in _targets(node.target):
                yield t, value
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            for t in _targets(node.target):
                yield t, node.iter
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            for t in _targets(node.optional_vars):
                yield t, node.context_expr
        elif isinstance(node, ast.ExceptHandler) and node.name:
            yield node.name, node.type


def scan_source(text: str, libraries: Optional[set[str]] = None) -> list[tuple[int, str, str]]:
    """(line, library, what) of each private use of ``libraries`` (default: torch, optuna, mlflow) in ``text``."""
    return sorted(_Scanner(ast.parse(text), set(libraries or ADAPTERS)).hits)


def private_attribute_uses(root: Path) -> list[str]:
    """``path:line: library: what`` of every private use of torch, Optuna or MLflow outside its adapter."""
    hits = []
    for path in sorted((root / "rltune").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        for line, library, what in scan_source(path.read_text()):
            if ADAPTERS.get(library) != rel:
                hits.append(f"{rel}:{line}: {library}: {what}")
    return hits
