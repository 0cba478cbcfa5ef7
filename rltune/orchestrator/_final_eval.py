"""``final_evaluation: {top_k, seeds}``: the best configurations of a search, trained again on fresh seeds.

A search picks the configuration whose score was highest on the seeds it
saw; part of that score is luck (the winner's curse). After the search,
the ``top_k`` COMPLETE trials' configurations are trained again, each on
``seeds`` seeds that no trial of the search used, as a study of their own,
``<name>-final`` (a grid over the candidates, ``seeds_per_trial: seeds``,
no pruner, the search's stop criteria and aggregate): it is resumable like
any study, so an interrupted final evaluation continues on ``--resume``
(each candidate once; an interrupted one from its checkpoint).

The study's best becomes the candidate with the best fresh-seed score:
``best_config.yaml`` follows it, and the table of search score against
fresh-seed score is written to ``final_evaluation.json`` in the study
directory, logged in the study's MLflow parent run (``final_evaluation.json``
and ``final_evaluation.csv``, when the study is tracked) and shown by
``rltune show``.
"""

from __future__ import annotations

import csv
import json
import logging
import os
from functools import partial
from pathlib import Path
from typing import Any

from rltune._validation import MAX_SEED, MAX_TRIALS
from rltune.orchestrator._analysis import Analysis, build_analysis, write_best_config
from rltune.orchestrator._seed_report import ci_of
from rltune.orchestrator._seed_stats import derive_seed

logger = logging.getLogger(__name__)

TABLE_FILE = "final_evaluation.json"
CANDIDATE = "candidate"  # the final study's one config key: the search trial whose config it trains


def candidate_trainable(config: dict[str, Any], reporter: Any, *, kind: str, ref: Any,
                        configs: dict[int, dict[str, Any]]) -> Any:
    """The final study's trainable: the user's, run with the config of search trial ``config["candidate"]``.

    The seed is this run's (``config["seed"]``, a fresh one), not the search trial's.
    """
    run_config = {**configs[int(config[CANDIDATE])], "seed": config["seed"]}
    if kind == "trainer":
        from rltune.orchestrator._trial_process import run_trainer

        return run_trainer(ref, run_config, reporter)
    from rltune._imports import import_object
    from rltune.orchestrator._trial_process import _takes_reporter

    fn = import_object(ref, "run") if isinstance(ref, str) else ref
    return fn(run_config, reporter) if _takes_reporter(fn) else fn(run_config)


def candidates(analysis: Analysis, top_k: int) -> list[Any]:
    """The ``top_k`` COMPLETE trials of the search, best first."""
    complete = [t for t in analysis.trials if t.state == "COMPLETE" and t.value is not None]
    complete.sort(key=lambda t: t.value, reverse=analysis.mode == "max")
    return complete[:top_k]


def used_seeds(study: Any) -> set[int]:
    """Every seed a trial of the search ran with."""
    used: set[int] = set()
    for frozen in study.get_trials(deepcopy=False):
        seeds = frozen.user_attrs.get("seeds") or [frozen.user_attrs.get("seed")]
        used.update(s for s in seeds if isinstance(s, int))
    return used


def fresh_base_seed(spec: Any, used: set[int], k: int, seeds: int) -> int:
    """A base seed for the final study whose trials' seeds (base + n, and those derived) the search never used."""
    from rltune.orchestrator._seed_stats import derive_seed as derive

    for attempt in range(100):
        base = derive_seed(int(spec.seed or 0), attempt, "final") % (MAX_SEED - MAX_TRIALS)
        planned = {derive(base + n, i) for n in range(k) for i in range(seeds)}
        if not planned & used:
            return base
    raise RuntimeError("no fresh seeds found for the final evaluation")  # 100 collisions of 31-bit hashes: never


