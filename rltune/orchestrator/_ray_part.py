"""What a Ray Tune scheduler, searcher or callback object contributes to a study, and the checks they share.

A Ray name (``ASHAScheduler(...)``, ``OptunaSearch(...)``, ...) keeps its
arguments and answers :meth:`RayName.study_part` with a :class:`StudyPart`;
:func:`rltune.orchestrator._ray_translate.translate_search` merges the parts
into the study's fields. Every constructor argument is either honoured or
refused by name: a refusal is a :class:`~rltune.errors.ConfigError` raised by
the constructor, naming the class and the argument.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from rltune.errors import ConfigError


@dataclass
class StudyPart:
    """Study fields one Ray object sets: ``fields`` (search_alg or scheduler, ...), and what is merged.

    ``metric`` / ``mode`` must agree with the study's and the other parts';
    ``stop`` criteria join the study's (the lower value of a key wins);
    ``concurrency`` caps the trials at once; ``points`` are configs run first.
    """

    owner: str
    fields: dict[str, Any] = field(default_factory=dict)
    metric: str | None = None
    mode: str | None = None
    stop: dict[str, Any] = field(default_factory=dict)
    concurrency: int | None = None
    points: list[dict[str, Any]] | None = None


class RayName:
    """Base of rltune's Ray Tune names: the class name reported in errors and the study part they make."""

    def study_part(self) -> StudyPart:
        """The study fields this object sets (see :class:`StudyPart`)."""
        raise NotImplementedError

    def _refuse(self, argument: str, value: Any, why: str) -> ConfigError:
        return ConfigError(f"{argument}={_short(value)}: {why}", where=type(self).__name__)

    def _metric_mode(self, metric: Any, mode: Any, *, several: bool = False) -> tuple[Any, Any]:
        """``metric``/``mode`` checked: one result key and max/min, or (``several``) lists of them."""
        if several and isinstance(metric, (list, tuple)) and metric and all(isinstance(m, str) for m in metric):
            if isinstance(mode, (list, tuple)) and all(m in ("max", "min") for m in mode):
                if len(mode) != len(metric):
                    raise self._refuse("mode", mode, f"needs one mode per metric ({len(metric)})")
                return list(metric), list(mode)
            if mode not in (None, "max", "min"):
                raise self._refuse("mode", mode, "must be 'max' or 'min', or a list of them (one per metric)")
            return list(metric), mode
        if metric is not None and not isinstance(metric, str):
            hint = ", or a list of them (a multi-objective study)" if several else \
                "; a multi-objective study takes a list in TuneConfig(metric=[...]) or OptunaSearch(metric=[...])"
            raise self._refuse("metric", metric, f"must be one result key (a string){hint}")
        if mode not in (None, "max", "min"):
            raise self._refuse("mode", mode, "must be 'max' or 'min'")
        return metric, mode

    def _int(self, argument: str, value: Any, low: int) -> int:
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise self._refuse(argument, value, f"must be an int >= {low}")
        return value

    def _number(self, argument: str, value: Any, low: float, *, above: bool = False) -> float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        if not ok or value < low or (above and value == low):
            raise self._refuse(argument, value, f"must be a number {'>' if above else '>='} {low:g}")
        return value

    def _seed(self, argument: str, value: Any) -> int | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise self._refuse(argument, value, "must be an int seed >= 0 (a numpy RandomState or Generator is not "
                                                "taken: the study's sampler seeds itself from an int)")
        return value

    def _points(self, value: Any) -> list[dict[str, Any]] | None:
        if value is None:
            return None
        if not isinstance(value, (list, tuple)) or not all(isinstance(p, dict) for p in value):
            raise self._refuse("points_to_evaluate", value, "must be a list of dicts of config values")
        return [dict(p) for p in value]

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("_"))
        return f"{type(self).__name__}({shown})"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
