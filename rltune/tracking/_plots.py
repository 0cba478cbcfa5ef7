"""PNG plots for MLflow: a trial's learning curve and a study's Optuna plots.

The learning curve is drawn on a bare :class:`matplotlib.figure.Figure`
(no pyplot, no global state). Optuna's matplotlib plots go through pyplot;
its backend is set to Agg only if pyplot was not imported yet (so that a
notebook's backend is left alone), and every figure is closed after saving.
"""

from __future__ import annotations

import logging
import math
import sys
import warnings
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

logger = logging.getLogger(__name__)

DPI = 100


def learning_curve(points: Sequence[Mapping[str, Any]], path: str | Path, *, metric: str) -> None:
    """Draw ``metric`` against timesteps (or iterations when no point has timesteps) and save a PNG.

    ``points``: dicts with ``iteration``, ``timesteps``, ``metric``,
    ``phase`` and ``task`` (curriculum). A change of curriculum phase (or of
    task, when there are no phases) is a dashed vertical line labelled with
    the new phase and task.
    """
    from matplotlib.figure import Figure

    use_steps = all(p.get("timesteps") is not None for p in points)
    xs = [p["timesteps"] if use_steps else p["iteration"] for p in points]
    fig = Figure(figsize=(8, 4.5), dpi=DPI)
    ax = fig.add_subplot()
    shown = [(x, p["metric"]) for x, p in zip(xs, points) if p.get("metric") is not None and math.isfinite(p["metric"])]
    if shown:
        ax.plot([s[0] for s in shown], [s[1] for s in shown], marker="." if len(shown) < 50 else None, label=metric)
    marker_key = "phase" if any(p.get("phase") is not None for p in points) else "task"
    previous = points[0].get(marker_key) if points else None
    changes = 0
    automatic = any(p.get("task_probs") for p in points)  # its most likely task changes often: task_sampling.png
    for x, p in zip(xs[1:], points[1:] if not automatic else []):
        current = p.get(marker_key)
        if current != previous and current is not None:
            label = f"phase {p.get('phase')}" if marker_key == "phase" else "task"
            if p.get("task") is not None:
                label += f": {p['task']}"
            ax.axvline(x, color="tab:red", linestyle="--", linewidth=1, alpha=0.7,
                       label="curriculum change" if changes == 0 else None)
            ax.annotate(label[:40], (x, 1.0), xycoords=("data", "axes fraction"), rotation=90, fontsize=7,
                        va="top", ha="right", color="tab:red")
            changes += 1
        previous = current
    ax.set_xlabel("timesteps_total" if use_steps else "training_iteration")
    ax.set_ylabel(metric)
    ax.set_title(f"{metric} over training")
    ax.grid(True, alpha=0.3)
    if shown or changes:
        ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(str(path), format="png")


def task_sampling(points: Sequence[Mapping[str, Any]], path: str | Path) -> None:
    """A heat map of an automatic curriculum's task distribution (``task_probs``) over training; save a PNG.

    Rows are the tasks (in their order in the first distribution), columns the
    results; a result without a distribution is an empty column.
    """
    import numpy as np
    from matplotlib.figure import Figure

    tasks: list[str] = []
    for p in points:
        tasks += [t for t in (p.get("task_probs") or {}) if t not in tasks]
    grid = np.full((len(tasks), len(points)), np.nan)
    for j, p in enumerate(points):
        for i, task in enumerate(tasks):
            grid[i, j] = (p.get("task_probs") or {}).get(task, np.nan)
    use_steps = all(p.get("timesteps") is not None for p in points)
    xs = [p["timesteps"] if use_steps else p["iteration"] for p in points]
    fig = Figure(figsize=(8, 1.5 + 0.25 * max(len(tasks), 4)), dpi=DPI)
    ax = fig.add_subplot()
    image = ax.imshow(grid, aspect="auto", origin="lower", interpolation="nearest", cmap="viridis",
                      extent=(xs[0], xs[-1], -0.5, len(tasks) - 0.5) if len(xs) > 1 else None)
    ax.set_yticks(range(len(tasks)), [t[:20] for t in tasks], fontsize=7)
    ax.set_xlabel("timesteps_total" if use_steps else "training_iteration")
    ax.set_ylabel("task")
    ax.set_title("curriculum: probability of drawing each task")
    fig.colorbar(image, ax=ax, label="probability")
    fig.tight_layout()
    fig.savefig(str(path), format="png")


def _pyplot() -> Any:
    if "matplotlib.pyplot" not in sys.modules:
        import matplotlib

        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def study_plots(study: Any, trials: Sequence[Any], out_dir: str | Path) -> dict[str, Exception | None]:
    """Save Optuna's plots of ``study`` as PNG files in ``out_dir``; by plot name, the error of a plot that failed.

    Plots that need more trials than there are are skipped silently:
    optimization history and intermediate values need a complete trial,
    parallel coordinates a complete trial with params, param importances two
    complete trials and a param that took two values.
    """
    complete = [t for t in trials if t.state.name == "COMPLETE" and t.values]
    if len(study.directions) > 1:  # multiobj: the Pareto front (Optuna's other plots need one objective)
        return _draw({"pareto_front": lambda m: m.plot_pareto_front(study)} if complete else {}, out_dir)
    varied = {name for name in {n for t in complete for n in t.params}
              if len({repr(t.params.get(name)) for t in complete}) > 1}
    wanted: dict[str, Callable[[Any], Any]] = {}
    if complete:
        wanted["optimization_history"] = lambda m: m.plot_optimization_history(study)
    if any(t.intermediate_values for t in trials):
        wanted["intermediate_values"] = lambda m: m.plot_intermediate_values(study)
    if complete and any(t.params for t in complete):
        wanted["parallel_coordinate"] = lambda m: m.plot_parallel_coordinate(study)
    if len(complete) >= 2 and varied:
        wanted["param_importances"] = lambda m: m.plot_param_importances(study)
    return _draw(wanted, out_dir)


def _draw(wanted: dict[str, Callable[[Any], Any]], out_dir: str | Path) -> dict[str, Exception | None]:
    """Each of ``wanted`` (``draw(optuna.visualization.matplotlib)``) saved as ``<name>.png``; errors by name."""
    if not wanted:
        return {}
    problems: dict[str, Exception | None] = {}
    plt = _pyplot()
    import optuna.visualization.matplotlib as optuna_plots

    for name, draw in wanted.items():
        before = set(plt.get_fignums())
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # ExperimentalWarning, few-trials warnings
                result = draw(optuna_plots)
            axes = result.flat[0] if hasattr(result, "flat") else result
            fig = axes.figure
            fig.set_size_inches(max(fig.get_size_inches()[0], 8), max(fig.get_size_inches()[1], 5))
            fig.savefig(str(Path(out_dir) / f"{name}.png"), format="png", dpi=DPI, bbox_inches="tight")
            problems[name] = None
        except Exception as exc:  # noqa: BLE001 - one plot must not stop the others
            logger.debug("plot %s failed", name, exc_info=True)
            problems[name] = exc
        finally:
            for number in set(plt.get_fignums()) - before:
                plt.close(number)
    return {name: problem for name, problem in problems.items() if problem is not None}