def final_plan(plan: Any, analysis: Analysis, picked: list[Any]) -> Any:
    """The plan of the ``<name>-final`` study: a grid over ``picked``, each on fresh seeds."""
    from rltune.orchestrator._spec import make_plan

    spec, final = plan.spec, plan.spec.final_evaluation
    trainable = partial(candidate_trainable, kind=plan.trainable.kind, ref=plan.trainable.ref,
                        configs={t.number: t.config for t in picked})
    fields = {
        "name": f"{plan.name}-final", "run": trainable, "config": {CANDIDATE: {"grid_search": [t.number for t in picked]}},
        "stop": spec.stop, "metric": spec.metric, "mode": spec.mode, "search_alg": "grid",
        "seeds_per_trial": final.seeds, "seed_mode": spec.seed_mode, "aggregate": spec.aggregate,
        "seed": fresh_base_seed(spec, used_seeds(analysis.study), len(picked), final.seeds),
        "checkpoint_freq": spec.checkpoint_freq, "checkpoint_at_end": spec.checkpoint_at_end,
        "max_failures": spec.max_failures, "trial_timeout_s": spec.trial_timeout_s, "results_dir": spec.results_dir,
        "storage": spec.storage, "tracking_uri": spec.tracking_uri, "tracking": spec.tracking,
        "tensorboard": spec.tensorboard, "n_jobs": spec.n_jobs, "max_concurrent": spec.max_concurrent,
    }
    if plan.trainable.kind == "trainer":  # a seed of a trainer holds 1 + num_workers CPUs, as in the search
        from rltune.orchestrator._seed_spec import parallel_seeds

        fields["resources_per_trial"] = {"cpu": max(plan.cpus_per_trial(t.config) // parallel_seeds(spec) for t in picked)}
    return make_plan({k: v for k, v in fields.items() if v is not None}, where="final_evaluation")


def run_final_evaluation(analysis: Analysis, plan: Any, *, verbose: int = 1, say: Any = None) -> Analysis:
    """Train the search's top-k configurations on fresh seeds; the analysis with its best chosen on those.

    Nothing happens without ``final_evaluation``, for an interrupted search,
    or with no COMPLETE trial. An interrupted final evaluation leaves the
    search's best as it was (``--resume`` continues it).
    """
    if plan.spec.final_evaluation is None or analysis.interrupted or analysis.best_trial is None:
        return analysis
    from rltune.orchestrator._run_study import run_plan

    picked = candidates(analysis, plan.spec.final_evaluation.top_k)
    sub = final_plan(plan, analysis, picked)
    if say is not None:
        say(f"final evaluation: the top {len(picked)} configuration(s) on {sub.spec.seeds_per_trial} fresh seeds "
            f"each (study {sub.name!r})")
    fresh = run_plan(sub, resume="auto", verbose=verbose)
    if fresh.interrupted:
        analysis.interrupted = True
        return analysis
    rows = table_rows(picked, fresh)
    analysis.extra["final_evaluation"] = rows
    path = analysis.study_dir / TABLE_FILE
    _write_json(path, {"metric": analysis.metric, "mode": analysis.mode, "seeds": sub.spec.seeds_per_trial,
                       "aggregate": sub.spec.aggregate, "final_study": sub.name, "rows": rows})
    winner = next((r for r in rows if r["fresh_value"] is not None), None)
    if winner is not None:
        analysis.best_trial = next(t for t in analysis.trials if t.number == winner["trial"])
        analysis.best_config_path = write_best_config(analysis, plan)
        _note_fresh(analysis.best_config_path, winner, sub.spec.seeds_per_trial)
    _log_to_mlflow(analysis, plan, path, rows)
    return analysis


def table_rows(picked: list[Any], fresh: Analysis) -> list[dict[str, Any]]:
    """One row per candidate, the best fresh-seed score first: search score, fresh score, its interval, the rank."""
    by_candidate = {int(t.config[CANDIDATE]): t for t in fresh.trials if CANDIDATE in (t.config or {})}
    frozen = {t.number: t for t in fresh.study.get_trials(deepcopy=False)}
    rows = []
    for rank, trial in enumerate(picked, start=1):
        found = by_candidate.get(trial.number)
        value = found.value if found is not None and found.state == "COMPLETE" else None
        ci = ci_of(frozen[found.number]) if found is not None else None
        rows.append({"trial": trial.number, "search_rank": rank, "search_value": trial.value, "fresh_value": value,
                     "fresh_ci_low": ci[0] if ci else None, "fresh_ci_high": ci[1] if ci else None,
                     "params": {k: v for k, v in trial.params.items()}})
    sign = -1.0 if fresh.mode == "max" else 1.0
    rows.sort(key=lambda r: (r["fresh_value"] is None, sign * (r["fresh_value"] or 0.0), r["search_rank"]))
    return rows


def _note_fresh(path: Path, winner: dict[str, Any], seeds: int) -> None:
    """Say in best_config.yaml's header that the final evaluation chose it, and on what."""
    note = (f"# Chosen by the final evaluation: {winner['fresh_value']:g} on {seeds} fresh seeds (its search score: "
            f"{winner['search_value']:g}); table: {TABLE_FILE}\n")
    path.write_text(note + path.read_text())


def read_table(study_dir: Path) -> dict[str, Any] | None:
    """The study's ``final_evaluation.json``, or None."""
    try:
        found = json.loads((Path(study_dir) / TABLE_FILE).read_text())
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def final_table_lines(study_dir: Path) -> list[str]:
    """``rltune show``'s lines on the final evaluation: one per candidate, the chosen one marked (none: [])."""
    from rltune.orchestrator._columns import fmt_value

    table = read_table(study_dir)
    if not table or not isinstance(table.get("rows"), list):
        return []
    lines = [f"final evaluation on {table.get('seeds')} fresh seeds ({table.get('aggregate')} {table.get('metric')}; "
             f"study {table.get('final_study')!r}): search score -> fresh-seed score [95% CI]"]
    for i, row in enumerate(table["rows"]):
        ci = f" [{fmt_value(row.get('fresh_ci_low'))}, {fmt_value(row.get('fresh_ci_high'))}]"
        mark = "  <- best" if i == 0 and row.get("fresh_value") is not None else ""
        lines.append(f"  trial {row.get('trial')} (search rank {row.get('search_rank')}): "
                     f"{fmt_value(row.get('search_value'))} -> {fmt_value(row.get('fresh_value'))}{ci}{mark}")
    return lines


def _write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
    os.replace(tmp, path)


def _log_to_mlflow(analysis: Analysis, plan: Any, path: Path, rows: list[dict[str, Any]]) -> None:
    """The table as artifacts of the study's MLflow parent run (when the study is tracked)."""
    if not plan.spec.tracking or os.environ.get("RLTUNE_TRACKING", "1") == "0":
        return
    csv_path = path.with_suffix(".csv")
    with open(csv_path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["trial", "search_rank", "search_value", "fresh_value", "fresh_ci_low", "fresh_ci_high"])
        for row in rows:
            writer.writerow([row[k] for k in ("trial", "search_rank", "search_value", "fresh_value", "fresh_ci_low",
                                              "fresh_ci_high")])
    try:
        from rltune.tracking._study_artifacts import log_study_artifacts

        log_study_artifacts(plan.spec.tracking_uri, plan.name, analysis.study_dir.parent, [path, csv_path])
    except Exception as exc:  # noqa: BLE001 - the table is in the study directory all the same
        logger.warning("final evaluation: the table was not logged in MLflow (%s: %s)", type(exc).__name__, exc)
