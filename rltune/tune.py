"""``from rltune import tune``: studies of trainers or functions, searched and pruned by Optuna.

::

    from rltune import tune

    analysis = tune.run(
        "PPO",
        stop={"episode_reward_mean": 200},
        config={"env": "CartPole-v1", "num_gpus": 0, "num_workers": 1,
                "lr": tune.grid_search([0.01, 0.001, 0.0001])},
    )
    print(analysis.best_config, analysis.best_checkpoint)

The same fields make a study file (``rltune tune STUDY.yaml``; see
``studies/``). Search-space entries: :func:`grid_search`, :func:`choice`,
:func:`uniform`, :func:`loguniform`, :func:`randint` (upper bound
excluded), :func:`quniform`, :func:`qloguniform`, :func:`lograndint`,
:func:`qrandint`, :func:`randn`, anywhere in ``config``
(``model.fcnet_hiddens``); :func:`sample_from` computes a value from the others.

A trainable is a trainer name (``"PPO"``), a Trainer class, an import
string (``"pkg.module:Name"``), or a function ``fn(config, reporter)``
that calls ``reporter(**result)`` once per iteration (see :class:`Reporter`
for checkpoints: ``reporter.checkpoint_dir()``, ``reporter.restored_checkpoint``,
``reporter.should_checkpoint``). Each trial runs in its own process; a trial
that raises or crashes is recorded (FAIL, with its traceback) and the study
goes on.
"""

from __future__ import annotations

import sys
from typing import Any

from rltune._pretty_print import pretty_print
from rltune.env import register_env
from rltune.errors import ConfigError, StudyFailedError
from rltune.orchestrator._analysis import Analysis, TrialRecord
from rltune.orchestrator._checkpoint import Checkpoint
from rltune.orchestrator._ray_domains import lograndint, qloguniform, qrandint, randn, sample_from
from rltune.orchestrator._ray_mlflow import MLflowLoggerCallback, setup_mlflow
from rltune.orchestrator._ray_schedulers import (
    ASHAScheduler,
    AsyncHyperBandScheduler,
    FIFOScheduler,
    HyperBandScheduler,
    MedianStoppingRule,
    PB2,
    PopulationBasedTraining,
)
from rltune.orchestrator._ray_searchers import (
    BasicVariantGenerator,
    BayesOptSearch,
    ConcurrencyLimiter,
    HyperOptSearch,
    OptunaSearch,
)
from rltune.orchestrator._ray_translate import translate_search
from rltune.orchestrator._reporter import Reporter, TrialStopped
from rltune.orchestrator._result_grid import Result, ResultGrid
from rltune.orchestrator._rllib_study import function
from rltune.orchestrator._run_study import all_failed, first_error, run_plan
from rltune.orchestrator._search_space import Domain, choice, grid_search, loguniform, quniform, randint, uniform
from rltune.orchestrator._session import get_checkpoint, get_context, get_trial_dir, get_trial_id, get_trial_name, report
from rltune.orchestrator._spec import FIELDS, StudyPlan, load_study_file, make_plan
from rltune.orchestrator._trainable_wrappers import with_parameters, with_resources
from rltune.orchestrator._tune_callbacks import Callback
from rltune.orchestrator._tuner import Tuner
from rltune.orchestrator._tuner_config import CheckpointConfig, FailureConfig, RunConfig, TuneConfig

__all__ = [
    "ASHAScheduler",
    "Analysis",
    "AsyncHyperBandScheduler",
    "BasicVariantGenerator",
    "BayesOptSearch",
    "Callback",
    "Checkpoint",
    "CheckpointConfig",
    "ConcurrencyLimiter",
    "Domain",
    "FIFOScheduler",
    "FailureConfig",
    "HyperBandScheduler",
    "HyperOptSearch",
    "MLflowLoggerCallback",
    "MedianStoppingRule",
    "PB2",
    "PopulationBasedTraining",
    "OptunaSearch",
    "Reporter",
    "Result",
    "ResultGrid",
    "RunConfig",
    "TrialRecord",
    "TrialStopped",
    "TuneConfig",
    "Tuner",
    "choice",
    "function",
    "get_checkpoint",
    "get_context",
    "get_trial_dir",
    "get_trial_id",
    "get_trial_name",
    "grid_search",
    "load_study_file",
    "lograndint",
    "loguniform",
    "pretty_print",
    "qloguniform",
    "qrandint",
    "quniform",
    "randint",
    "randn",
    "register_env",
    "report",
    "run",
    "run_plan",
    "sample_from",
    "setup_mlflow",
    "translate_search",
    "uniform",
    "with_parameters",
    "with_resources",
]


