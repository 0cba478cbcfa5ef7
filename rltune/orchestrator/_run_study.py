"""Running a study plan to its analysis, with its display and a summary at the end.

What ``tune.run`` (:mod:`rltune.tune`) and ``rltune tune`` (:mod:`rltune.orchestrator.cli`)
both call; they sit above the orchestrator and import from it, never the other way.
"""

from __future__ import annotations

from typing import Any, Sequence, TextIO

from rltune.orchestrator._analysis import Analysis, build_analysis
from rltune.orchestrator._objectives import describe
from rltune.orchestrator._spec import StudyPlan


def run_plan(
    plan: StudyPlan,
    *,
    resume: bool | str = False,
    retry_failed: bool | str = False,
    verbose: int = 1,
    quiet: bool = False,
    max_concurrent: int | None = None,
    stream: TextIO | None = None,
    observers: Sequence[Any] = (),
) -> Analysis:
    """Run a validated study plan (what ``tune.run`` and ``rltune tune`` both call).

    ``resume``: True continues the study (which must exist), ``"auto"``
    continues it if it exists; either retries the trials that failed for lack
    of disk space from their last checkpoints, and every failed trial with
    ``retry_failed`` (``"restart"``: from scratch). ``observers`` get the loop's events too (before the display;
    :class:`~rltune.orchestrator._events.Observer`).
    """
    from rltune.orchestrator._display import make_display
    from rltune.orchestrator._final_eval import run_final_evaluation
    from rltune.orchestrator._runner import StudyRunner
    from rltune.orchestrator._seed_report import seed_observers

    runner = StudyRunner(plan, resume=resume, retry_failed=retry_failed, max_concurrent=max_concurrent)
    for observer in [*observers, *seed_observers(plan)]:
        runner.observers.append(observer)
    display = make_display(runner, verbose=verbose, quiet=quiet, stream=stream)
    runner.display = display  # before open_study: what it finds on disk (a stale lock) is said at once
    try:
        runner.open_study()
        if display is not None:
            display.start(runner)
        try:
            runner.run()
        finally:
            if display is not None:
                display.close()
        analysis = build_analysis(runner)
    finally:
        runner.close()  # the study directory's lock: another orchestrator may take the study now
    analysis = run_final_evaluation(analysis, plan, verbose=verbose, say=display.message if display else None)
    if display is not None:
        _summary(display, analysis, plan)
    return analysis


def all_failed(analysis: Analysis) -> list[int]:
    """The trial numbers, if every trial of the study failed (none complete, pruned or left to resume); else []."""
    if analysis.interrupted or not analysis.trials:
        return []
    if any(t.state != "FAIL" for t in analysis.trials):
        return []
    return [t.number for t in analysis.trials]


def _summary(display: Any, analysis: Analysis, plan: StudyPlan) -> None:
    counts = ", ".join(f"{n} {s}" for s, n in sorted(analysis.counts().items()))
    display.message(f"study {plan.name!r}: {counts or 'no trials'}")
    _results(display, analysis, plan)
    _where_to_look(display, analysis, plan)


def _where_to_look(display: Any, analysis: Analysis, plan: StudyPlan) -> None:
    """The last lines of a study: its directory, how to browse it in MLflow, and what MLflow lacks."""
    from rltune.orchestrator._storage import is_shared

    display.message(f"study directory: {analysis.study_dir}")
    if analysis.tracking_ui:
        display.message(f"MLflow (the study, each trial's metrics, checkpoints and plots): {analysis.tracking_ui}")
    if analysis.tracking_unrecorded and not is_shared(plan.spec.storage):
        display.message(f"{analysis.tracking_unrecorded}; a resume records them from the trial directories: "
                        "--resume (tune.run(..., resume=True)), which trains no trial of a finished study")


def _results(display: Any, analysis: Analysis, plan: StudyPlan) -> None:
    if analysis.interrupted:
        from rltune.orchestrator._storage import is_shared

        if is_shared(plan.spec.storage):
            display.message("interrupted: running trials were checkpointed; they are retried from their checkpoints "
                            "by any worker of the study once their heartbeat is stale")
        else:
            display.message("interrupted: running trials were checkpointed; continue with --resume "
                            "(tune.run(..., resume=True))")
    if analysis.no_space:
        display.message(f"stopped early: no space left on device ({analysis.no_space}); free space, then continue with "
                        "--resume (tune.run(..., resume=True)): the trials that failed for lack of space are retried "
                        "from their last checkpoints")
    best = analysis.best_trial
    if best is None:
        if all_failed(analysis):
            display.message(f"every trial failed, first {first_error(analysis)} (each traceback: error.txt in its "
                            "trial directory)")
        else:
            display.message("no trial completed: no best config")
        return
    if len(analysis.best_trials) > 1:  # multiobj: the Pareto front
        display.message(f"Pareto front: trials {', '.join(str(t.number) for t in analysis.best_trials)} "
                        f"(each in {analysis.study_dir / 'best_configs'})")
    display.message(f"best trial {best.number}: {describe(best.value, analysis.metric)}")
    params = {k: v for k, v in _flat_params(plan, best.config).items()}
    if params:
        display.message("best params: " + ", ".join(f"{k}={v!r}" for k, v in params.items()))
    display.message(f"best checkpoint: {best.checkpoint or 'none'}")
    display.message(f"best config: {analysis.best_config_path or 'not written (see the warning above)'}")


def _flat_params(plan: StudyPlan, config: dict[str, Any]) -> dict[str, Any]:
    values = {}
    for p in plan.space.params:
        node: Any = config
        for key in p.path:  # a list index (curriculum phases) is a digit string
            node = node.get(key) if isinstance(node, dict) else (
                node[int(key)] if isinstance(node, list) and key.isdigit() and int(key) < len(node) else None)
        values[p.name] = node
    return values


def first_error(analysis: Analysis) -> str:
    """The last line of the first failed trial's error, for a one-line message."""
    for t in analysis.trials:
        if t.state == "FAIL" and t.error:
            lines = str(t.error).strip().splitlines()
            return f"trial {t.number}: {lines[-1] if lines else 'failed'}"
    return "no error recorded"
