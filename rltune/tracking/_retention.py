"""Which uploaded checkpoints a trial's run keeps: a pure function of the checkpoints, N and the mode."""

from __future__ import annotations

import math
from typing import Sequence


def best_checkpoint(checkpoints: Sequence[tuple[str, float | None]], mode: str) -> str | None:
    """The name of the best-scored checkpoint (``mode`` "max" or "min"); None if none has a finite score."""
    scored = [(score, name) for name, score in checkpoints if score is not None and math.isfinite(score)]
    if not scored:
        return None
    return (max(scored) if mode == "max" else min(scored))[1]


def checkpoints_to_drop(checkpoints: Sequence[tuple[str, float | None]], keep: int | None, mode: str) -> list[str]:
    """The checkpoints to delete so that the ``keep`` latest and the best one stay.

    ``checkpoints``: ``(name, score)``, oldest first; ``keep`` None or 0 keeps all.
    """
    if not keep or len(checkpoints) <= keep:
        return []
    kept = {name for name, _ in checkpoints[-keep:]}
    best = best_checkpoint(checkpoints, mode)
    if best is not None:
        kept.add(best)
    return [name for name, _ in checkpoints if name not in kept]
