"""Ray Tune 2.x's ``Tuner``: a study planned and run as ``tune.run``'s, its outcome read as a ``ResultGrid``.

::

    tuner = tune.Tuner(
        train_fn,
        param_space={"lr": tune.loguniform(1e-4, 1e-1)},
        tune_config=tune.TuneConfig(metric="score", mode="max", num_samples=8),
        run_config=train.RunConfig(name="my_study", stop={"training_iteration": 20}),
    )
    results = tuner.fit()
    best = results.get_best_result()
    tuner = tune.Tuner.restore(results.experiment_path, trainable=train_fn)   # after a crash or Ctrl-C

One code path: :meth:`Tuner.fit` plans the study fields that
:func:`~rltune.orchestrator._tuner_config.study_fields` makes of its
settings with the planner ``tune.run`` uses (:func:`~rltune.orchestrator._spec.make_plan`)
and runs the plan with its :func:`~rltune.orchestrator._run_study.run_plan`,
so a Tuner and a ``tune.run`` of the same study run the same trials.
``fit`` writes ``tuner.json`` in the study's directory first: the settings
as data (search-space entries in their study-file form), what
:meth:`Tuner.restore` reads to resume the study (``resume=True``). Values
that are not data (an Optuna sampler object, a class in the config) are not
written; ``restore`` then takes them again (``param_space=...``).
"""

from __future__ import annotations

import json
import os
import shutil
from datetime import datetime
from pathlib import Path
from typing import Any

from rltune._search_entries import Domain
from rltune._disk import writing
from rltune._validation import safe_name
from rltune.errors import ConfigError
from rltune.orchestrator._analysis import Analysis
from rltune.orchestrator._result_grid import ResultGrid
from rltune.orchestrator._run_study import run_plan
from rltune.orchestrator._ray_translate import translate_search
from rltune.orchestrator._spec import make_plan
from rltune.orchestrator._tune_callbacks import Callback, CallbackObserver
from rltune.orchestrator._tuner_config import RunConfig, TuneConfig, study_fields

STATE_FILE = "tuner.json"
_NOT_DATA = object()


