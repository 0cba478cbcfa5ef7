"""Importing the objects that configs name by import string (``"pkg.module:Name"``), with one clear error.

rltune puts no directory on the import path (neither the current directory
nor a checkpoint's): an import string names a module that Python finds on
its own path (an installed package, ``PYTHONPATH``). When a module is
missing but a file of that name sits in the current directory, the error
says so and how to fix it.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from pathlib import Path
from typing import Any, Iterable

from rltune.errors import ConfigError

TRUST_ENV = "RLTUNE_TRUST"  # comma-separated modules or packages whose code a checkpoint may name
_MODULE_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


def split_import_string(path: str) -> tuple[str, str]:
    """``(module, attribute)`` of ``"pkg.module:attr"`` or ``"pkg.module.attr"``; empty strings where absent."""
    module_name, sep, attr = path.partition(":")
    if not sep:
        module_name, _, attr = path.rpartition(".")
    return module_name, attr


def import_object(path: str, what: str) -> Any:
    """The object ``path`` names: ``"pkg.module:attr"`` (``attr`` may be dotted) or ``"pkg.module.attr"``.

    Raises :class:`ConfigError` starting with ``what`` (e.g. ``"callbacks"``; none if empty)
    whatever went wrong: a missing module or attribute, or an error raised by
    the module's own code while it was imported (a SyntaxError, a failing
    import inside it, ...).
    """
    module_name, attr = split_import_string(path)
    prefix = f"{what}: " if what else ""
    if not module_name or not attr:
        raise ConfigError(f"{prefix}{path!r} is not an import string 'pkg.module:Name'")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (Exception, SystemExit) as exc:  # the user's module runs here (even sys.exit / argparse): a config problem
        hint = _in_current_directory(module_name, exc)
        raise ConfigError(f"{prefix}cannot import {path!r} ({hint or f'{type(exc).__name__}: {exc}'})") from None
    return obj


def _in_current_directory(module_name: str, exc: BaseException) -> str | None:
    """The fix, when ``module_name`` was not found but its file is in the current directory (looked at, not imported)."""
    missing = getattr(exc, "name", None) if isinstance(exc, ModuleNotFoundError) else None
    if not missing or not (module_name == missing or module_name.startswith(missing + ".")):
        return None
    rel = missing.replace(".", "/")
    try:
        base = Path(os.getcwd(), rel)
    except OSError:  # the current directory was removed
        return None
    for found, shown in ((base.with_suffix(".py"), f"{rel}.py"), (base / "__init__.py", f"{rel}/__init__.py"),
                         (base, f"{rel}/")):
        if found.exists():
            return (f"{missing!r} is not importable; {shown} is in the current directory, which rltune does not "
                    "put on the import path: run with PYTHONPATH=. or install your package")
    return None


def trust_list(names: Iterable[str] | str | None, where: str) -> tuple[str, ...]:
    """Module or package names to trust, checked: ``names`` (a list, or one comma-separated string).

    :class:`ConfigError` naming ``where`` (e.g. ``--trust``) for a name that
    is not a dotted Python module name.
    """
    if names is None:
        return ()
    items = names.split(",") if isinstance(names, str) else list(names)
    trusted = []
    for name in items:
        name = name.strip() if isinstance(name, str) else name
        if isinstance(names, str) and name == "":
            continue  # "a,,b" or a trailing comma in an environment variable
        if not isinstance(name, str) or not _MODULE_NAME.fullmatch(name):
            raise ConfigError(f"{name!r} is not a module or package name (e.g. 'mypackage' or 'mypackage.envs')",
                              where=where)
        trusted.append(name)
    return tuple(trusted)


def env_trust_list() -> tuple[str, ...]:
    """The modules and packages ``$RLTUNE_TRUST`` names (comma-separated), checked."""
    return trust_list(os.environ.get(TRUST_ENV, ""), TRUST_ENV)


def in_packages(module_name: str, packages: Iterable[str]) -> bool:
    """Whether ``module_name`` is one of ``packages`` or a submodule of one."""
    return any(module_name == p or module_name.startswith(p + ".") for p in packages)


def is_module_name(name: str) -> bool:
    """Whether ``name`` is a dotted Python module name (``pkg.module``), nothing relative or empty."""
    return bool(_MODULE_NAME.fullmatch(name))


def drop_current_directory() -> None:
    """Take off the current directory that ``python -m`` puts first on the import path (unless rltune runs from it)."""
    cwd = os.getcwd()
    if sys.path and sys.path[0] in ("", cwd) and Path(__file__).resolve().parent.parent != Path(cwd).resolve():
        del sys.path[0]