def __getattr__(name: str) -> Any:
    """Ray Tune's ``tune.PlacementGroupFactory`` (its module loads the trainers), and Ray Tune's submodules as
    attributes (``tune.schedulers.ASHAScheduler`` after ``from rltune import tune``), loaded on first use."""
    if name == "PlacementGroupFactory":
        from rltune.trainers.rllib._old_trainer_names import PlacementGroupFactory

        return PlacementGroupFactory
    from rltune import _compat_paths

    if _compat_paths.is_table_module(f"{__name__}.{name}"):
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'rltune.tune' has no attribute {name!r}")


def run(
    run_or_experiment: Any = None,
    *,
    config: dict[str, Any] | None = None,
    stop: dict[str, Any] | None = None,
    name: str | None = None,
    metric: str | list[str] | None = None,
    mode: str | list[str] | None = None,
    num_samples: int | None = None,
    search_alg: Any = None,
    scheduler: Any = None,
    pruner: Any = None,
    n_trials: int | None = None,
    timeout_s: float | None = None,
    n_jobs: int | None = None,
    max_concurrent: int | None = None,
    checkpoint_freq: int | None = None,
    checkpoint_at_end: bool | None = None,
    keep_checkpoints_num: int | None = None,
    max_failures: int | None = None,
    trial_timeout_s: float | None = None,
    storage: str | None = None,
    results_dir: str | None = None,
    local_dir: str | None = None,
    resources_per_trial: dict[str, float] | None = None,
    tracking_uri: str | None = None,
    tracking: bool | None = None,
    tensorboard: bool | None = None,
    curriculum: dict[str, Any] | None = None,
    env: Any = None,
    seed: int | None = None,
    constraints: list[str] | None = None, seeds_per_trial: int | None = None,  # docs/multi-objective.md, seeds.md
    seed_mode: str | None = None, aggregate: str | None = None, final_evaluation: dict[str, int] | None = None,
    resume: bool | str = False,
    retry_failed: bool = False,
    verbose: int = 1,
    raise_on_failed_trial: bool = False,
    callbacks: list[Any] | None = None,
) -> Analysis:
    """Run a study and return its :class:`Analysis` (``study``, ``trials``, ``best_config``, ``best_result``, ``best_checkpoint``).

    The fields are those of a study file (see :mod:`rltune.orchestrator._spec`);
    a field left None takes its default. ``resume=True`` continues the study
    ``name`` in its storage: finished trials are kept, interrupted ones go on
    from their checkpoint, grid points never run twice, and trials that failed
    for lack of disk space are retried from their last checkpoints (every
    failed trial with ``retry_failed=True``). A study that does not exist is
    a :class:`~rltune.errors.DiskError`; ``resume="auto"`` (Tune's) starts it
    then. A results directory that cannot be written (read-only, no
    permission) is a ``DiskError`` before any trial. ``verbose=0`` prints
    nothing; 1 shows a live view on a terminal and plain lines otherwise.
    Invalid fields raise one :class:`~rltune.errors.ConfigError` listing every
    problem. A study whose every trial failed raises
    :class:`~rltune.errors.StudyFailedError` at the end (its ``analysis``
    holds the trials); with ``raise_on_failed_trial``, so does one with any
    FAIL trial. A study that another orchestrator runs (journal storage)
    raises :class:`~rltune.errors.StudyLockedError`; an env that cannot be
    built, :class:`~rltune.errors.ConfigError` or :class:`~rltune.errors.EnvError`,
    before any trial.

    RLlib's and Tune's names work too: ``config`` may be a config builder
    (``rltune.trainers.<ALGO>Config()...``, its search-space entries kept; ``run`` defaults to
    its algorithm), ``local_dir`` is ``results_dir``, and
    ``resources_per_trial={"cpu": N}`` sets the CPUs a trial holds of the
    budget that ``n_jobs`` trials share (a trainer's at least 1 + num_workers).
    Ray Tune's searchers (``OptunaSearch``, ``HyperOptSearch``, ...) and
    schedulers (``ASHAScheduler``, ``MedianStoppingRule``, ...) are taken as
    ``search_alg`` / ``scheduler``, and ``callbacks=[MLflowLoggerCallback(...)]``
    sets the study's MLflow store (:func:`translate_search`). Lists ``metric=[a, b], mode=["max", "min"]``
    make a multi-objective study (front: ``analysis.best_trials``; ``constraints``: docs/multi-objective.md).
    """
    arguments = dict(locals())  # every parameter but run_or_experiment, local_dir and the last five is a study field
    fields = {"run": run_or_experiment, **{field: arguments[field] for field in FIELDS if field in arguments}}
    fields["local_dir"] = local_dir  # Tune's name of results_dir: the planner translates it (or names the clash)
    fields["callbacks"] = callbacks  # Ray Tune's MLflowLoggerCallback: translate_search takes it
    resume = _resume_mode(resume, retry_failed)
    plan = _plan(fields, resume)
    analysis = run_plan(plan, resume=resume, retry_failed=retry_failed, verbose=verbose)
    _raise_on_failures(analysis, plan.name, raise_on_failed_trial)
    return analysis