class Tuner:
    """Ray Tune 2.x's Tuner: ``trainable`` searched over ``param_space`` with ``tune_config`` and ``run_config``."""

    def __init__(self, trainable: Any = None, *, param_space: Any = None, tune_config: TuneConfig | None = None,
                 run_config: RunConfig | None = None) -> None:
        """A study of ``trainable`` (a trainer name or class, a function) over ``param_space``; runs on :meth:`fit`."""
        problems = []
        if tune_config is not None and not isinstance(tune_config, TuneConfig):
            problems.append(f"tune_config: must be a tune.TuneConfig, but got {type(tune_config).__name__}")
        if run_config is not None and not isinstance(run_config, RunConfig):
            problems.append(f"run_config: must be a RunConfig (rltune.train.RunConfig), but got "
                            f"{type(run_config).__name__}")
        if param_space is not None and not isinstance(param_space, dict) and not hasattr(param_space, "to_dict"):
            problems.append(f"param_space: must be a dict (or a config builder), but got {type(param_space).__name__}")
        if trainable is None:
            problems.append("trainable: required (a trainer name such as 'PPO', a Trainer class, or a function)")
        if problems:
            raise ConfigError(problems, where="Tuner")
        self.trainable = trainable
        self.param_space = param_space
        self.tune_config = tune_config or TuneConfig()
        self.run_config = run_config or RunConfig()
        self._resume: dict[str, Any] = {}  # restore(): tune.run's resume arguments
        self._results: ResultGrid | None = None

    def fit(self) -> ResultGrid:
        """Run the study (or, after :meth:`restore`, continue it) and return its :class:`ResultGrid`.

        A study whose every trial failed returns its results too (``errors``),
        as Ray does; bad settings raise :class:`~rltune.errors.ConfigError`.
        """
        run, config, fields = self._study()
        plan = make_plan({"run": run, "config": config, **fields}, where="Tuner")
        if not self._resume:
            _write_state(self, run, config, fields)
        hooks = [c for c in self.run_config.callbacks or () if isinstance(c, Callback)]
        callbacks = CallbackObserver(hooks, plan.name)
        callbacks.call("setup", stop=plan.spec.stop, num_samples=plan.spec.num_samples,
                       total_num_samples=plan.total_trials)
        try:
            analysis = run_plan(plan, verbose=_verbose(self.run_config.verbose), observers=[callbacks],
                                **self._resume)
        finally:
            callbacks.end()
        self._results = self._result_grid(analysis)
        return self._results

    def get_results(self) -> ResultGrid:
        """The results of the last :meth:`fit` (of this Tuner or, restored, the study's so far)."""
        if self._results is None:
            raise ConfigError("no results yet: call fit() first", where="Tuner.get_results")
        return self._results

    def _study(self) -> tuple[Any, dict[str, Any], dict[str, Any]]:
        """``(run, config, tune.run's other fields)`` of this Tuner."""
        run, config = self.trainable, self.param_space or {}
        if hasattr(config, "to_dict") and not isinstance(config, dict):  # an RLlib-style config builder
            if getattr(config, "algo_class", None) is not None and run is None:
                run = config.algo_class.name
            config = config.to_dict()
        given = {k: v for k, v in study_fields(self.tune_config, self.run_config).items() if v is not None}
        # Ray Tune's searchers, schedulers and MLflowLoggerCallback become study fields, as in tune.run
        fields = translate_search({"run": run, "config": config, **given}, where="TuneConfig")
        run, config = fields.pop("run"), fields.pop("config")
        fields.setdefault("metric", None)
        fields.setdefault("name", None)
        if fields["metric"] is None and _is_function(run):  # a function reports no episode_reward_mean
            fields["metric"], fields["mode"] = "training_iteration", "max"
        if fields["name"] is None:  # named here (not by the planner): tuner.json goes to the study's directory
            inner = getattr(run, "trainable", run)
            base = inner if isinstance(inner, str) else getattr(inner, "name", None) or getattr(inner, "__name__", "")
            fields["name"] = safe_name(f"{base}_{datetime.now():%Y-%m-%d_%H-%M-%S}")
        return run, config, {k: v for k, v in fields.items() if v is not None}

    def _result_grid(self, analysis: Analysis) -> ResultGrid:
        checkpoints = self.run_config.checkpoint_config
        score = None
        if checkpoints is not None and checkpoints.checkpoint_score_attribute:
            score = (checkpoints.checkpoint_score_attribute, checkpoints.checkpoint_score_order)
        grid = ResultGrid(analysis, self.tune_config.metric, self.tune_config.mode, score)
        if score is not None and checkpoints is not None and checkpoints.num_to_keep:
            _keep_best(grid, checkpoints.num_to_keep)
            grid = ResultGrid(analysis, self.tune_config.metric, self.tune_config.mode, score)
        return grid

    @classmethod
    def can_restore(cls, path: str | os.PathLike[str]) -> bool:
        """Whether ``path`` is the directory of a Tuner's study that :meth:`restore` can continue."""
        return (Path(path) / STATE_FILE).is_file() and (Path(path) / "study.json").is_file()

    @classmethod
    def restore(cls, path: str | os.PathLike[str], trainable: Any = None, *, resume_unfinished: bool = True,
                resume_errored: bool = False, restart_errored: bool = False, param_space: Any = None) -> "Tuner":
        """The Tuner of the study in ``path`` (``ResultGrid.experiment_path``); its :meth:`fit` continues it.

        Finished trials are kept, interrupted ones continue from their last
        checkpoint (``train.get_checkpoint()``), ``resume_errored=True``
        retries the failed ones from theirs and ``restart_errored=True`` from
        scratch (each as a new trial, counted once). ``trainable`` is required unless
        the study ran a trainer by name; ``param_space`` when the study's
        was not data (it held objects).
        """
        problems = [f"{name}: must be True or False, but got {value!r}" for name, value in
                    (("resume_unfinished", resume_unfinished), ("resume_errored", resume_errored),
                     ("restart_errored", restart_errored)) if not isinstance(value, bool)]
        if resume_unfinished is False:
            problems.append("resume_unfinished=False: not supported; a resumed study continues its unfinished trials")
        if restart_errored is True and resume_errored is True:
            problems.append("resume_errored and restart_errored are both True; give one (from the last checkpoints, "
                            "or from scratch)")
        if not cls.can_restore(path):
            problems.append(f"path: {str(path)!r} is not the directory of a Tuner's study (no {STATE_FILE} and "
                            "study.json in it)")
            raise ConfigError(problems, where="Tuner.restore")
        state = _read_state(Path(path) / STATE_FILE)
        trainable = trainable if trainable is not None else state.get("run")
        if trainable is None:
            problems.append("trainable: required, the function or class the study ran (it is not stored)")
        if param_space is None and state.get("param_space_in_code"):
            problems.append("param_space: required, the study's param_space held objects that are not stored")
        if problems:
            raise ConfigError(problems, where="Tuner.restore")
        directory = Path(path).resolve()
        run_config = RunConfig(**{**state["run_config"], "name": directory.name, "storage_path": str(directory.parent),
                                  "local_dir": None})
        tuner = cls(trainable, param_space=param_space if param_space is not None else state["param_space"],
                    tune_config=TuneConfig(**state["tune_config"]), run_config=run_config)
        tuner._resume = {"resume": True, "retry_failed": "restart" if restart_errored is True else resume_errored}
        return tuner


