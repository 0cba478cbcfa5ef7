"""What a running study shows: a rich live view on a terminal, plain lines otherwise (or with --quiet).

Both displays take the same calls from the runner: ``message``,
``trial_started``, ``trial_result``, ``trial_ended``, ``refresh`` and
``close``, and ``note(topic, text)`` from whoever has a status to show
(one line per topic; None removes it). The plain one prints a line for each
trial's start and end (with the study's progress, elapsed time and ETA),
its first result, and at most one result line every ``result_every_s``
seconds per trial.

The live view, from the top: the study's name, a progress bar and its trial
counts; elapsed time, ETA (:mod:`._progress`) and the best value; one line
per note; the table of the running and latest finished trials, one column
per searched param when the width allows, else one wrapping ``params``
column (:mod:`._columns`); the legend of shortened param names. No line is
wider than the terminal.
"""

from __future__ import annotations

import math
import sys
import time
from typing import Any, TextIO

from rltune._metrics import lookup
from rltune.orchestrator._columns import TrialRow, TrialTable, fmt_value
from rltune.orchestrator._events import Observer
from rltune.orchestrator._objectives import as_list, first_value
from rltune.orchestrator._progress import StudyProgress

STATE_STYLES = {"RUNNING": "cyan", "COMPLETE": "green", "PRUNED": "yellow", "FAIL": "red", "INTERRUPTED": "magenta"}
BAR_WIDTH = (10, 30)  # the progress bar's narrowest and widest


def _params_text(values: dict[str, Any]) -> str:
    return ", ".join(f"{k}={fmt_value(v)}" for k, v in values.items())


class PlainDisplay(Observer):
    """One line per event, for logs and pipes."""

    def __init__(self, runner: Any, stream: TextIO | None = None, result_every_s: float = 5.0) -> None:
        self.stream = stream or sys.stdout
        self.runner = runner
        self.metric = as_list(runner.spec.metric)[0]  # a multi-objective study: its first metric (show lists the front)
        self.result_every_s = result_every_s
        self._last: dict[int, float] = {}
        self.best: float | None = None
        self.best_trial: int | None = None
        self.mode = as_list(runner.spec.mode)[0]
        self.notes: dict[str, str] = {}
        self.progress = StudyProgress(runner.plan.total_trials, timeout_s=runner.spec.timeout_s)
        self._t0 = time.monotonic()
        self._tracking_said = -math.inf

    def _print(self, text: str) -> None:
        print(text, file=self.stream, flush=True)

    def message(self, text: str) -> None:
        self._print(text)

    def note(self, topic: str, text: str | None) -> None:
        """A status line about ``topic`` (e.g. MLflow's lag behind the study); None removes it."""
        if text is None:
            self.notes.pop(topic, None)
        elif self.notes.get(topic) != text:
            self.notes[topic] = text
            self._print(text)

    def start(self, runner: Any) -> None:
        plan = runner.plan
        self._t0 = getattr(runner, "start_time", self._t0)  # the clock of the study's timeout_s
        self.progress.finished_before = _finished_before(runner)
        self.progress.shared = bool(getattr(runner, "shared", False))
        self._print(
            f"study {plan.name!r}: {plan.trainable.name}, {plan.total_trials} trials, search {plan.sampler_name}, "
            f"pruner {plan.pruner_name}, {runner.spec.mode} {self.metric}; directory {runner.study_dir}"
        )
        if runner.resumable:
            self._print(f"resuming {len(runner.resumable)} interrupted trial(s)")

    def elapsed(self) -> float:
        """Seconds since the study (this session) started."""
        return time.monotonic() - self._t0

    def progress_text(self) -> str:
        """``7/16 trials, elapsed 1m05s, ETA 2m10s``."""
        running = len(self.runner.active)
        return f"{self.progress.done}/{self.progress.total} trials, {self.progress.text(self.elapsed(), running)}"

    def trial_started(self, a: Any) -> None:
        self.progress.started(a.number, a.checkpoint_iteration if a.checkpoint else 0)
        again = f" (restart {a.failures})" if a.failures else ""
        frm = f" from checkpoint at iteration {a.checkpoint_iteration}" if a.checkpoint else ""
        self._print(f"trial {a.number} started{again}{frm}: {_params_text(a.values) or 'no params'} (seed {a.seed})")

    def trial_result(self, a: Any) -> None:
        self.progress.update(a.number, a.stop.criteria, a.last_result, a.iteration)
        now = time.monotonic()
        first = a.number not in self._last
        if first or now - self._last[a.number] >= self.result_every_s or a.outcome:
            self._last[a.number] = now
            value = fmt_value(lookup(a.last_result, self.metric))
            self._print(f"trial {a.number} iter {a.iteration}: {self.metric}={value}")

    def _ended(self, a: Any, state: str, value: float | None) -> None:
        value = first_value(value)
        if state != "INTERRUPTED":
            self.progress.update(a.number, a.stop.criteria, a.last_result, a.iteration, finished=True)
        if state == "COMPLETE" and value is not None:
            better = self.best is None or (value > self.best if self.mode == "max" else value < self.best)
            if better or (value == self.best and a.number < self.best_trial):  # a tie: the first trial, as Optuna
                self.best, self.best_trial = value, a.number

    def trial_ended(self, a: Any, state: str, value: float | None) -> None:
        self._ended(a, state, value)
        shown = f" {self.metric}={fmt_value(first_value(value))}" if value is not None else ""
        why = f" ({a.reason})" if a.reason else ""
        self._print(f"trial {a.number} {state} after {a.iteration} iterations{shown}{why} [{self.progress_text()}]")

    def refresh(self, runner: Any) -> None:
        pass

    def close(self) -> None:
        pass

    # -- MLflow tracking's lag (issue 24): a line once it is over 15 s behind (a trial's end may hold it up for a
    # few seconds: not worth a line each time), again every 30 s, and one when it caught up
    TRACKING_BEHIND_S, TRACKING_EVERY_S = 15.0, 30.0

    def tracking_status(self, status: Any) -> None:
        now = time.monotonic()
        if status.behind and status.lag_s > self.TRACKING_BEHIND_S:
            if now - self._tracking_said >= self.TRACKING_EVERY_S:
                self._tracking_said = now
                self._print(status.text())
        elif not status.behind and self._tracking_said > -math.inf:
            self._tracking_said = -math.inf
            self._print(status.text())


