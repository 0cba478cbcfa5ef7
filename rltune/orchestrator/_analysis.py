"""What a study returns: :class:`Analysis` (the Optuna study, every trial, the best one) and ``best_config.yaml``.

Trials come from storage, so an analysis of a resumed study holds the
trials of every session; a failed trial that a later one retried is listed
once, as its retry (:mod:`._retry`). A trial's ``last_result`` is the full result
dict for trials run by this process and the stored one (without
``hist_stats``) for trials of an earlier session.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from rltune._disk import disk_error
from rltune.orchestrator._constraints import feasible
from rltune.orchestrator._front import pick_best, trial_value, write_front_configs
from rltune.orchestrator._objectives import as_list, describe
from rltune.orchestrator._pbt_schedule import pbt_schedule
from rltune.orchestrator._reporter import json_safe, latest_checkpoint
from rltune.orchestrator._retry import FAILURE_KIND, live_trials, predecessor

logger = logging.getLogger(__name__)


@dataclass
class TrialRecord:
    """One trial of a study: ``number``, ``config``, ``state`` (COMPLETE, PRUNED, FAIL, RUNNING, ...),
    ``value`` (the metric Optuna holds), ``last_result``, ``checkpoint`` (latest), ``trial_dir``, ``error``,
    ``failure_kind`` (a FAIL's: "no_space", "error", "crash", "timeout", ...) and ``retry_of`` (the failed
    trial it retried)."""

    number: int
    state: str
    config: dict[str, Any]
    params: dict[str, Any]
    value: float | list[float] | None  # a list in a multi-objective study (one value per metric)
    last_result: dict[str, Any] | None
    checkpoint: str | None
    trial_dir: str | None
    seed: int | None = None
    error: str | None = None
    interrupted: bool = False
    retry_of: int | None = None  # the failed trial this one retried (that one is not listed: counted once)
    failure_kind: str | None = None  # why a FAIL trial failed: "no_space", "error", "crash", "timeout", ...
    feasible: bool = True  # multiobj: every constraint of the study satisfied (._constraints)

    @property
    def training_iteration(self) -> int:
        return int((self.last_result or {}).get("training_iteration") or 0)


@dataclass
class Analysis:
    """The outcome of ``tune.run``: ``study`` (optuna.Study), ``trials`` and the best trial's config, result, checkpoint."""

    study: Any
    trials: list[TrialRecord]
    metric: str | list[str]
    mode: str | list[str]
    study_dir: Path
    best_trial: TrialRecord | None = None
    interrupted: bool = False
    best_config_path: Path | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    no_space: str | None = None  # the study started no more trials: one found the disk full (which, and why)
    tracking_ui: str | None = None  # where its MLflow runs are seen: the `rltune ui ...` command, or the server
    tracking_unrecorded: str | None = None  # the line on what MLflow tracking could not record (a resume does)
    best_trials: list[TrialRecord] = field(default_factory=list)  # multiobj: the Pareto front (one metric: the best)

    @property
    def best_config(self) -> dict[str, Any] | None:
        return self.best_trial.config if self.best_trial else None

    @property
    def best_result(self) -> dict[str, Any] | None:
        return self.best_trial.last_result if self.best_trial else None

    @property
    def best_checkpoint(self) -> str | None:
        return self.best_trial.checkpoint if self.best_trial else None

    @property
    def best_configs(self) -> list[dict[str, Any]]:
        """The configs of :attr:`best_trials` (a multi-objective study's Pareto front), in its order."""
        return [t.config for t in self.best_trials]

    @property
    def best_value(self) -> float | None:
        return self.best_trial.value if self.best_trial else None

    def counts(self) -> dict[str, int]:
        """Number of trials by state (INTERRUPTED: RUNNING in storage, left by an interrupted run)."""
        counts: dict[str, int] = {}
        for t in self.trials:
            state = "INTERRUPTED" if t.interrupted else t.state
            counts[state] = counts.get(state, 0) + 1
        return counts

    def __repr__(self) -> str:
        counts = ", ".join(f"{n} {s}" for s, n in sorted(self.counts().items()))
        best = (f", best {describe(self.best_value, self.metric)} (trial {self.best_trial.number})"
                if self.best_trial else "")
        return f"Analysis({self.study.study_name!r}: {counts or 'no trials'}{best})"