def _read_state(path: Path) -> dict[str, Any]:
    """The settings in ``tuner.json``; a ConfigError naming the file if it cannot be read as written."""
    try:
        state = json.loads(path.read_text())
        if not all(isinstance(state.get(k), dict) for k in ("tune_config", "run_config")):
            raise ValueError("tune_config and run_config must be objects")
    except (OSError, ValueError, AttributeError) as exc:
        raise ConfigError(f"{str(path)!r} cannot be read ({exc}); it is written by Tuner.fit",
                          where="Tuner.restore") from None
    return state


def _is_function(run: Any) -> bool:
    return callable(run) and not isinstance(run, type) and not hasattr(run, "trainable")


def _verbose(verbose: int | None) -> int:
    return 1 if verbose is None else min(int(verbose), 1)


def _data(value: Any) -> Any:
    """``value`` as JSON data (search-space entries in their study-file form), or :data:`_NOT_DATA`."""
    if isinstance(value, Domain):
        return value.to_yaml()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        items = [_data(v) for v in value]
        return _NOT_DATA if any(i is _NOT_DATA for i in items) else items
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        items = {k: _data(v) for k, v in value.items()}
        return _NOT_DATA if any(i is _NOT_DATA for i in items.values()) else items
    return _NOT_DATA


def _write_state(tuner: Tuner, run: Any, config: dict[str, Any], fields: dict[str, Any]) -> None:
    """``tuner.json`` in the study's directory: the Tuner's settings as data, for :meth:`Tuner.restore`."""
    from rltune.orchestrator._study_setup import study_dir_of

    param_space = _data(config)
    tune_config = {k: _data(v) for k, v in tuner.tune_config.model_dump(exclude_none=True).items()}
    tune_config = {k: v for k, v in tune_config.items() if v is not _NOT_DATA}  # an Optuna object: the default
    run_config = {k: _data(v) for k, v in tuner.run_config.model_dump(exclude_none=True).items()
                  if k not in ("name", "storage_path", "local_dir", "callbacks")}  # callbacks: code, given again
    state = {
        "run": run if isinstance(run, str) else None,
        "param_space": None if param_space is _NOT_DATA else param_space,
        "param_space_in_code": param_space is _NOT_DATA,
        "tune_config": tune_config,
        "run_config": {k: v for k, v in run_config.items() if v is not _NOT_DATA},
    }
    directory = study_dir_of(fields.get("results_dir"), fields["name"])
    if (directory / "study.json").exists():
        return  # the study exists: tune.run says so (a Tuner of a new study needs a new name)
    with writing(directory / STATE_FILE, "the Tuner's settings"):
        directory.mkdir(parents=True, exist_ok=True)
        tmp = directory / f".{STATE_FILE}.tmp"
        tmp.write_text(json.dumps(state, indent=2) + "\n")
        os.replace(tmp, directory / STATE_FILE)


def _keep_best(grid: ResultGrid, keep: int) -> None:
    """Delete each trial's checkpoints but its ``keep`` best by score (``best_checkpoints``' order) and its latest."""
    for result in grid:
        latest = result.checkpoint.path if result.checkpoint is not None else None
        for checkpoint, _ in result.best_checkpoints[keep:]:
            if checkpoint.path != latest:
                shutil.rmtree(checkpoint.path, ignore_errors=True)
