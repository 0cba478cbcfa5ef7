"""Checking that an object implements a contract of methods when it is registered, not when one is first called."""

from __future__ import annotations

from typing import TypeVar

T = TypeVar("T")


def methods_of(contract: type) -> tuple[str, ...]:
    """The public methods ``contract`` (a base class or a ``Protocol``) declares itself, in their order."""
    return tuple(name for name, member in vars(contract).items() if not name.startswith("_") and callable(member))


def require_methods(obj: T, contract: type, role: str) -> T:
    """``obj`` itself if it has every method of ``contract``; else a TypeError naming those it lacks.

    ``role`` says what ``obj`` was registered as (e.g. "a study observer").
    An instance of a base class with no-op defaults always passes.
    """
    missing = [name for name in methods_of(contract) if not callable(getattr(obj, name, None))]
    if missing:
        raise TypeError(f"{type(obj).__qualname__} cannot be {role}: it lacks {', '.join(missing)} "
                        f"(the methods of {contract.__module__}.{contract.__qualname__})")
    return obj