def build_analysis(runner: Any) -> Analysis:
    """An :class:`Analysis` of the runner's study, from storage and this run's in-memory results."""
    from optuna.trial import TrialState

    from rltune.orchestrator._pbt import config_in_force

    plan, study = runner.plan, runner.study
    records = []
    for frozen in live_trials(study.get_trials(deepcopy=False)):
        if frozen.state == TrialState.WAITING:
            continue
        attrs = frozen.user_attrs
        config = runner.state.configs.get(frozen.number)
        if config is None:
            try:
                config = config_in_force(plan, study, frozen)  # pbt: what it trained with last
            except Exception:  # the study file changed since: show what was stored
                config = attrs.get("config", {})
        trial_dir = attrs.get("trial_dir") or str(runner.study_dir / f"trial_{frozen.number:05d}")
        found = latest_checkpoint(trial_dir)
        checkpoint = found[1] if found else attrs.get("checkpoint")
        records.append(TrialRecord(
            number=frozen.number,
            state=frozen.state.name,
            config=config,
            params=dict(frozen.params),
            value=trial_value(frozen),
            last_result=runner.state.results.get(frozen.number, attrs.get("last_result")),
            checkpoint=checkpoint if checkpoint and os.path.isdir(checkpoint) else None,
            trial_dir=trial_dir,
            seed=attrs.get("seed"),
            error=attrs.get("error"),
            interrupted=bool(attrs.get("interrupted")) and frozen.state == TrialState.RUNNING,
            retry_of=predecessor(frozen),
            failure_kind=attrs.get(FAILURE_KIND) if frozen.state == TrialState.FAIL else None,
            feasible=feasible(frozen),
        ))
    best, front = pick_best(records, plan.spec.metric, plan.spec.mode)
    analysis = Analysis(study, records, plan.spec.metric, plan.spec.mode, runner.study_dir, best, runner.interrupted,
                        no_space=runner.state.no_space, best_trials=front)
    if runner.tracker is not None:
        from rltune.tracking._store import ui_hint

        analysis.tracking_ui = ui_hint(runner.tracker.tracking_uri, runner.study_dir.parent)
        analysis.tracking_unrecorded = runner.tracker.summary()
    if best is not None:
        try:
            analysis.best_config_path = write_best_config(analysis, plan)
            if plan.multi_objective:
                write_front_configs(front, analysis.study_dir, lambda r, path: write_best_config(analysis, plan, r, path))
        except OSError as exc:  # a full disk at the very end: the study's trials are recorded all the same
            logger.warning("%s", disk_error(exc, analysis.study_dir / "best_config.yaml", "the best config"))
    return analysis


def schedule_comment(study: Any, number: int) -> list[str]:
    """Comment lines of a PBT trial's exploits (none for others): its config is the one in force at its end."""
    from rltune.orchestrator._pbt import LINEAGE

    frozen = next((t for t in study.get_trials(deepcopy=False) if t.number == number), None) if study else None
    steps = (frozen.user_attrs.get(LINEAGE) or []) if frozen is not None else []
    lines = [f"#   at iteration {s.get('iteration')}: took trial {s.get('source')}'s {s.get('checkpoint')}, set "
             + ", ".join(f"{k}={v!r}" for k, v in (s.get("changed") or {}).items()) for s in steps if isinstance(s, dict)]
    if not lines:
        return []
    return ["# PBT: schedule is the values its weights trained with, through the trials it exploited, from",
            "# iteration 0 (rltune train -f applies each segment at its iteration); its exploits:", *lines]


def write_best_config(analysis: Analysis, plan: Any, best: TrialRecord | None = None, path: Path | None = None) -> Path:
    """Write ``best_config.yaml``: the best trial (or ``best``, at ``path``) as a ``rltune train -f`` file (with its seed)."""
    best = best or analysis.best_trial
    path = path or analysis.study_dir / "best_config.yaml"
    spec = plan.spec
    trainable = plan.trainable
    run = trainable.ref if isinstance(trainable.ref, str) else json_safe(trainable.ref)
    own = path != analysis.study_dir / "best_config.yaml"  # a front member's file in best_configs/
    fields: dict[str, Any] = {"name": f"{plan.name}-trial{best.number}" if own else f"{plan.name}-best", "run": run}
    config = json_safe(best.config)
    fields["config"] = config
    schedule = pbt_schedule(plan, analysis.study, best.number) if trainable.kind == "trainer" else []
    if schedule:  # PBT: the values in force changed during the run; replayed by rltune train -f
        fields["schedule"] = schedule
    if spec.stop:
        fields["stop"] = dict(spec.stop)
    fields["checkpoint_at_end"] = True
    if spec.checkpoint_freq:
        fields["checkpoint_freq"] = spec.checkpoint_freq
    header = [
        f"# {'A trial of the Pareto front' if plan.multi_objective else 'The best trial'} of study {plan.name!r}: "
        f"trial {best.number}, {describe(best.value, analysis.metric)} ({', '.join(as_list(analysis.mode))}).",
        f"# Checkpoint: {best.checkpoint or 'none'}",
    ]
    if trainable.kind == "trainer":
        header.append(f"# Re-run it as it ran (same config and seed): rltune train -f {path}")
    else:
        header.append("# run is a function trainable: 'rltune train' runs trainers only; re-run it with tune.run(config=...).")
    header.extend(schedule_comment(analysis.study, best.number))  # pbt: the exploits it went through
    text = "\n".join(header) + "\n" + yaml.safe_dump(fields, sort_keys=False, default_flow_style=None)
    tmp = path.with_suffix(".yaml.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
    return path
