"""A study's progress for the live view: elapsed time and an ETA from the study's budget.

The rule (stated to users in docs/mlflow-ui.md):

- work is counted in trials: the study's budget is its number of trials
  (``n_trials``, or grid points x ``num_samples``);
- a trial's share of its work is the fraction of its stop bound it reached:
  the largest ``value / threshold`` over its ``stop`` criteria on counters
  (``training_iteration``, ``timesteps_total``, ``time_total_s``, ... see
  :data:`rltune.orchestrator._stop.COUNTERS`); a finished trial without such
  a bound counts 1, a running one 0;
- ETA = elapsed x remaining work / work done in this session, where a
  trial to come, or a running one, is expected to do as much work as the
  trials that finished in this session did on average (stopped early by a
  reward threshold or a pruner, they did less than their bound); before any
  trial finished, a trial is expected to run to its bound and the ETA is an
  upper bound, shown ``ETA ≤ ...``;
- the study's ``timeout_s`` caps it (no trial starts after it);
- "ETA unknown" until some work is done, and in a study shared with other
  workers (this one sees only its own trials).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from rltune._metrics import finite, lookup
from rltune.orchestrator._stop import COUNTERS


def fmt_duration(seconds: float) -> str:
    """``42s``, ``3m05s``, ``1h02m``, ``2d03h``."""
    s = max(0, int(round(seconds)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def bound_fraction(criteria: Mapping[str, float], result: Mapping[str, Any] | None) -> float | None:
    """How far ``result`` is toward the counter bounds of ``criteria`` (0..1), None without a counter bound."""
    fractions = []
    for key, threshold in criteria.items():
        if key.replace(".", "/").rsplit("/", 1)[-1] not in COUNTERS or not threshold or threshold <= 0:
            continue
        value = finite(lookup(result, key)) if result else None
        fractions.append(min(1.0, max(0.0, (value or 0.0) / threshold)))
    return max(fractions) if fractions else None


@dataclass
class StudyProgress:
    """The trials of one session, as the runner's events tell them; :meth:`text` says elapsed and ETA."""

    total: int
    finished_before: int = 0  # trials that were finished when this session started (a resumed study)
    timeout_s: float | None = None
    shared: bool = False
    _start: dict[int, float] = field(default_factory=dict)  # fraction of each trial at its first event here
    _now: dict[int, float] = field(default_factory=dict)  # its fraction now
    _finished: set[int] = field(default_factory=set)
    _resumed_from: dict[int, int] = field(default_factory=dict)  # the checkpoint iteration a trial resumed from

    def started(self, number: int, from_iteration: int = 0) -> None:
        """A trial started here, fresh or (``from_iteration`` > 0) from a checkpoint of an earlier session."""
        self._resumed_from.setdefault(number, from_iteration)

    def update(self, number: int, criteria: Mapping[str, float], result: Mapping[str, Any] | None,
               iteration: int = 0, *, finished: bool = False) -> None:
        """A trial's result at ``iteration`` (or its end, ``finished``)."""
        fraction = bound_fraction(criteria, result)
        if fraction is None:
            fraction = 1.0 if finished else 0.0
        if number not in self._start:
            # a resumed trial did its first iterations before this session: not work done here
            before = self._resumed_from.get(number, 0)
            self._start[number] = fraction * before / iteration if 0 < before < iteration else 0.0
        self._now[number] = fraction
        if finished:
            self._finished.add(number)

    @property
    def done(self) -> int:
        """Trials finished, before this session and in it."""
        return self.finished_before + len(self._finished)

    def eta(self, elapsed: float) -> tuple[float, bool] | None:
        """Seconds until the study's budget is done and whether that is an upper bound (no trial finished
        yet: trials are assumed to run to their stop bound); None if unknown (see the module docstring)."""
        if self.shared:
            return None
        work = sum(self._now[n] - self._start[n] for n in self._now)
        if work <= 0 or elapsed <= 0:
            return None
        finished = [self._now[n] for n in self._finished]
        size = sum(finished) / len(finished) if finished else 1.0  # a trial's expected share of its bound
        running = [n for n in self._now if n not in self._finished]
        not_started = max(0, self.total - self.done - len(running))
        remaining = not_started * size + sum(max(0.0, size - self._now[n]) for n in running)
        return elapsed * remaining / work, not finished

    def text(self, elapsed: float, running: int) -> str:
        """``elapsed 1m05s, ETA 2m10s`` (or why there is none)."""
        head = f"elapsed {fmt_duration(elapsed)}"
        if self.done >= self.total and not running:
            return f"{head}, all {self.total} trials done"
        left = None if self.timeout_s is None else self.timeout_s - elapsed
        if left is not None and left <= 0:
            return f"{head}, timeout_s reached: {running} running trial(s) finish" if running else head
        estimate = self.eta(elapsed)
        if estimate is None:
            why = " (shared study: other workers run trials too)" if self.shared else ""
            return f"{head}, ETA unknown{why}" + (f", timeout in {fmt_duration(left)}" if left is not None else "")
        seconds, upper = estimate
        if left is not None and left < seconds:
            return f"{head}, ETA {fmt_duration(left)} (timeout_s)"
        return f"{head}, ETA {'≤ ' if upper else ''}{fmt_duration(seconds)}"
