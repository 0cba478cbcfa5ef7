"""``rltune studies``, ``rltune show`` and ``rltune ui``: reading the studies of a results directory back.

Each subcommand is one ``add_<name>_parser`` function (called by
:func:`rltune.orchestrator.cli.build_parser`) and a ``_<name>(args) -> exit
status`` handler; errors are raised as :class:`~rltune.errors.RLTuneError`
and become one message and exit status 2 in :func:`rltune.orchestrator.cli.main`.
"""

from __future__ import annotations

import argparse
from typing import Any

from rltune.errors import ConfigError, RLTuneError


def check_results_dir(path: str | None) -> None:
    """A --results-dir that is a file (or under one) is an error, not an empty listing."""
    from rltune._validation import results_dir_problem

    problem = results_dir_problem(path)
    if problem:
        raise ConfigError(f"results_dir: {problem}", where="--results-dir")


def add_ui_parser(commands: Any) -> None:
    """``rltune ui``: the MLflow UI on a results directory's tracking store."""
    p = commands.add_parser(
        "ui",
        help="the MLflow UI on the studies' tracking store (127.0.0.1)",
        description="Start the MLflow UI for the tracking store of a results directory (or --tracking-uri) "
        "on 127.0.0.1 and print its address; Ctrl-C stops it.",
    )
    p.add_argument("--results-dir", metavar="DIR", help="default: $RLTUNE_RESULTS_DIR or ~/rltune_results")
    p.add_argument("--port", type=_port, default=5000, help="default: 5000")
    p.add_argument("--tracking-uri", metavar="URI", help="another MLflow store or server (default: the results dir's)")
    p.set_defaults(handler=_ui)


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, but got {text!r}") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"must be between 1 and 65535, but got {port}")
    return port


def _ui(args: argparse.Namespace) -> int:
    from rltune.tracking._ui import run_ui

    return run_ui(args.results_dir, args.port, args.tracking_uri)


def add_studies_parser(commands: Any) -> None:
    """``rltune studies``: the studies of a results directory, their trials by state and best value."""
    p = commands.add_parser(
        "studies",
        help="list the studies of a results directory: trials by state, best value",
        description="List the studies under the results directory with their trial counts by state and best value.",
    )
    p.add_argument("--results-dir", metavar="DIR", help="default: $RLTUNE_RESULTS_DIR or ~/rltune_results")
    p.set_defaults(handler=_studies)


def _studies(args: argparse.Namespace) -> int:
    from rltune.orchestrator._listing import STATES, find_study_dirs, results_root, summarize
    from rltune.orchestrator._objectives import describe_objectives

    check_results_dir(args.results_dir)
    dirs = find_study_dirs(args.results_dir)
    if not dirs:
        print(f"no studies in {results_root(args.results_dir)}")
        return 0
    header = f"{'study':30} {'trials':>6} " + " ".join(f"{s.lower():>11}" for s in STATES) + f"  {'best':>12}  metric"
    print(header)
    for directory in dirs:
        try:
            s = summarize(directory)
        except RLTuneError as exc:
            print(f"{directory.name:30} (unreadable: {exc})")
            continue
        best = f"{s.best_value:.6g}" if s.best_value is not None else "-"
        best += f" (#{s.best_trial})" if s.best_trial is not None else ""
        best = f"front of {s.front}" if s.front is not None else best
        print(f"{s.name:30} {sum(s.counts.values()):>6} " + " ".join(f"{s.counts.get(state, 0):>11}" for state in STATES)
              + f"  {best:>12}  {describe_objectives(s.metric, s.mode)}")
    return 0


def add_show_parser(commands: Any) -> None:
    """``rltune show STUDY``: the trials table of a study."""
    p = commands.add_parser(
        "show",
        help="print the trials table of a study",
        description="Print every trial of a study: state, iterations, metric, params, checkpoint or error.",
    )
    p.add_argument("study", metavar="STUDY", help="study name (under --results-dir) or study directory")
    p.add_argument("--results-dir", metavar="DIR", help="default: $RLTUNE_RESULTS_DIR or ~/rltune_results")
    p.add_argument("--storage", metavar="URL", help="the study's storage, if not the one in its directory")
    p.set_defaults(handler=_show)


def _show(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.text import Text

    from rltune.orchestrator._front import front_lines
    from rltune.orchestrator._final_eval import final_table_lines
    from rltune.orchestrator._listing import load_study, resolve_study_dir, trial_rows, trials_table
    from rltune.orchestrator._objectives import describe_objectives

    check_results_dir(args.results_dir)
    directory = resolve_study_dir(args.study, args.results_dir)
    study, info = load_study(directory, args.storage)
    metric = info.get("metric", "value")
    rows = trial_rows(study, metric)
    console = Console(highlight=False)
    console.print(f"study {info['name']!r} ({describe_objectives(metric, info.get('mode', 'max'))}), {len(rows)} trials, directory "
                  f"{directory}", markup=False, soft_wrap=True)
    table, names = trials_table(rows, metric, directory).render(console.width)
    console.print(table)
    if names:
        console.print(Text(f"params: {names}"))
    for line in [*front_lines(study, metric), *final_table_lines(directory)]:  # the Pareto front; final_evaluation's table
        console.print(line, markup=False, soft_wrap=True)
    return 0
