"""Importing the objects that configs name by import string (``"pkg.module:Name"``), with one clear error."""

from __future__ import annotations

import importlib
from typing import Any

from rltune.errors import ConfigError


def import_object(path: str, what: str) -> Any:
    """The object ``path`` names: ``"pkg.module:attr"`` (``attr`` may be dotted) or ``"pkg.module.attr"``.

    Raises :class:`ConfigError` starting with ``what`` (e.g. ``"callbacks"``; none if empty)
    whatever went wrong: a missing module or attribute, or an error raised by
    the module's own code while it was imported (a SyntaxError, a failing
    import inside it, ...).
    """
    module_name, sep, attr = path.partition(":")
    if not sep:
        module_name, _, attr = path.rpartition(".")
    prefix = f"{what}: " if what else ""
    if not module_name or not attr:
        raise ConfigError(f"{prefix}{path!r} is not an import string 'pkg.module:Name'")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (Exception, SystemExit) as exc:  # the user's module runs here (even sys.exit / argparse): a config problem
        raise ConfigError(f"{prefix}cannot import {path!r} ({type(exc).__name__}: {exc})") from None
    return obj
