"""What ``Tuner.fit()`` returns: Ray Tune 2.x's ``ResultGrid`` of ``Result``s, read from a study's :class:`Analysis`.

One :class:`Result` per trial of the study (a failed trial retried later is
listed once, by its retry, as in the analysis). ``metrics`` is the trial's
last result, ``checkpoint`` its latest checkpoint, ``best_checkpoints``
every kept checkpoint with the result of its iteration, ``path`` its
directory, ``error`` a :class:`TrialError` for a FAIL trial.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from rltune._trial_files import RESULT_FILE, list_checkpoints
from rltune.errors import ConfigError, RLTuneError
from rltune.orchestrator._analysis import Analysis, TrialRecord
from rltune.orchestrator._checkpoint import Checkpoint
from rltune._metrics import lookup

SCOPES = ("last", "avg", "last-5-avg", "last-10-avg", "all")


class TrialError(RLTuneError):
    """A trial's failure as ``Result.error`` (the trial's traceback is its message and in error.txt)."""


@dataclass
class Result:
    """One trial: ``metrics`` (its last result), ``config``, ``checkpoint``, ``best_checkpoints``, ``path``, ``error``."""

    metrics: dict[str, Any]
    config: dict[str, Any]
    checkpoint: Checkpoint | None
    path: str
    error: TrialError | None = None
    best_checkpoints: list[tuple[Checkpoint, dict[str, Any]]] = field(default_factory=list)
    state: str = "COMPLETE"  # rltune's trial state: COMPLETE, PRUNED, FAIL, RUNNING (interrupted)

    @property
    def metrics_dataframe(self) -> Any:
        """Every result of the trial (result.json), one row each, as a pandas DataFrame (nested keys ``a/b``)."""
        import pandas as pd

        return pd.DataFrame([_flat(r) for r in _results(self.path)])

    def __repr__(self) -> str:
        shown = {k: v for k, v in self.metrics.items() if not isinstance(v, (dict, list))}
        return f"Result(path={self.path!r}, state={self.state}, metrics={shown!r}, error={self.error is not None})"


class ResultGrid:
    """Ray Tune 2.x's results of a Tuner: a sequence of :class:`Result` (``len``, indexing, iteration)."""

    def __init__(self, analysis: Analysis, metric: str | list[str] | None, mode: str | list[str] | None,
                 score: tuple[str, str] | None = None) -> None:
        """The results of ``analysis``; ``metric``/``mode``: the TuneConfig's (the default of get_best_result;
        lists in a multi-objective study, whose best are :attr:`best_results`).

        ``score``: ``(checkpoint_score_attribute, order)``, which orders ``best_checkpoints``.
        """
        self.analysis = analysis
        if metric is None and isinstance(analysis.metric, list):  # the metrics came with the searcher
            metric, mode = analysis.metric, analysis.mode
        self._metric, self._mode = metric, mode
        self._results = [_result(t, score) for t in analysis.trials]

    @property
    def experiment_path(self) -> str:
        """The study's directory (what Tuner.restore takes)."""
        return str(self.analysis.study_dir)

    def __len__(self) -> int:
        return len(self._results)

    def __getitem__(self, index: int) -> Result:
        return self._results[index]

    def __iter__(self) -> Iterator[Result]:
        return iter(self._results)

    @property
    def best_results(self) -> list[Result]:
        """The study's best trials: a multi-objective study's Pareto front (``analysis.best_trials``), in its
        order; with one metric, the best trial (none before a trial completes)."""
        by_number = {t.number: r for t, r in zip(self.analysis.trials, self._results)}
        return [by_number[t.number] for t in self.analysis.best_trials if t.number in by_number]

    @property
    def errors(self) -> list[TrialError]:
        """The errors of the failed trials."""
        return [r.error for r in self._results if r.error is not None]

    @property
    def num_errors(self) -> int:
        """How many trials failed."""
        return len(self.errors)

    @property
    def num_terminated(self) -> int:
        """How many trials ended without error (complete, or stopped early by the scheduler)."""
        return sum(1 for r in self._results if r.state in ("COMPLETE", "PRUNED"))

    def get_best_result(self, metric: str | None = None, mode: str | None = None, scope: str = "last",
                        filter_nan_and_inf: bool = True) -> Result:
        """The trial best at ``metric`` (default the TuneConfig's) by ``mode`` over ``scope`` of its results.

        ``scope``: ``last`` (its last result), ``avg``, ``last-5-avg``,
        ``last-10-avg`` (means), ``all`` (its best result). Failed trials
        count too, as in Ray. With no metric anywhere, a study of one trial
        gives that trial (as Ray does); otherwise ConfigError for a missing
        metric or mode, or when no trial reported the metric.
        """
        if len(self._results) == 1 and not (metric or self._metric):
            return self._results[0]
        metric, mode = self._metric_and_mode(metric, mode, "get_best_result")
        if scope not in SCOPES:
            raise ConfigError(f"scope must be one of {', '.join(SCOPES)}, but got {scope!r}", where="get_best_result")
        best, best_value = None, None
        for result in self._results:
            value = _score(result, metric, mode, scope)
            if value is None or (filter_nan_and_inf and not math.isfinite(value)):
                continue
            if best_value is None or (value > best_value if mode == "max" else value < best_value):
                best, best_value = result, value
        if best is None:
            raise ConfigError(f"no trial reported a {'finite ' if filter_nan_and_inf else ''}value of {metric!r}",
                              where="get_best_result")
        return best

    def get_dataframe(self, filter_metric: str | None = None, filter_mode: str | None = None) -> Any:
        """One row per trial (pandas): its last result, or with ``filter_metric`` its best result by
        ``filter_mode``; the config as ``config/<key>`` columns, the directory as ``logdir``."""
        if (filter_metric is None) != (filter_mode is None):
            raise ConfigError("filter_metric and filter_mode go together; give both or neither",
                              where="get_dataframe")
        if filter_mode is not None and filter_mode not in ("max", "min"):
            raise ConfigError(f"filter_mode must be 'max' or 'min', but got {filter_mode!r}", where="get_dataframe")
        import pandas as pd

        rows = []
        for result in self._results:
            row = dict(result.metrics)
            if filter_metric is not None:
                row = _best_row(result, filter_metric, filter_mode) or row
            row = _flat(row)
            row.update(_flat(result.config, "config/"))
            row["logdir"] = result.path
            rows.append(row)
        return pd.DataFrame(rows)

    def _metric_and_mode(self, metric: str | None, mode: str | None, where: str) -> tuple[str, str]:
        if metric is None and isinstance(self._metric, list):
            raise ConfigError(f"the study optimizes several metrics ({', '.join(self._metric)}): it has a front of "
                              "best trials, not one; read ResultGrid.best_results, or pass metric=... (and mode=...) "
                              "to rank by one metric", where=where)
        if metric is not None and mode is None and isinstance(self._metric, list) and metric in self._metric:
            modes = self._mode if isinstance(self._mode, list) else [self._mode] * len(self._metric)
            mode = modes[self._metric.index(metric)]
        metric = metric or self._metric
        mode = mode or (self._mode if isinstance(self._mode, str) else None) or ("max" if metric else None)
        if not metric:
            raise ConfigError("no metric: pass metric=... here or TuneConfig(metric=...)", where=where)
        if mode not in ("max", "min"):
            raise ConfigError(f"mode must be 'max' or 'min', but got {mode!r}", where=where)
        return metric, mode

    def __repr__(self) -> str:
        return f"ResultGrid({len(self)} results, {self.num_errors} errors, study {self.analysis.study_dir.name!r})"


