"""How a config builder's methods are called: a misused call is a ConfigError naming the method, never a TypeError.

Python's own errors for a bad call (``PPOConfig().training(0.1)``: "takes 1
positional argument but 2 were given", counting ``self``;
``PPOConfig.training(lr=0.1)`` on the class: "missing 1 required positional
argument: 'self'") name neither the builder nor what to write instead.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, TypeVar

from rltune.errors import ConfigError

F = TypeVar("F", bound=Callable[..., Any])


def builder_method(method: F) -> F:
    """``method`` of a config builder, whose misused calls raise :class:`ConfigError` naming it.

    Checked before the method runs: that it is called on a builder (an
    instance; the class itself for a classmethod), and that its arguments
    bind to its signature (positional values where it takes keywords, a
    missing or an unexpected argument).
    """
    signature = inspect.signature(method)
    params = list(signature.parameters.values())
    positional = [p.name for p in params[1:] if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    name = method.__name__

    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        target = args[0] if args else None
        if getattr(target, "_is_config_builder", False) is not True:
            raise ConfigError(
                f"called on the class, not on a config: make one first, e.g. PPOConfig().{name}(...)",
                where=f"{method.__qualname__}()",
            )
        try:
            signature.bind(*args, **kwargs)
        except TypeError as exc:
            owner = target.__name__ if isinstance(target, type) else type(target).__name__
            raise ConfigError(_call_problem(name, signature, positional, args[1:], exc), where=f"{owner}.{name}()") from None
        return method(*args, **kwargs)

    return call  # type: ignore[return-value]


def _call_problem(name: str, signature: inspect.Signature, positional: list[str], values: tuple[Any, ...],
                  exc: TypeError) -> str:
    """What is wrong with a call that does not bind: too many positional values, else inspect's words."""
    if len(values) <= len(positional):
        return str(exc)  # names the argument: "missing a required argument: 'config_dict'"
    extra = ", ".join(f"{v!r:.40}" for v in values[len(positional):])
    if positional:
        return (f"takes at most {len(positional)} positional argument(s) ({', '.join(positional)}), "
                f"but got also {extra}: pass the other settings as keywords")
    if any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values()):
        return f"takes keywords only (e.g. .{name}(key=value)), but got the positional value(s) {extra}"
    return f"takes no positional argument, but got {extra}"
