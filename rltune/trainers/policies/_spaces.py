"""Which action spaces an algorithm takes: one clear :class:`SpaceError` for the others.

Observations go through the preprocessor catalog (``_preprocessors.py``),
actions through the distribution catalog (``_action_dists.py``).
"""

from __future__ import annotations

import gymnasium as gym

from rltune.errors import SpaceError


def check_action_space(space: gym.Space, algorithm: str, allowed: tuple[type, ...], hint: str = "") -> None:
    """Raise :class:`SpaceError` unless ``space`` is one of ``allowed`` for ``algorithm`` (``hint``: what to use instead)."""
    if not isinstance(space, allowed):
        names = " or ".join(t.__name__ for t in allowed)
        raise SpaceError(
            f"{algorithm} needs a {names} action space, but the action space is {type(space).__name__}: {space}"
            + (f" ({hint})" if hint else "")
        )
