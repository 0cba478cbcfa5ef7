"""A PBT study's ``plots/pbt_hyperparams.png``: the population's hyperparameters over time, in the parent run.

One panel per mutated hyperparameter, one step line per trial, x the
trial's training iteration, a marker at each exploit. The series come from
the trials' user attrs in the Optuna storage (written by the orchestrator's
PBT scheduler): ``pbt_initial`` (the numeric mutated values a member started
with), ``pbt_lineage`` (one ``{iteration, source, changed}`` per exploit), and
the last step of the trial's intermediate values (where its line ends).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence

INITIAL = "pbt_initial"  # the names of the scheduler's user attrs (rltune.orchestrator._pbt)
LINEAGE = "pbt_lineage"
FILE = "pbt_hyperparams.png"

Series = dict[str, dict[int, list[tuple[int, float, bool]]]]  # hyperparameter -> trial -> [(iteration, value, exploit)]


def pbt_series(trials: Sequence[Any]) -> Series:
    """Each hyperparameter's value over iterations, per trial: ``{name: {trial: [(iteration, value, exploit)]}}``.

    A trial's line starts at iteration 0 with its ``pbt_initial`` values, has
    a point flagged as an exploit at each exploit's iteration, and ends at its
    last reported step. Trials with neither attr are left out (not PBT).
    """
    series: Series = {}
    for trial in trials:
        attrs = getattr(trial, "user_attrs", {}) or {}
        initial = attrs.get(INITIAL) if isinstance(attrs.get(INITIAL), dict) else {}
        steps = [s for s in attrs.get(LINEAGE) or [] if isinstance(s, dict)]
        if not initial and not steps:
            continue
        current = {k: float(v) for k, v in initial.items() if _number(v)}
        points: dict[str, list[tuple[int, float, bool]]] = {k: [(0, v, False)] for k, v in current.items()}
        for step in steps:
            iteration = int(step.get("iteration") or 0)
            for key, value in (step.get("changed") or {}).items():
                if _number(value):
                    current[key] = float(value)
                    points.setdefault(key, []).append((iteration, float(value), True))
        end = max([*(getattr(trial, "intermediate_values", {}) or {}), 0])
        for key, line in points.items():
            if end > line[-1][0]:
                line.append((end, line[-1][1], False))
            series.setdefault(key, {})[trial.number] = line
    return series


def pbt_hyperparams(series: Series, path: str | Path) -> None:
    """Draw :func:`pbt_series`'s output (one panel per hyperparameter, a line per trial) and save a PNG."""
    from matplotlib.figure import Figure

    names = sorted(series)
    fig = Figure(figsize=(8, 2.2 * max(len(names), 1) + 0.6), dpi=100)
    axes = fig.subplots(max(len(names), 1), 1, sharex=True, squeeze=False)[:, 0]
    for ax, name in zip(axes, names):
        for number, line in sorted(series[name].items()):
            xs, ys = [p[0] for p in line], [p[1] for p in line]
            drawn = ax.step(xs, ys, where="post", linewidth=1.2, label=f"trial {number}")[0]
            exploits = [p for p in line if p[2]]
            ax.plot([p[0] for p in exploits], [p[1] for p in exploits], "o", color=drawn.get_color(), markersize=4)
        positive = all(p[1] > 0 for line in series[name].values() for p in line)
        values = [p[1] for line in series[name].values() for p in line]
        if positive and values and max(values) / min(values) > 20:  # a learning rate: a log axis reads better
            ax.set_yscale("log")
        ax.set_ylabel(name)
        ax.grid(True, alpha=0.3)
    axes[0].set_title("PBT: hyperparameters in force per trial (dots: exploits)")
    axes[0].legend(loc="upper left", fontsize=7, ncol=4)
    axes[-1].set_xlabel("training_iteration")
    fig.tight_layout()
    fig.savefig(str(path), format="png")


def pbt_plot(trials: Sequence[Any], plot_dir: Path) -> dict[str, Exception]:
    """A PBT study's :data:`FILE` in ``plot_dir`` (other studies: none); its error, by plot name, if it failed."""
    series = pbt_series(trials)
    try:
        if series:
            pbt_hyperparams(series, plot_dir / FILE)
    except Exception as exc:  # noqa: BLE001 - one plot must not stop the others
        return {"pbt_hyperparams": exc}
    return {}


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
