"""Ray Tune 2.x's settings of a Tuner: ``TuneConfig``, ``RunConfig``, ``CheckpointConfig``, ``FailureConfig``.

Each is validated where it is built: an unknown argument, a wrong type or
one of Ray's options that rltune does not carry out raises one
:class:`~rltune.errors.ConfigError` naming every such argument
(``invalid TuneConfig: num_sample: unknown argument; did you mean 'num_samples'?``).
What each becomes in the study is said by :func:`study_fields`.
"""

from __future__ import annotations

import difflib
from typing import Any, ClassVar, Literal, Optional

from pydantic import ConfigDict, Field, ValidationError

from rltune._validation import MAX_TRIALS, UserInput, error_text
from rltune.orchestrator._objectives import Metric, Mode
from rltune.errors import ConfigError

UNLIMITED_FAILURES = 1_000_000  # Ray's max_failures=-1 (retry without end) as a study's max_failures


class _RayConfig(UserInput):
    """A Ray config class: keyword arguments validated at once into one ConfigError (Ray's options named)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, arbitrary_types_allowed=True, frozen=True)
    refuse_nul = True
    # Ray's options that rltune does not carry out, each with why and what to do instead
    REFUSED: ClassVar[dict[str, str]] = {}

    def __init__(self, **kwargs: Any) -> None:
        """Validate ``kwargs`` (Ray's keyword arguments); ConfigError naming each bad one."""
        where = type(self).__name__
        problems = [f"{k}: {why}" for k, why in self.REFUSED.items() if kwargs.get(k) not in (None, False)]
        kwargs = {k: v for k, v in kwargs.items() if k not in self.REFUSED}
        for key in kwargs:
            if key not in type(self).model_fields:
                valid = [*type(self).model_fields, *self.REFUSED]
                close = difflib.get_close_matches(key, valid, n=1, cutoff=0.6)
                hint = f"did you mean {close[0]!r}?" if close else f"the arguments are {', '.join(valid)}"
                problems.append(f"{key}: unknown argument; {hint}")
        known = {k: v for k, v in kwargs.items() if k in type(self).model_fields}
        try:
            super().__init__(**known)
        except ValidationError as exc:
            for err in exc.errors():
                shown = repr(err.get("input"))
                shown = shown if len(shown) <= 60 else shown[:57] + "..."
                problems.append(f"{'.'.join(str(p) for p in err['loc'])}: {error_text(err)} (got {shown})")
        if problems:
            raise ConfigError(problems, where=where)


class TuneConfig(_RayConfig):
    """Ray's ``tune.TuneConfig``: what is searched, how, and how many trials run (at once)."""

    REFUSED: ClassVar[dict[str, str]] = {
        "trial_name_creator": "not supported: trial directories are named trial_NNNNN in the study's directory",
        "trial_dirname_creator": "not supported: trial directories are named trial_NNNNN in the study's directory",
    }

    metric: Optional[Metric] = Field(None, description="The result key to optimize (None: none; get_best_result "
                                                       "then needs one), or a list of them: a multi-objective study "
                                                       "(docs/multi-objective.md), its front in "
                                                       "ResultGrid.best_results.")
    mode: Optional[Mode] = Field(None, description="max or min (default max), or a list of them, one per metric.")
    num_samples: int = Field(1, ge=1, le=MAX_TRIALS, description="Runs of each grid point (trials, without grid "
                                                                 "entries).")
    search_alg: Any = Field(None, description="What tune.run's search_alg takes (default: the study's).")
    scheduler: Any = Field(None, description="What tune.run's scheduler takes (default: none).")
    max_concurrent_trials: Optional[int] = Field(None, ge=1, description="Trials at once (the study's n_jobs, "
                                                                         "within the CPU budget).")
    time_budget_s: Optional[float] = Field(None, gt=0, description="No new trial starts after this many seconds.")
    reuse_actors: Optional[bool] = Field(None, description="Accepted and ignored: each trial is its own process.")
    chdir_to_trial_dir: Optional[bool] = Field(None, description="Accepted and ignored: a trial runs in the "
                                                                 "study's working directory (use get_context()).")


class CheckpointConfig(_RayConfig):
    """Ray's ``CheckpointConfig``: how often trainers checkpoint, which checkpoints are kept."""

    num_to_keep: Optional[int] = Field(None, ge=1, description="Checkpoints kept per trial (the best by "
                                                               "checkpoint_score_attribute, else the latest).")
    checkpoint_frequency: int = Field(0, ge=0, description="A trainer checkpoints every N iterations (0: never but "
                                                           "at the end).")
    checkpoint_at_end: Optional[bool] = Field(None, description="Checkpoint a trial when it stops (default True).")
    checkpoint_score_attribute: Optional[str] = Field(None, description="The result key that ranks checkpoints.")
    checkpoint_score_order: Literal["max", "min"] = Field("max", description="Whether a higher score is better.")


class FailureConfig(_RayConfig):
    """Ray's ``FailureConfig``: how often a failed trial is restarted from its last checkpoint."""

    REFUSED: ClassVar[dict[str, str]] = {
        "fail_fast": "not supported: a failed trial is recorded and the study goes on; read ResultGrid.errors",
    }

    max_failures: int = Field(0, ge=-1, description="Restarts of a failed trial (-1: without limit).")


class RunConfig(_RayConfig):
    """Ray's ``RunConfig`` (``train.RunConfig``, ``air.RunConfig``): the study's name, directory, stop, checkpoints."""

    REFUSED: ClassVar[dict[str, str]] = {
        "sync_config": "not supported: trial directories are local (results_dir); a shared study uses an RDB storage",
        "progress_reporter": "not supported: verbose=0 or 1 chooses the study's display",
        "log_to_file": "not supported: each trial's output is in output.log of its directory",
        "storage_filesystem": "not supported: storage_path is a local directory",
    }

    name: Optional[str] = Field(None, description="The study's name (its directory under storage_path).")
    storage_path: Optional[str] = Field(None, description="The results directory (default $RLTUNE_RESULTS_DIR or "
                                                          "~/rltune_results).")
    local_dir: Optional[str] = Field(None, description="Ray 2.0-2.6's name of storage_path.")
    stop: Optional[dict[str, Any]] = Field(None, description="A trial stops when ANY result key reaches its value.")
    checkpoint_config: Optional[CheckpointConfig] = None
    failure_config: Optional[FailureConfig] = None
    verbose: Optional[int] = Field(None, ge=0, le=3, description="0: silent; 1-3: the study's display.")
    callbacks: Optional[list[Any]] = Field(None, description="tune.Callback objects (their hooks get the study's "
                                                             "events) and MLflowLoggerCallback (the study's MLflow).")


def study_fields(tune_config: TuneConfig, run_config: RunConfig) -> dict[str, Any]:
    """The ``tune.run`` keyword arguments of a Tuner's settings (None: the study's default)."""
    if run_config.storage_path is not None and run_config.local_dir is not None:
        raise ConfigError("storage_path and local_dir (its older name) are both given; give one", where="RunConfig")
    from rltune.orchestrator._ray_part import RayName
    from rltune.orchestrator._tune_callbacks import Callback

    others = [type(c).__name__ for c in run_config.callbacks or () if not isinstance(c, (Callback, RayName))]
    if others:
        raise ConfigError(f"callbacks: {', '.join(others)} is not a tune.Callback (a subclass whose on_trial_* "
                          "hooks the study calls) or Ray Tune's MLflowLoggerCallback; MLflow tracking is on by "
                          "default (MLFLOW_TRACKING_URI)", where="RunConfig")
    ray_names = [c for c in run_config.callbacks or () if isinstance(c, RayName)]  # translate_search takes them
    checkpoints = run_config.checkpoint_config or CheckpointConfig()
    failures = run_config.failure_config or FailureConfig()
    keep = checkpoints.num_to_keep if checkpoints.checkpoint_score_attribute is None else None  # pruned at the end
    return {
        "metric": tune_config.metric or None,
        "mode": tune_config.mode or ("max" if tune_config.metric else None),
        "num_samples": tune_config.num_samples,
        "search_alg": tune_config.search_alg,
        "scheduler": tune_config.scheduler,
        "n_jobs": tune_config.max_concurrent_trials,
        "timeout_s": tune_config.time_budget_s,
        "name": run_config.name,
        "results_dir": run_config.storage_path or run_config.local_dir,
        "stop": run_config.stop,
        "checkpoint_freq": checkpoints.checkpoint_frequency or None,
        "checkpoint_at_end": checkpoints.checkpoint_at_end,
        "keep_checkpoints_num": keep,
        "max_failures": UNLIMITED_FAILURES if failures.max_failures == -1 else failures.max_failures,
        "callbacks": ray_names or None,
    }
