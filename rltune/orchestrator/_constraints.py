"""Constraints of a study: ``constraints: ["info/learner/default_policy/kl <= 0.05", ...]``.

Each constraint names a result key, ``<=`` or ``>=``, and a finite number.
When a trial completes, each constraint's violation in its last result
(``value - bound`` for ``<=``, ``bound - value`` for ``>=``; feasible when
<= 0) is given to Optuna (``Trial.set_constraint``, one per constraint,
named by its text), where the samplers read it (NSGA-II/III's constrained
domination, TPE's and GP's constrained variants), and where the study's
``best_trial`` / ``best_trials`` (the Pareto front) keep feasible trials only.
A trial whose last result lacks a constraint's key, or holds a value that is
not a finite number, FAILs with the constraint named.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Sequence

from rltune._metrics import MISSING, finite, lookup

_FORM = re.compile(r"^\s*(?P<key>[^\s<>=]+)\s*(?P<op><=|>=)\s*(?P<bound>\S+)\s*$")


@dataclass(frozen=True)
class Constraint:
    """``key op bound``: a trial is feasible when its last result's ``key`` satisfies it."""

    key: str
    op: str  # "<=" or ">="
    bound: float

    @property
    def text(self) -> str:
        """The constraint as written (its name in Optuna)."""
        return f"{self.key} {self.op} {self.bound:g}"

    def violation(self, value: float) -> float:
        """How far ``value`` is from satisfying the constraint (<= 0: satisfied)."""
        return value - self.bound if self.op == "<=" else self.bound - value


def parse_constraints(entries: Sequence[Any]) -> tuple[list[Constraint], list[str]]:
    """The constraints, and a problem per entry that is not ``key <= number`` / ``key >= number``."""
    constraints, problems = [], []
    for i, entry in enumerate(entries):
        match = _FORM.match(entry) if isinstance(entry, str) else None
        bound = _number(match.group("bound")) if match else None
        if bound is None:
            problems.append(f"constraints.{i}: {entry!r} is not 'KEY <= NUMBER' or 'KEY >= NUMBER' (a result key, "
                            "<= or >=, a finite number), e.g. 'info/learner/default_policy/kl <= 0.05'")
            continue
        constraint = Constraint(match.group("key"), match.group("op"), bound)
        if any(c.text == constraint.text for c in constraints):
            problems.append(f"constraints.{i}: {entry!r} is given twice")
            continue
        constraints.append(constraint)
    return constraints, problems


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def violations(result: dict[str, Any] | None, constraints: Sequence[Constraint]) -> tuple[dict[str, float], str | None]:
    """Each constraint's violation in ``result`` by its text, or why one cannot be computed (the key is missing)."""
    values: dict[str, float] = {}
    for c in constraints:
        found = lookup(result or {}, c.key)
        value = finite(found) if found is not MISSING else None
        if value is None:
            shown = "missing" if found is MISSING else f"{found!r}, not a finite number"
            return {}, f"constraint {c.text!r}: {c.key!r} is {shown} in the last result"
        values[c.text] = c.violation(value)
    return values, None


def record_constraints(trial: Any, values: dict[str, float]) -> None:
    """Give Optuna the trial's constraint violations (before it is told COMPLETE: samplers read them then)."""
    for text, violation in values.items():
        trial.set_constraint(text, violation)


def feasible(frozen: Any) -> bool:
    """Whether a stored trial satisfies every constraint Optuna holds for it (true without constraints)."""
    return all(v <= 0 for v in (getattr(frozen, "constraints", None) or {}).values())
