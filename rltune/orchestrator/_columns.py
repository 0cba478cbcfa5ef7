"""Trials in columns, for the live view and ``rltune show``: values rounded, params named short, tables that fit.

The rules (docs/mlflow-ui.md states them for users):

- numbers: ints as they are, floats to :data:`SIGNIFICANT` significant
  digits (``0.0006042851578845063`` -> ``0.0006043``), lists without spaces
  (``[64,64]``);
- a searched param is named by the shortest tail of its dotted path that no
  other searched param ends with (``model.fcnet_hiddens`` -> ``fcnet_hiddens``;
  ``policies.a.lr`` and ``policies.b.lr`` -> ``a.lr``, ``b.lr``); each
  shortened name gets a legend entry, nothing is cut;
- a table gets one column per searched param when that fits the width;
  otherwise one ``params`` column of ``name=value`` items that wraps, so
  every value stays visible.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Any, Sequence

from rltune._metrics import MISSING, as_number

SIGNIFICANT = 4
GAP = 1  # one space between columns (the table collapses its padding)
MIN_WRAP = 24  # the narrowest wrapping column worth having


def fmt_value(value: Any) -> str:
    """A value for a cell: ints whole, floats to :data:`SIGNIFICANT` significant digits, lists without spaces."""
    if value is None or value is MISSING:
        return "-"
    if isinstance(value, bool) or isinstance(value, str):
        return str(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(fmt_value(v) for v in value) + "]"
    number = as_number(value)
    if number is None:
        return str(value)
    if isinstance(value, numbers.Integral):  # numpy's ints too
        return str(int(value))
    if not math.isfinite(number):
        return str(number)
    return f"{number:.{SIGNIFICANT}g}"


def short_names(names: Sequence[str]) -> dict[str, str]:
    """Each dotted name -> the shortest tail of its keys that no other name ends with (see the module docstring)."""
    split = {name: name.split(".") for name in names}
    shorts = {}
    for name, parts in split.items():
        for k in range(1, len(parts) + 1):
            tail = parts[-k:]
            if not any(other != name and others[-k:] == tail for other, others in split.items()):
                break
        shorts[name] = ".".join(tail)
    return shorts


def legend(shorts: dict[str, str]) -> str:
    """``"fcnet_hiddens = model.fcnet_hiddens, ..."`` for the names that were shortened ("" if none)."""
    return ", ".join(f"{short} = {name}" for name, short in shorts.items() if short != name)


@dataclass
class TrialRow:
    """One trial: its fixed cells (str or rich Text), its searched values by full name, a free-text tail."""

    cells: list[Any]
    params: dict[str, Any]
    tail: str = ""


@dataclass
class TrialTable:
    """Fixed columns (header, justify), the searched params' full names, an optional wrapping last column."""

    columns: list[tuple[str, str]]
    params: list[str]
    rows: list[TrialRow] = field(default_factory=list)
    tail: str | None = None

    def render(self, width: int) -> tuple[Any, str]:
        """A rich Table that fits ``width`` columns, and the legend of shortened names ("" if none)."""
        shorts = short_names(self.params)
        if self.params and self._wide_width(shorts) <= width:
            return self._wide(shorts), legend(shorts)
        return self._compact(shorts), legend(shorts)

    def _fixed_widths(self) -> list[int]:
        from rich.cells import cell_len

        return [max([cell_len(header)] + [cell_len(_plain(row.cells[i])) for row in self.rows])
                for i, (header, _) in enumerate(self.columns)]

    def _wide_width(self, shorts: dict[str, str]) -> int:
        from rich.cells import cell_len

        widths = self._fixed_widths() + [
            max([cell_len(shorts[p])] + [cell_len(fmt_value(row.params.get(p))) for row in self.rows])
            for p in self.params]
        if self.tail is not None:
            widths.append(min(MIN_WRAP, max([cell_len(self.tail)] + [cell_len(row.tail) for row in self.rows])))
        return sum(widths) + GAP * (len(widths) - 1)

    def _table(self) -> Any:
        from rich.table import Table

        table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold", collapse_padding=True)
        for header, justify in self.columns:
            table.add_column(header, justify=justify, no_wrap=True)
        return table

    def _wide(self, shorts: dict[str, str]) -> Any:
        table = self._table()
        for p in self.params:
            table.add_column(shorts[p], no_wrap=True)
        if self.tail is not None:
            table.add_column(self.tail, overflow="fold", ratio=1)
        for row in self.rows:
            cells = [*row.cells, *(fmt_value(row.params.get(p)) for p in self.params)]
            table.add_row(*cells, *([row.tail] if self.tail is not None else []))
        return table

    def _compact(self, shorts: dict[str, str]) -> Any:
        table = self._table()
        header = "params" + (f" / {self.tail}" if self.tail is not None else "")
        table.add_column(header, overflow="fold", ratio=1, min_width=MIN_WRAP)
        for row in self.rows:
            text = ", ".join(f"{shorts[p]}={fmt_value(row.params.get(p))}" for p in self.params if p in row.params)
            if row.tail:
                text = f"{text}\n{row.tail}" if text else row.tail
            table.add_row(*row.cells, text)
        return table


def _plain(cell: Any) -> str:
    return getattr(cell, "plain", cell if isinstance(cell, str) else str(cell))
