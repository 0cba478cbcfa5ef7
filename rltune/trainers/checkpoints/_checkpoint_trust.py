"""What a checkpoint's saved config may make rltune import: the trust set, decided before any import.

A checkpoint is data that someone else may have edited (a shared folder,
a download); its checksums do not stop that, since an editor recomputes
them. Its saved config names code by import string (``env``,
``callbacks``, policy classes, functions such as ``env_task_fn``). Opening
it imports such a name only when its module is in the trust set:

- rltune's own modules (``rltune.*``);
- a module this process has imported already (``sys.modules``): looking up
  an attribute of it runs no module code;
- the module of an import string the caller gave in ``config_overrides``
  (``rltune rollout --env`` / ``--config``): it is imported anyway;
- a module or package the caller trusts: ``trust=[...]``,
  ``rltune rollout --trust NAME`` or ``$RLTUNE_TRUST`` (comma-separated);
  a package trusts its submodules.

A class found so must still be of the kind its key expects (a
``gymnasium.Env``, ``DefaultCallbacks`` or ``Policy`` subclass: the checks of
``_checkpoint_config.py``). A function (``env_task_fn``,
``multiagent.policy_mapping_fn``, ...) has no kind to check, so it needs
more: the caller gave that very string, or trusts its module by name and
the function is defined there. Gymnasium ids and :func:`register_env` names
are registrations of this process and name no module.
"""

from __future__ import annotations

import dataclasses
import sys
import types
from dataclasses import dataclass, field
from typing import Any, Iterable

from rltune._imports import env_trust_list, in_packages, is_module_name, split_import_string, trust_list

OWN_PACKAGE = "rltune"
CODE_KEYS = frozenset({"env", "callbacks", "env_task_fn", "policy_class", "policy_mapping_fn", "policies_to_train",
                       "observation_fn"})


class TrustProblem(str):
    """A reason to refuse an import string that ends in how to trust its module (an error then adds the other way)."""


@dataclass(frozen=True)
class CheckpointTrust:
    """The trust set of one opening of a checkpoint (see the module docstring)."""

    trusted: tuple[str, ...] = ()  # modules and packages named by trust=, --trust or $RLTUNE_TRUST
    given: frozenset[str] = field(default_factory=frozenset)  # import strings the caller gave (config_overrides)

    @classmethod
    def of(cls, trust: Iterable[str] | str | None = None, overrides: dict[str, Any] | None = None,
           where: str = "trust") -> "CheckpointTrust":
        """The trust set of a caller: ``trust`` (checked, named ``where`` in errors), ``$RLTUNE_TRUST`` and ``overrides``."""
        return cls(trust_list(trust, where) + env_trust_list(), frozenset(given_import_strings(overrides or {})))

    def import_problem(self, ref: str, *, function: bool = False) -> str | None:
        """Why the import string ``ref`` may not be imported (None: it may); nothing is imported to decide."""
        if ref in self.given:
            return None
        module, attr = split_import_string(ref)
        if not is_module_name(module) or not all(part.isidentifier() for part in attr.split(".")):
            return f"is {ref!r}, not an import string 'pkg.module:Name'"
        if in_packages(module, self.trusted):
            return None
        if function:
            return TrustProblem(f"is {ref!r}, a function of module {module!r}, and a checkpoint's functions run only "
                                f"if you trust their module ({self.how_to_trust(module)})")
        given_modules = {split_import_string(g)[0] for g in self.given}
        if in_packages(module, (OWN_PACKAGE,)) or module in given_modules or sys.modules.get(module) is not None:
            return None
        return TrustProblem(f"is {ref!r}, whose module {module!r} is neither imported in this process nor trusted, and "
                            f"opening a checkpoint imports nothing by itself: trust it ({self.how_to_trust(module)})")

    def object_problem(self, ref: str, *, function: bool = False) -> str | None:
        """After the import: why the object ``ref`` names may not be used (reached through another module, or a
        function defined outside the trusted modules); None if it may."""
        if ref in self.given:
            return None
        module, attr = split_import_string(ref)
        obj: Any = sys.modules.get(module)
        for part in attr.split("."):
            obj = getattr(obj, part, None)
            if isinstance(obj, types.ModuleType):
                return f"is {ref!r}, which reaches module {obj.__name__!r} through {module!r}; name it directly"
        defined_in = getattr(obj, "__module__", None)
        if function and not (isinstance(defined_in, str) and in_packages(defined_in, self.trusted)):
            return TrustProblem(f"is {ref!r}, a function defined in {defined_in!r}, not in a module you trust "
                                f"({self.how_to_trust(str(defined_in))})")
        return None

    @staticmethod
    def how_to_trust(module: str) -> str:
        """The three ways to trust ``module``, for an error message."""
        return f"rltune rollout --trust {module}; Python: trust=[{module!r}]; or RLTUNE_TRUST={module}"


def given_import_strings(overrides: dict[str, Any]) -> set[str]:
    """What the caller gave in ``overrides`` that names code, as import strings.

    Strings at code-naming keys (``env``, ``callbacks``, ``policy_class``,
    ``env_task_fn``, ... also inside ``evaluation_config`` and
    ``multiagent``), and every class or function given as an object.
    """
    found: set[str] = set()

    def visit(value: Any, at_code_key: bool) -> None:
        if isinstance(value, str):
            if at_code_key:
                found.add(value)
        elif isinstance(value, dict):
            for key, item in value.items():
                visit(item, at_code_key or key in CODE_KEYS)
        elif isinstance(value, (list, tuple, set, frozenset)):
            for item in value:
                visit(item, at_code_key)
        elif isinstance(value, (type, types.FunctionType)):
            found.add(f"{value.__module__}:{value.__qualname__}")
        elif dataclasses.is_dataclass(value):  # a PolicySpec
            visit(vars(value), at_code_key)

    visit(overrides, False)
    return found
