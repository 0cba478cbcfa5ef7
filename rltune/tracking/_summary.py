"""The parent run's summary files: trials.csv, and a copy of the study's trials to plot."""

from __future__ import annotations

import csv
import io
import json
from typing import Any, Mapping, Sequence


def study_snapshot(trials: list[Any], directions: list[Any], metric_names: Sequence[str] | None = None) -> Any:
    """An in-memory copy of a study's trials for plotting (another thread may change the real study).

    ``metric_names``: a multi-objective study's metrics, the axes of its Pareto-front plot.
    """
    import warnings

    import optuna

    storage = optuna.storages.InMemoryStorage()
    storage.create_new_study(directions=directions, study_name="snapshot")
    snapshot = optuna.Study(study_name="snapshot", storage=storage)
    snapshot.add_trials([t for t in trials if t.state.is_finished()])
    if metric_names and len(metric_names) == len(directions) > 1:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # set_metric_names is experimental
            snapshot.set_metric_names(list(metric_names))
    return snapshot


def trials_csv(trials: Sequence[Any], run_ids: Mapping[int, str] | None = None) -> str:
    """A CSV table of Optuna trials: number, state, value, times, each param, the MLflow run id."""
    names: list[str] = []
    for t in trials:
        for name in t.params:
            if name not in names:
                names.append(name)
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["number", "state", "value", "datetime_start", "datetime_complete", "duration_s",
                     *[f"params_{n}" for n in names], "mlflow_run_id"])
    for t in trials:
        duration = (t.datetime_complete - t.datetime_start).total_seconds() if t.datetime_complete and t.datetime_start else None
        writer.writerow([t.number, t.state.name, _value_text(t.values),
                         t.datetime_start.isoformat(timespec="seconds") if t.datetime_start else "",
                         t.datetime_complete.isoformat(timespec="seconds") if t.datetime_complete else "",
                         "" if duration is None else f"{duration:.1f}",
                         *[_csv_value(t.params.get(n, "")) for n in names], (run_ids or {}).get(t.number, "")])
    return out.getvalue()


def _csv_value(value: Any) -> Any:
    return json.dumps(value) if isinstance(value, (list, tuple, dict)) else value



def _value_text(values: Sequence[float] | None) -> Any:
    """A trial's value for the CSV: its one value, several (a multi-objective study's) joined by ';', or ''."""
    if not values:
        return ""
    return values[0] if len(values) == 1 else ";".join(repr(float(v)) for v in values)
