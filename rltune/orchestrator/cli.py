"""The ``rltune`` command line: ``train`` (one trial), ``tune`` (a study), ``studies``, ``show``, ``rollout``.

Each subcommand is one ``_add_<name>_parser`` function that declares its
flags and sets ``handler`` to a ``_<name>(args) -> exit status`` function;
a new subcommand is one more pair. Every user-caused error (an
:class:`~rltune.errors.RLTuneError`, malformed JSON or YAML) becomes one
message on stderr, ``rltune <command>: error: <what is wrong>``, and exit
status 2, as argparse does for bad flags. Ctrl-C exits with status 130;
``rltune tune`` exits with status 1 when every trial of its study failed.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import sys
from typing import Any, Sequence

import yaml

from rltune import __version__
from rltune._imports import drop_current_directory
from rltune.errors import ConfigError, RLTuneError
from rltune.orchestrator._cli_rollout import add_rollout_parser
from rltune.orchestrator._cli_studies import add_show_parser, add_studies_parser, add_ui_parser
from rltune.orchestrator._yaml_files import deep_merge

EXIT_STUDY_FAILED = 1  # rltune tune: every trial of the study failed
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
LOG_LEVELS = ("DEBUG", "INFO", "WARN", "WARNING", "ERROR")

logger = logging.getLogger(__name__)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``rltune`` command with ``argv`` (default ``sys.argv[1:]``); return the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    prog = f"{parser.prog} {args.command}"
    try:
        return args.handler(args)
    except (RLTuneError, json.JSONDecodeError, yaml.YAMLError) as exc:
        return _fail(prog, str(exc))
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def build_parser() -> argparse.ArgumentParser:
    """The parser of every subcommand."""
    parser = argparse.ArgumentParser(
        prog="rltune",
        description="Tune and train reinforcement-learning trainers.",
        epilog="Run 'rltune COMMAND --help' for the flags of a command.",
    )
    parser.add_argument("--version", action="version", version=f"rltune {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _add_train_parser(commands)
    _add_tune_parser(commands)
    add_studies_parser(commands)
    add_show_parser(commands)
    add_rollout_parser(commands, LOG_LEVELS)
    add_ui_parser(commands)
    return parser


def _fail(prog: str, message: str) -> int:
    print(f"{prog}: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def _json_object(text: str | None, flag: str) -> dict[str, Any] | None:
    """Parse a flag's JSON object; :class:`ConfigError` names the flag and the error's position."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"not valid JSON: {exc} in {text!r}", where=flag) from None
    except RecursionError:
        raise ConfigError("not valid JSON: nested too deeply", where=flag) from None
    if not isinstance(value, dict):
        raise ConfigError(f"must be a JSON object ({{\"key\": value, ...}}), but got {text!r}", where=flag)
    return value