def _resume_mode(resume: Any, retry_failed: Any) -> bool | str:
    """``resume`` as the runner takes it: False, True (the study must exist) or "auto" (Tune's "AUTO")."""
    if isinstance(resume, str) and resume.lower() == "auto":
        resume = "auto"
    elif not isinstance(resume, bool):
        raise ConfigError(f"must be True, False or 'auto', but got {resume!r}", where="tune.run resume")
    if not isinstance(retry_failed, bool):
        raise ConfigError(f"must be True or False, but got {retry_failed!r}", where="tune.run retry_failed")
    return resume or retry_failed


def _from_builder(run: Any, config: Any) -> tuple[Any, Any]:
    """``(run, config)`` with a config builder made its dict; ``run`` defaults to the builder's algorithm.

    A builder of another algorithm than ``run`` is an error naming both.
    """
    builders = sys.modules.get("rltune.trainers.rllib._config_builder")  # a builder exists only if it was imported
    if builders is None or not isinstance(config, builders.AlgorithmConfig):
        return run, config
    algo = config.algo_class
    if algo is not None:
        if run is None:
            run = algo.name
        elif isinstance(run, (str, type)):
            from rltune.trainers import get_trainer_class

            try:
                trainer_cls = get_trainer_class(run)
            except ConfigError:  # a function, or a bad name: the study's checks say which
                return run, config.to_dict()
            if not issubclass(trainer_cls, algo):
                raise ConfigError(f"config is a {type(config).__name__}, which configures {algo.name}, but run is "
                                  f"{trainer_cls.name}; use {trainer_cls.name}Config()", where="tune.run")
    return run, config.to_dict()


def _plan(fields: dict[str, Any], resume: bool) -> StudyPlan:
    """The study plan of :func:`run`'s arguments (None: the field's default); ConfigError on a bad field."""
    if resume and fields["name"] is None:
        raise ConfigError("resume=True needs the name of the study to continue (name=...)", where="tune.run")
    fields["run"], fields["config"] = _from_builder(fields["run"], fields["config"])
    fields = translate_search(fields)  # Ray Tune's searchers, schedulers and callbacks as study fields
    return make_plan({k: v for k, v in fields.items() if v is not None}, where="tune.run")


def _raise_on_failures(analysis: Analysis, study_name: str, raise_on_failed_trial: bool) -> None:
    """StudyFailedError if every trial failed, or (``raise_on_failed_trial``) any did."""
    failed = all_failed(analysis)
    if failed:
        raise StudyFailedError(f"every trial of study {study_name!r} failed ({len(failed)}): {first_error(analysis)} "
                               "(each trial's traceback is in error.txt of its directory; the analysis is in "
                               "this error's .analysis)", analysis=analysis, failed=failed)
    if raise_on_failed_trial:
        failed = [t.number for t in analysis.trials if t.state == "FAIL"]
        if failed:
            raise StudyFailedError(f"trials {failed} failed (their tracebacks are in error.txt of each trial "
                                   "directory)", analysis=analysis, failed=failed)
