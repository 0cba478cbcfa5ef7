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
from typing import Any, Callable, Iterable

from rltune.errors import ConfigError

TRUST_ENV = "RLTUNE_TRUST"  # comma-separated modules or packages whose code a checkpoint may name
_MODULE_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


# rltune.trainers' modules that moved into sub-packages (issue 25), by sub-package: import strings saved before
# the move (a checkpoint's policy classes, a study file) still name the same object.
_MOVED_TRAINER_MODULES = {
    "algorithms": "_algorithm _ppo _dqn _replay_buffer",
    "policies": "_policy _policy_spec _default_policy _models _activations _distributions _exploration _q_exploration "
                "_q_model _numpy_mlp _spaces _space_fit _space_json _filters",
    "learning": "_learner _sgd_step _flat_params _compile_auto _torch_compat _postprocessing",
    "sampling": "_sample_source _sample_batch _multi_agent_screen _agent_transitions "
                "_complete_episodes _nonfinite _rollout_worker _worker_set _remote _worker_messages",
    "checkpoints": "_checkpoint _checkpoint_config _checkpoint_fields _checkpoint_signature _checkpoint_trust _trainer_checkpoints",
    "rllib": "_rllib_names _rllib_keys _builder_calls _builder_keys _builder_values _config_builder",
}
_MOVED = {f"rltune.trainers.{m}": f"rltune.trainers.{pkg}.{m}" for pkg, mods in _MOVED_TRAINER_MODULES.items()
          for m in mods.split()}


def split_import_string(path: str) -> tuple[str, str]:
    """``(module, attribute)`` of ``"pkg.module:attr"`` or ``"pkg.module.attr"``; empty strings where absent.

    A module of rltune's that moved is given under its current name.
    """
    module_name, sep, attr = path.partition(":")
    if not sep:
        module_name, _, attr = path.rpartition(".")
    return _MOVED.get(module_name, module_name), attr


def current_import_string(path: str) -> str:
    """``path`` with a moved rltune module renamed to where it is now (``"pkg.module:attr"`` form kept)."""
    module_name, sep, attr = path.partition(":")
    return f"{_MOVED.get(module_name, module_name)}{sep}{attr}" if sep else path


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


def resolve_callable(spec: Any, key: str) -> Callable[..., Any]:
    """A config value that names a function: the function itself or an import string 'pkg.module:fn'."""
    if isinstance(spec, str) and ":" in spec:
        spec = import_object(spec, key)
    if not callable(spec):
        raise ConfigError(f"{key}: must be a function or an import string 'pkg.module:fn', but got {spec!r}")
    return spec


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