def _setup_logging(level: Any) -> None:
    """Log to stderr at ``level`` (an invalid level is left to the trainer's config validation)."""
    level = str(level).upper()
    if level not in LOG_LEVELS:
        return
    level = "WARNING" if level == "WARN" else level
    logging.basicConfig(level=level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger().setLevel(level)


# -- rltune train --------------------------------------------------------------------------
def _add_train_parser(commands: Any) -> None:
    p = commands.add_parser(
        "train",
        help="train one trial (like 'rllib train')",
        description=(
            "Train one trial of a trainer. It writes <results-dir>/<name>/ with params.json\n"
            "(the full config), result.json (one JSON line per iteration) and checkpoints.\n"
            "Flags override the fields of a train file (-f); --config is merged into its config."
        ),
        epilog=(
            "examples:\n"
            "  rltune train --run PPO --env CartPole-v1 --stop '{\"episode_reward_mean\": 475}'\n"
            "  rltune train --run DQN --env CartPole-v1 --steps 50000 --local-dir ~/ray_results\n"
            "  rltune train -f studies/cartpole-ppo.yaml --config '{\"seed\": 1}'\n"
            "  rltune train --run PPO --show-config\n\n"
            "Import strings ('pkg.module:Name') name modules on Python's import path; rltune does not add the\n"
            "current directory to it: run with PYTHONPATH=. for a module of the current directory."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("-f", "--file", metavar="FILE.yaml", help="train file with the fields run, env, config, stop, ...")
    p.add_argument("--run", metavar="ALGO", help="algorithm: PPO, DQN, or 'pkg.module:TrainerClass'")
    p.add_argument("--env", help="gymnasium id, register_env name, or 'pkg.module:EnvClass'")
    p.add_argument("--config", metavar="JSON", help="trainer config as a JSON object (see --show-config)")
    p.add_argument(
        "--stop",
        metavar="JSON",
        help="stop when ANY result key reaches its value, e.g. '{\"episode_reward_mean\": 475, "
        "\"timesteps_total\": 200000}'; nested keys as 'info/learner/default_policy/kl'. "
        "Without criteria: train until Ctrl-C",
    )
    p.add_argument("--steps", type=int, metavar="N", help="stop after N env timesteps (adds timesteps_total: N to the stop criteria)")
    p.add_argument("--checkpoint-freq", type=int, metavar="N", help="save a checkpoint every N iterations")
    p.add_argument(
        "--checkpoint-at-end",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="save a checkpoint when training stops (default: yes, as in study files)",
    )
    p.add_argument("--results-dir", "--local-dir", dest="results_dir", metavar="DIR",
                   help="default: $RLTUNE_RESULTS_DIR or ~/rltune_results (--local-dir: RLlib's name)")
    p.add_argument("--name", help="trial directory name (default: RUN_ENV_timestamp)")
    p.add_argument("--tensorboard", action=argparse.BooleanOptionalAction, default=None,
                   help="write TensorBoard event files in the trial dir (default: yes; view: tensorboard --logdir DIR)")
    p.add_argument(
        "--log-level",
        type=str.upper,
        choices=LOG_LEVELS,
        help="log level of this process and the rollout workers (config key log_level; default WARN)",
    )
    p.add_argument("--show-config", action="store_true", help="print the --run trainer's default config and exit")
    p.set_defaults(handler=_train)


def _train_spec(args: argparse.Namespace) -> Any:
    """The trial's fields: the train file's, overridden by the flags."""
    from rltune.orchestrator._stop import StopCriteria, with_timesteps
    from rltune.orchestrator._train_file import TrainSpec, load_train_file, validate_train_fields

    spec = load_train_file(args.file) if args.file else TrainSpec()
    fields = spec.model_dump(exclude_none=True)
    flags = {
        "run": args.run,
        "env": args.env,
        "stop": _json_object(args.stop, "--stop"),
        "checkpoint_freq": args.checkpoint_freq,
        "checkpoint_at_end": args.checkpoint_at_end,
        "results_dir": args.results_dir,
        "name": args.name,
        "tensorboard": args.tensorboard,
    }
    if flags["stop"] is not None:
        flags["stop"] = StopCriteria(flags["stop"], where="--stop").criteria
    fields.update({k: v for k, v in flags.items() if v is not None})
    if args.steps is not None:
        fields["stop"] = with_timesteps(fields.get("stop"), args.steps, where="--steps")
    config = deep_merge(fields.get("config") or {}, _json_object(args.config, "--config") or {})
    if args.env is not None:
        config.pop("env", None)
    elif "env" in fields and config.get("env") not in (None, fields["env"]):
        raise ConfigError(
            f"env is {fields['env']!r} but config.env is {config['env']!r}; give the env once", where=_source(args)
        )
    if args.log_level:
        config["log_level"] = args.log_level
    if "curriculum" in fields:
        config["curriculum"] = fields.pop("curriculum")
    fields["config"] = config
    if args.checkpoint_freq is not None and args.checkpoint_freq < 0:
        raise ConfigError(f"must be >= 0, but got {args.checkpoint_freq}", where="--checkpoint-freq")
    return validate_train_fields(fields, where=_source(args) if args.file is None else f"{_source(args)} and flags")


def _reject_search_space(spec: Any, args: argparse.Namespace) -> None:
    """A config with grid_search / choice / ... entries, or num_samples > 1, is a study: say so instead of a type error."""
    from rltune.orchestrator._train_file import study_problem

    command = f"rltune tune {args.file}" if args.file else "rltune tune STUDY.yaml"
    problem = study_problem(spec.config or {}, spec.num_samples, command)
    if problem:
        raise ConfigError(problem, where=_source(args))


def _source(args: argparse.Namespace) -> str:
    return f"train file {args.file!r}" if args.file else "flags"


def _train(args: argparse.Namespace) -> int:
    from rltune._disk import check_writable_dir
    from rltune._results_dir import default_results_dir
    from rltune.orchestrator._stop import StopCriteria
    from rltune.orchestrator._trial import default_trial_name, make_trial_dir, run_local
    from rltune.trainers import get_trainer_class

    spec = _train_spec(args)
    _reject_search_space(spec, args)
    if spec.run is None:
        raise ConfigError("no algorithm given: use --run ALGO (e.g. --run PPO) or 'run:' in the train file", where=_source(args))
    trainer_cls = get_trainer_class(spec.run)
    if args.show_config:
        print(f"# {trainer_cls.name} default config: key: default  # what it is for")
        print(trainer_cls.describe_config())
        return 0
    config = dict(spec.config or {})
    env = spec.env if spec.env is not None else config.pop("env", None)
    if env is None:
        raise ConfigError("no env given: use --env ENV (e.g. --env CartPole-v1), or 'env:' in the train file", where=_source(args))
    stop_source = "--stop" if args.stop is not None else f"stop in {_source(args)}"
    stop = StopCriteria(spec.stop, where=stop_source)
    replay = None
    if spec.schedule:  # a PBT study's best member's schedule (best_config.yaml): its first config, then its changes
        from rltune.orchestrator._replay import replay_of

        config, replay = replay_of(trainer_cls, config, env, spec.schedule, where=_source(args))
    _setup_logging(config.get("log_level", "WARN"))
    check_writable_dir(spec.results_dir or default_results_dir(), "results directory",  # before any worker starts
                       hint="; choose another one with --results-dir")
    trainer = trainer_cls(config=config, env=env, results_dir=spec.results_dir)
    try:
        name = spec.name or default_trial_name(trainer.name, trainer.env_spec.name)
        trial_dir = make_trial_dir(spec.results_dir, name)
    except BaseException:
        trainer.stop()
        raise
    print(f"{trainer.name} on {trainer.env_spec.name}: trial dir {trial_dir}", flush=True)
    if not stop:
        print("no stop criteria (--stop): training until Ctrl-C", flush=True)
    outcome = run_local(
        trainer,
        trial_dir,
        stop=stop,
        checkpoint_freq=spec.checkpoint_freq or 0,
        checkpoint_at_end=spec.checkpoint_at_end is not False,  # None: not given, on as in study files
        on_result=_print_result,
        on_interrupt=_say_stopping,
        tensorboard=spec.tensorboard is not False,
        schedule=replay,
    )
    last = outcome.last_result or {}
    done = f"iteration {last.get('training_iteration', 0)}, {last.get('timesteps_total', 0):,} timesteps"
    if outcome.interrupted:
        print(f"interrupted (Ctrl-C) after {done}", flush=True)
    elif outcome.stop_reason is not None:
        print(f"stopped: {outcome.stop_reason} ({done}, {last.get('time_total_s', 0.0):.1f}s)", flush=True)
    if outcome.checkpoint:
        print(f"checkpoint: {outcome.checkpoint}")
    else:
        print("checkpoint: none saved (--checkpoint-at-end saves one when training stops, --checkpoint-freq N "
              "every N iterations)")
    views = f"; TensorBoard: tensorboard --logdir {outcome.trial_dir.parent}" if spec.tensorboard is not False else ""
    print(f"trial dir:  {outcome.trial_dir} (params.json, result.json{views})", flush=True)
    return EXIT_INTERRUPTED if outcome.interrupted else 0


def _say_stopping() -> None:
    """The first Ctrl-C of ``rltune train`` (called in the signal handler: one unbuffered write, never print)."""
    message = b"rltune train: interrupted: checkpointing after the current iteration (Ctrl-C again to stop at once)\n"
    try:
        os.write(sys.stderr.fileno(), message)
    except (OSError, ValueError):  # no real stderr (captured): the final lines say it all the same
        pass


def _print_result(result: dict[str, Any]) -> None:
    """One compact line per iteration (a key the result lacks shows as '-')."""

    def get(key: str, spec: str) -> str:
        value = result.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return format(value, spec)
        return format("-", ">" + "".join(c for c in spec.split(".")[0] if c.isdigit()))

    evaluation = result.get("evaluation")
    evaluated = isinstance(evaluation, dict) and evaluation.get("episodes_this_iter")
    print(
        f"iter {get('training_iteration', '4d')}"
        f"  timesteps {get('timesteps_total', '9,d')}"
        f"  reward_mean {get('episode_reward_mean', '9.3f')}"
        f"  len_mean {get('episode_len_mean', '7.1f')}"
        f"  time {get('time_total_s', '7.1f')}s"
        f"  {get('env_steps_per_s', '8,.0f')} steps/s"
        # evaluation_interval: the iterations that evaluated also show the evaluation's mean
        + (f"  eval_reward_mean {evaluation['episode_reward_mean']:.3f}" if evaluated else ""),
        flush=True,
    )


# -- rltune tune ---------------------------------------------------------------------------
def _add_tune_parser(commands: Any) -> None:
    p = commands.add_parser(
        "tune",
        help="run a study: trials searched and pruned by Optuna",
        description=(
            "Run the study of a study file (see studies/): trials of a trainer or function, each in its own\n"
            "process, with grid/random/TPE/GP/CMA-ES search and median/ASHA/Hyperband pruning. It writes\n"
            "<results-dir>/<name>/ with the Optuna storage (study.journal), one directory per trial and\n"
            "best_config.yaml (the best trial as a 'rltune train -f' file). Ctrl-C checkpoints the running\n"
            "trials and stops; --resume continues the study. Flags override the file's fields.\n\n"
            "Exit status: 0 done, 1 every trial failed (or the study stopped on a full disk), 2 bad input\n"
            "(also: the study is already run by another orchestrator, or its directory cannot be written),\n"
            "130 interrupted."
        ),
        epilog=(
            "examples:\n"
            "  rltune tune studies/cartpole-ppo-grid.yaml\n"
            "  rltune tune studies/cartpole-ppo-tpe-asha.yaml --n-trials 20 --n-jobs 2\n"
            "  rltune tune studies/cartpole-ppo-tpe-asha.yaml --resume\n"
            "  rltune train -f ~/rltune_results/cartpole-ppo-grid/best_config.yaml"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("study", metavar="STUDY.yaml", help="study file")
    p.add_argument("--n-trials", type=int, metavar="N", help="total trials of the study (default: grid points x num_samples)")
    p.add_argument("--timeout", type=float, metavar="SECONDS", help="start no new trial after this many seconds")
    p.add_argument("--n-jobs", type=int, metavar="N", help="trials at once (within the CPU budget: 1 + num_workers each)")
    p.add_argument("--max-concurrent", type=int, metavar="N", help="trials at once, ignoring the CPU budget")
    p.add_argument("--storage", metavar="URL",
                   help="Optuna storage URL (default: a journal file in the study directory); keep a password off the "
                        "command line with PGPASSWORD / ~/.pgpass, or '${NAME}' / '${file:PATH}' in the URL")
    p.add_argument("--resume", action="store_true", help="continue the study: keep finished trials, resume interrupted "
                   "ones, retry from their last checkpoints the trials that failed for lack of disk space")
    p.add_argument("--retry-failed", action="store_true",
                   help="with --resume (implied): also retry every other FAILed trial from its last checkpoint")
    p.add_argument("--results-dir", "--local-dir", dest="results_dir", metavar="DIR",
                   help="default: $RLTUNE_RESULTS_DIR or ~/rltune_results (--local-dir: RLlib's name)")
    p.add_argument("--name", help="study name (default: the file's name field, or its file name)")
    p.add_argument("--num-samples", type=int, metavar="N", help="runs of each grid point")
    p.add_argument("--stop", metavar="JSON", help="stop criteria of every trial, replacing the file's")
    p.add_argument("--config", metavar="JSON", help="merged into the file's config")
    p.add_argument("--tracking-uri", metavar="URI",
                   help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI, else a local store in the results dir)")
    p.add_argument("--no-tracking", dest="tracking", action="store_false", default=None,
                   help="do not record the study in MLflow")
    p.add_argument("--tensorboard", action=argparse.BooleanOptionalAction, default=None,
                   help="write TensorBoard event files in each trial's dir (default: no, or the file's tensorboard field)")
    p.add_argument("--quiet", action="store_true", help="plain lines instead of the live view")
    p.set_defaults(handler=_tune)


def _tune(args: argparse.Namespace) -> int:
    from rltune.orchestrator._run_study import all_failed, run_plan
    from rltune.orchestrator._spec import load_study_file

    for flag in ("n_trials", "n_jobs", "max_concurrent", "num_samples"):
        value = getattr(args, flag)
        if value is not None and value < 1:
            raise ConfigError(f"must be >= 1, but got {value}", where="--" + flag.replace("_", "-"))
    if args.timeout is not None and not (math.isfinite(args.timeout) and args.timeout > 0):
        raise ConfigError(f"must be a finite number > 0, but got {args.timeout}", where="--timeout")
    overrides = {
        "n_trials": args.n_trials,
        "timeout_s": args.timeout,
        "n_jobs": args.n_jobs,
        "storage": args.storage,
        "results_dir": args.results_dir,
        "name": args.name,
        "num_samples": args.num_samples,
        "stop": _json_object(args.stop, "--stop"),
        "tracking_uri": args.tracking_uri,
        "tracking": args.tracking,
        "tensorboard": args.tensorboard,
    }
    plan = load_study_file(args.study, overrides, config_overrides=_json_object(args.config, "--config"))
    analysis = run_plan(plan, resume=args.resume or args.retry_failed, retry_failed=args.retry_failed, verbose=1,
                        quiet=args.quiet, max_concurrent=args.max_concurrent)
    from rltune.orchestrator._storage import is_shared

    if analysis.tracking_unrecorded and not analysis.interrupted and not is_shared(plan.spec.storage):
        print(f"record what MLflow lacks with: {_resume_command(args)}", flush=True)
    if analysis.interrupted:
        if is_shared(plan.spec.storage):  # a worker of a shared study: start it again to rejoin
            print("rejoin with the same command; this worker's trials are retried from their checkpoints "
                  "once their heartbeat is stale", flush=True)
        else:
            print(f"resume with: {_resume_command(args)}", flush=True)
        return EXIT_INTERRUPTED
    if analysis.no_space:
        print(f"rltune tune: study {plan.name!r} stopped early, no space left on device ({analysis.no_space}); free "
              f"space, then: {_resume_command(args)}: exit status {EXIT_STUDY_FAILED}", file=sys.stderr, flush=True)
        return EXIT_STUDY_FAILED
    failed = all_failed(analysis)
    if failed:
        print(f"rltune tune: every trial of study {plan.name!r} failed ({len(failed)} FAIL): exit status "
              f"{EXIT_STUDY_FAILED}", file=sys.stderr, flush=True)
        return EXIT_STUDY_FAILED
    return 0


def _resume_command(args: argparse.Namespace) -> str:
    from rltune._secrets import redact_url

    return (f"rltune tune {args.study} --resume" + (f" --results-dir {args.results_dir}" if args.results_dir else "")
            + (f" --name {args.name}" if args.name else "")
            + (f" --storage {redact_url(args.storage)}" if args.storage else ""))


if __name__ == "__main__":
    drop_current_directory()
    sys.exit(main())
