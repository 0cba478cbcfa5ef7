"""Reading studies back for ``rltune studies`` and ``rltune show``: trial counts, best values, trial tables.

A study directory has a ``study.json`` naming its storage (the journal
file beside it, or an Optuna URL); studies are found by scanning the
results directory for those files.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rltune._results_dir import default_results_dir
from rltune._secrets import (
    MASK,
    drop_masked_password,
    redact_text,
    redact_url,
    resolve_url,
)
from rltune.errors import ConfigError
from rltune.orchestrator._constraints import feasible
from rltune.orchestrator._front import last_values
from rltune.orchestrator._objectives import as_list
from rltune.orchestrator._ownership import owner_alive
from rltune.orchestrator._retry import live_trials, predecessor
from rltune.orchestrator._seed_report import CI_COLUMN, ci_of, fmt_ci
from rltune.orchestrator._storage import JOURNAL_FILE, open_storage
from rltune.orchestrator._study_setup import STUDY_FILE

if TYPE_CHECKING:
    from rltune.orchestrator._columns import TrialTable

STATES = ("COMPLETE", "PRUNED", "FAIL", "RUNNING", "INTERRUPTED")


@dataclass
class StudySummary:
    name: str
    directory: Path
    counts: dict[str, int]
    best_value: float | None
    best_trial: int | None
    metric: str | list[str]
    mode: str | list[str]
    front: int | None = None  # multiobj: trials on the Pareto front (several metrics; best_value is None then)


def results_root(results_dir: str | None) -> Path:
    return Path(os.path.expanduser(results_dir)) if results_dir else default_results_dir()


def find_study_dirs(results_dir: str | None) -> list[Path]:
    root = results_root(results_dir)
    if not root.is_dir():
        return []
    return sorted(p.parent for p in root.glob(f"*/{STUDY_FILE}"))


def load_study(directory: Path, storage: str | None = None) -> tuple[Any, dict[str, Any]]:
    """The optuna.Study of a study directory (and its study.json)."""
    import optuna

    from rltune.orchestrator._study_setup import _quiet_optuna

    _quiet_optuna()
    info_path = directory / STUDY_FILE
    try:
        info = json.loads(info_path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{info_path} cannot be read ({exc})", where="study") from None
    given = storage or info.get("storage")
    if not given:
        journal = info.get("journal") or JOURNAL_FILE
        given = journal if os.path.isabs(journal) else str(directory / journal)
    # study.json keeps ${...} references and masks a literal password: without it, libpq's PGPASSWORD
    # or ~/.pgpass applies
    url = drop_masked_password(resolve_url(given))
    try:
        study = optuna.load_study(study_name=info["name"], storage=open_storage(url, directory))
    except KeyError:
        raise ConfigError(f"study {info.get('name')!r} is not in its storage {redact_url(given)}",
                          where="study") from None
    except Exception as exc:  # noqa: BLE001 - an unreachable database, a refused password, a missing driver
        first = redact_text((str(exc).strip().splitlines() or [""])[0], url, given)
        hint = (" (its password is not stored in study.json: set PGPASSWORD, use ~/.pgpass or pass --storage)"
                if f":{MASK}@" in given else "")
        raise ConfigError(f"cannot open the storage {redact_url(given)}: {type(exc).__name__}: {first}{hint}",
                          where="study") from None
    return study, info


def state_of(frozen: Any) -> str:
    """COMPLETE, PRUNED, FAIL, RUNNING, WAITING, or INTERRUPTED (RUNNING with no live owner)."""
    state = frozen.state.name
    if state == "RUNNING" and not owner_alive(frozen.user_attrs.get("owner"), "", frozen.user_attrs.get("heartbeat")):
        return "INTERRUPTED"
    return state


def summarize(directory: Path, storage: str | None = None) -> StudySummary:
    study, info = load_study(directory, storage)
    counts: dict[str, int] = {}
    best_value = best_trial = None
    mode = info.get("mode", "max")
    multi = len(study.directions) > 1
    for frozen in live_trials(study.get_trials(deepcopy=False)):
        state = state_of(frozen)
        if state == "WAITING":
            continue
        counts[state] = counts.get(state, 0) + 1
        if state == "COMPLETE" and not multi and frozen.value is not None and feasible(frozen):
            if best_value is None or (frozen.value > best_value if mode == "max" else frozen.value < best_value):
                best_value, best_trial = frozen.value, frozen.number
    return StudySummary(info["name"], directory, counts, best_value, best_trial, info.get("metric", "?"), mode,
                        len(study.best_trials) if multi else None)


def resolve_study_dir(study: str, results_dir: str | None) -> Path:
    """A study given by name (under the results directory) or by its directory."""
    path = Path(os.path.expanduser(study))
    if (path / STUDY_FILE).exists():
        return path
    candidate = results_root(results_dir) / study
    if (candidate / STUDY_FILE).exists():
        return candidate
    known = [p.name for p in find_study_dirs(results_dir)]
    import difflib

    close = difflib.get_close_matches(study, known, n=1, cutoff=0.5)
    hint = f"; did you mean {close[0]!r}?" if close else (f" (studies: {', '.join(known)})" if known else "")
    raise ConfigError(f"no study {study!r} in {results_root(results_dir)}{hint}", where="study")


def trial_rows(study: Any, metric: str | list[str]) -> list[dict[str, Any]]:
    """One row per trial: number, state, iteration, value, params, checkpoint or error, the trial it retried.

    A failed trial that another retried has no row: its retry's row names it.
    """
    from rltune.orchestrator._stop import lookup

    rows = []
    for frozen in live_trials(study.get_trials(deepcopy=False)):
        state = state_of(frozen)
        if state == "WAITING":
            continue
        last = frozen.user_attrs.get("last_result") or {}
        value = last_values(frozen)
        values = value if isinstance(value, list) else [value]  # several metrics: a column each
        error = frozen.user_attrs.get("error")
        rows.append({
            "trial": frozen.number,
            "state": state,
            "iter": last.get("training_iteration") or (max(frozen.intermediate_values) if frozen.intermediate_values else 0),
            **dict(zip(as_list(metric), values)),
            "params": dict(frozen.params),
            "checkpoint": frozen.user_attrs.get("checkpoint"),
            "error": error.strip().splitlines()[-1] if error and error.strip() else None,
            "_last": lookup(last, as_list(metric)[0]) if last else None,
            "retry_of": predecessor(frozen),
            "ci": ci_of(frozen),  # seeds_per_trial: the aggregate's bootstrap interval
        })
    return rows


def trials_table(rows: list[dict[str, Any]], metric: str | list[str], directory: Path) -> "TrialTable":
    """``rltune show``'s table of :func:`trial_rows`: the metric by its full name, one column per param
    (shortened names have a legend), checkpoints relative to the study directory (see :mod:`._columns`)."""
    from rltune.orchestrator._columns import TrialRow, TrialTable, fmt_value

    names = list(dict.fromkeys(name for row in rows for name in row["params"]))
    metrics = as_list(metric)
    ci = any(row.get("ci") for row in rows)
    table = TrialTable([("trial", "right"), ("state", "left"), ("iter", "right"), *[(m, "right") for m in metrics],
                        *([(CI_COLUMN, "left")] if ci else [])], names, tail="checkpoint or error")
    for row in rows:
        tail = f"error: {row['error']}" if row["state"] == "FAIL" and row["error"] else _relative(row["checkpoint"],
                                                                                                   directory)
        tail = f"(retry of trial {row['retry_of']}) {tail}".rstrip() if row["retry_of"] is not None else tail
        cells = [str(row["trial"]), row["state"], str(row["iter"] or 0),
                 *[fmt_value(row[m]) if isinstance(row[m], (int, float)) else "-" for m in metrics],
                 *([fmt_ci(row.get("ci"))] if ci else [])]
        table.rows.append(TrialRow(cells, {k: _decoded(v) for k, v in row["params"].items()}, tail))
    return table


def _relative(path: str | None, directory: Path) -> str:
    """A checkpoint path under the study directory as ``trial_00001/checkpoint_000040`` (others as they are)."""
    if not path:
        return ""
    try:
        return str(Path(path).relative_to(directory))
    except ValueError:
        return path


def _decoded(value: Any) -> Any:
    """A categorical value as Optuna stores it (JSON text for lists and mappings) back as the value."""
    if isinstance(value, str) and value[:1] in "[{":
        try:
            return json.loads(value)
        except ValueError:
            pass
    return value