def _result(trial: TrialRecord, score: tuple[str, str] | None) -> Result:
    path = trial.trial_dir or ""
    error = TrialError(str(trial.error or "failed").strip()) if trial.state == "FAIL" else None
    rows = {int(r.get("training_iteration", 0)): r for r in _results(path)}
    kept = [(Checkpoint(str(p)), rows.get(i, {"training_iteration": i})) for i, p in list_checkpoints(path)]
    if score is not None:
        attribute, order = score
        kept.sort(key=lambda pair: _number(lookup(pair[1], attribute), order), reverse=order == "max")
    state = "RUNNING" if trial.interrupted else trial.state
    return Result(metrics=dict(trial.last_result or {}), config=dict(trial.config), path=path, error=error,
                  checkpoint=Checkpoint(trial.checkpoint) if trial.checkpoint else None, best_checkpoints=kept,
                  state=state)


def _number(value: Any, order: str) -> float:
    """A score to sort by; a missing or non-numeric one sorts last."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return -math.inf if order == "max" else math.inf


def _results(path: str) -> list[dict[str, Any]]:
    """The complete lines of a trial directory's result.json (none if it has none)."""
    try:
        lines = (Path(path) / RESULT_FILE).read_text().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except ValueError:  # a line cut short by a kill
            continue
    return out


def _values(result: Result, metric: str) -> list[float]:
    values = []
    for row in _results(result.path) or [result.metrics]:
        value = lookup(row, metric)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            values.append(float(value))
    return values


def _score(result: Result, metric: str, mode: str, scope: str) -> float | None:
    if scope == "last":
        value = lookup(result.metrics, metric)
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    values = _values(result, metric)
    if not values:
        return None
    if scope == "all":
        return max(values) if mode == "max" else min(values)
    window = {"avg": len(values), "last-5-avg": 5, "last-10-avg": 10}[scope]
    tail = values[-window:]
    return sum(tail) / len(tail)


def _best_row(result: Result, metric: str, mode: str) -> dict[str, Any] | None:
    rows = [r for r in _results(result.path) if isinstance(lookup(r, metric), (int, float))]
    if not rows:
        return None
    pick = max if mode == "max" else min
    return pick(rows, key=lambda r: lookup(r, metric))


def _flat(node: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested dict as ``a/b`` keys (lists and other values kept as they are)."""
    out: dict[str, Any] = {}
    for key, value in node.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}/"))
        else:
            out[f"{prefix}{key}"] = value
    return out
