"""What a running study shows: a rich live view on a terminal, plain lines otherwise (or with --quiet).

Both displays take the same calls from the runner: ``message``,
``trial_started``, ``trial_result``, ``trial_ended``, ``refresh`` and
``close``. The plain one prints a line for each trial's start and end, its
first result, and at most one result line every ``result_every_s`` seconds
per trial.
"""

from __future__ import annotations

import math
import sys
import time
from typing import Any, TextIO

from rltune._metrics import MISSING, finite, lookup
from rltune.orchestrator._events import Observer


def _fmt(value: Any) -> str:
    number = finite(value)
    if number is None:
        return "-" if value is None or isinstance(value, float) or value is MISSING else str(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return f"{number:.4g}"


def _params_text(values: dict[str, Any], limit: int = 60) -> str:
    text = ", ".join(f"{k}={_fmt(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v}"
                     for k, v in values.items())
    return text if len(text) <= limit else text[: limit - 3] + "..."


class PlainDisplay(Observer):
    """One line per event, for logs and pipes."""

    def __init__(self, runner: Any, stream: TextIO | None = None, result_every_s: float = 5.0) -> None:
        self.stream = stream or sys.stdout
        self.metric = runner.spec.metric
        self.result_every_s = result_every_s
        self._last: dict[int, float] = {}
        self.best: float | None = None
        self.mode = runner.spec.mode
        self._tracking_said = -math.inf

    def _print(self, text: str) -> None:
        print(text, file=self.stream, flush=True)

    def message(self, text: str) -> None:
        self._print(text)

    def start(self, runner: Any) -> None:
        plan = runner.plan
        self._print(
            f"study {plan.name!r}: {plan.trainable.name}, {plan.total_trials} trials, search {plan.sampler_name}, "
            f"pruner {plan.pruner_name}, {runner.spec.mode} {self.metric}; directory {runner.study_dir}"
        )
        if runner._resumable:
            self._print(f"resuming {len(runner._resumable)} interrupted trial(s)")

    def trial_started(self, a: Any) -> None:
        again = f" (restart {a.failures})" if a.failures else ""
        frm = f" from checkpoint at iteration {a.checkpoint_iteration}" if a.checkpoint else ""
        self._print(f"trial {a.number} started{again}{frm}: {_params_text(a.values, 200) or 'no params'} (seed {a.seed})")

    def trial_result(self, a: Any) -> None:
        now = time.monotonic()
        first = a.number not in self._last
        if first or now - self._last[a.number] >= self.result_every_s or a.outcome:
            self._last[a.number] = now
            self._print(f"trial {a.number} iter {a.iteration}: {self.metric}={_fmt(lookup(a.last_result, self.metric))}")

    def trial_ended(self, a: Any, state: str, value: float | None) -> None:
        if state == "COMPLETE" and value is not None:
            if self.best is None or (value > self.best if self.mode == "max" else value < self.best):
                self.best = value
        shown = f" {self.metric}={_fmt(value)}" if value is not None else ""
        why = f" ({a.reason})" if a.reason else ""
        self._print(f"trial {a.number} {state} after {a.iteration} iterations{shown}{why}")

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
    """A rich live view: progress over trials and a table of the running and latest finished trials."""

    MAX_ROWS = 16

    def __init__(self, runner: Any, stream: TextIO | None = None) -> None:
        super().__init__(runner, stream)
        from rich.console import Console
        from rich.live import Live

        self.console = Console(file=self.stream)
        self.runner = runner
        self.rows: dict[int, dict[str, Any]] = {}
        self.live = Live(console=self.console, refresh_per_second=4, transient=False)
        self._started = False
        self.tracking_line: str | None = None  # MLflow tracking's lag, under the table while it is behind

    def start(self, runner: Any) -> None:
        super().start(runner)
        self.live.start()
        self._started = True

    def _print(self, text: str) -> None:
        self.console.print(text, highlight=False, markup=False, soft_wrap=True)

    def trial_started(self, a: Any) -> None:
        self.rows[a.number] = {"state": "RUNNING", "a": a}

    def trial_result(self, a: Any) -> None:
        self.rows.setdefault(a.number, {"a": a})["state"] = "RUNNING"

    def trial_ended(self, a: Any, state: str, value: float | None) -> None:
        if state == "COMPLETE" and value is not None:
            if self.best is None or (value > self.best if self.mode == "max" else value < self.best):
                self.best = value
        self.rows[a.number] = {"state": state, "a": a, "value": value}
        if state in ("FAIL",):
            self._print(f"trial {a.number} FAIL: {a.reason} (see {a.trial_dir / 'error.txt'})")

    def refresh(self, runner: Any) -> None:
        if self._started:
            self.live.update(self._render(runner))

    def _render(self, runner: Any) -> Any:
        from rich.console import Group
        from rich.progress_bar import ProgressBar
        from rich.table import Table
        from rich.text import Text

        total = runner.plan.total_trials
        done = sum(1 for r in self.rows.values() if r["state"] not in ("RUNNING",))
        bar = Table.grid(padding=(0, 1))
        bar.add_row(
            Text(f"{runner.plan.name}"),
            ProgressBar(total=max(total, 1), completed=done, width=30),
            Text(f"{done}/{total} trials, {len(runner.active)} running, best {self.metric}: "
                 f"{_fmt(self.best) if self.best is not None else '-'}"),
        )
        table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
        for column in ("trial", "state", "iter", self.metric, "params"):
            table.add_column(column, justify="right" if column in ("trial", "iter", self.metric) else "left")
        rows = sorted(self.rows.items(), key=lambda kv: (kv[1]["state"] != "RUNNING", -kv[0]))[: self.MAX_ROWS]
        styles = {"RUNNING": "cyan", "COMPLETE": "green", "PRUNED": "yellow", "FAIL": "red", "INTERRUPTED": "magenta"}
        for number, row in sorted(rows):
            a = row["a"]
            value = row.get("value")
            if value is None and a.last_result is not None:
                value = lookup(a.last_result, self.metric)
            table.add_row(str(number), Text(row["state"], style=styles.get(row["state"], "")), str(a.iteration),
                          _fmt(value), _params_text(a.values))
        return Group(bar, table, *([Text(self.tracking_line, style="yellow")] if self.tracking_line else []))

    def tracking_status(self, status: Any) -> None:
        self.tracking_line = status.text() if status.behind else None

    def close(self) -> None:
        if self._started:
            self.refresh(self.runner)
            self.live.stop()
            self._started = False


def make_display(runner: Any, *, verbose: int, quiet: bool = False, stream: TextIO | None = None) -> PlainDisplay | None:
    """None (verbose 0), a live view (a terminal, not quiet), or plain lines."""
    if verbose <= 0:
        return None
    out = stream or sys.stdout
    if not quiet and getattr(out, "isatty", lambda: False)():
        return LiveDisplay(runner, out)
    return PlainDisplay(runner, out)