class LiveDisplay(PlainDisplay):
    """A rich live view: progress, elapsed time and ETA, notes, and a table of the running and latest trials."""

    MAX_ROWS = 16

    def __init__(self, runner: Any, stream: TextIO | None = None, width: int | None = None) -> None:
        super().__init__(runner, stream)
        from rich.console import Console
        from rich.live import Live

        self.console = Console(file=self.stream, width=width)
        self.rows: dict[int, dict[str, Any]] = {}
        self.live = Live(console=self.console, refresh_per_second=4, transient=False)
        self._started = False

    def start(self, runner: Any) -> None:
        super().start(runner)
        self.live.start()
        self._started = True

    def _print(self, text: str) -> None:
        self.console.print(text, highlight=False, markup=False, soft_wrap=True)

    def note(self, topic: str, text: str | None) -> None:
        if text is None:
            self.notes.pop(topic, None)
        else:
            self.notes[topic] = text

    def trial_started(self, a: Any) -> None:
        self.progress.started(a.number, a.checkpoint_iteration if a.checkpoint else 0)
        self.rows[a.number] = {"state": "RUNNING", "a": a}

    def trial_result(self, a: Any) -> None:
        self.progress.update(a.number, a.stop.criteria, a.last_result, a.iteration)
        self.rows.setdefault(a.number, {"a": a})["state"] = "RUNNING"

    def trial_ended(self, a: Any, state: str, value: float | None) -> None:
        self._ended(a, state, value)
        self.rows[a.number] = {"state": state, "a": a, "value": first_value(value)}
        if state in ("FAIL",):
            self._print(f"trial {a.number} FAIL: {a.reason} (see {a.trial_dir / 'error.txt'})")

    def refresh(self, runner: Any) -> None:
        if self._started:
            self.live.update(self._render(runner))

    def _render(self, runner: Any) -> Any:
        from rich.console import Group
        from rich.text import Text

        width = self.console.width
        header = self.metric if len(self.metric) <= width // 3 else "value"  # a long metric name: its legend below
        table, names = self._table(runner, header).render(width)
        parts = [*self._header(runner, width), table]
        if header != self.metric:
            parts.append(Text(f"value = {self.metric}", overflow="fold"))
        if names:
            parts.append(Text(f"params: {names}"))
        return Group(*parts)

    def _header(self, runner: Any, width: int) -> list[Any]:
        """The status lines above the table, each within ``width`` (see the module docstring)."""
        from rich.progress_bar import ProgressBar
        from rich.table import Table
        from rich.text import Text

        name = runner.plan.name
        counts = f"{self.progress.done}/{self.progress.total} trials, {len(runner.active)} running"
        lines: list[Any] = []
        bar_width = min(BAR_WIDTH[1], width - len(name) - len(counts) - 2)
        if bar_width < BAR_WIDTH[0]:  # a long name: on a line of its own
            lines.append(Text(name, overflow="fold"))
            name, bar_width = "", max(BAR_WIDTH[0], min(BAR_WIDTH[1], width - len(counts) - 1))
        grid = Table.grid(padding=(0, 1))
        grid.add_row(*([Text(name)] if name else []),
                     ProgressBar(total=max(self.progress.total, 1), completed=self.progress.done, width=bar_width),
                     Text(counts))
        lines.append(grid)
        timing = self.progress.text(self.elapsed(), len(runner.active))
        best = (f"best {self.metric} = {fmt_value(self.best)} (trial {self.best_trial})" if self.best is not None
                else f"best {self.metric}: -")
        if len(timing) + 3 + len(best) <= width:
            lines.append(Text(f"{timing}   {best}"))
        else:
            lines += [Text(timing, overflow="fold"), Text(best, overflow="fold")]
        lines += [Text(note, overflow="fold") for note in self.notes.values()]
        return lines

    def _table(self, runner: Any, metric_header: str) -> TrialTable:
        from rich.text import Text

        columns = [("trial", "right"), ("state", "left"), ("iter", "right"), (metric_header, "right")]
        table = TrialTable(columns, [p.name for p in runner.plan.space.params])
        rows = sorted(self.rows.items(), key=lambda kv: (kv[1]["state"] != "RUNNING", -kv[0]))[: self.MAX_ROWS]
        for number, row in sorted(rows):
            a = row["a"]
            value = row.get("value")
            if value is None and a.last_result is not None:
                value = lookup(a.last_result, self.metric)
            cells = [str(number), Text(row["state"], style=STATE_STYLES.get(row["state"], "")), str(a.iteration),
                     fmt_value(value)]
            table.rows.append(TrialRow(cells, a.values))
        return table

    def tracking_status(self, status: Any) -> None:
        self.note("tracking", status.text() if status.behind else None)

    def close(self) -> None:
        if self._started:
            self.refresh(self.runner)
            self.live.stop()
            self._started = False


def _finished_before(runner: Any) -> int:
    """Trials of the study finished before this session (a resumed study), but those a retry will replace."""
    study = getattr(runner, "study", None)
    if study is None:
        return 0
    from rltune.orchestrator._retry import live_trials

    finished = sum(1 for t in live_trials(study.get_trials(deepcopy=False)) if t.state.is_finished())
    return max(0, finished - len(getattr(runner, "retries", ())))


def make_display(runner: Any, *, verbose: int, quiet: bool = False, stream: TextIO | None = None) -> PlainDisplay | None:
    """None (verbose 0), a live view (a terminal, not quiet), or plain lines."""
    if verbose <= 0:
        return None
    out = stream or sys.stdout
    if not quiet and getattr(out, "isatty", lambda: False)():
        return LiveDisplay(runner, out)
    return PlainDisplay(runner, out)
