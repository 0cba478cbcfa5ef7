"""Study specs: the fields of a study file (YAML) and of ``tune.run(...)``, validated at the edge.

A study file::

    name: cartpole-ppo-grid            # default: the file's name without .yaml
    run: PPO                           # trainer name, 'pkg.module:TrainerOrFunction'
    config:                            # the trainer's config, with search-space entries anywhere
      env: CartPole-v1
      lr: {grid_search: [0.01, 0.001, 0.0001]}
      model: {fcnet_hiddens: {choice: [[64, 64], [256, 256]]}}
    stop: {episode_reward_mean: 200}   # a trial stops when ANY key reaches its value
    metric: episode_reward_mean        # reported to Optuna at every iteration
    mode: max
    num_samples: 1                     # runs of each grid point (trials, without grid entries)
    search_alg: tpe                    # grid, random, tpe, gp, cmaes; or {type: tpe, n_startup_trials: 5}
    scheduler: none                    # (or pruner:) none, median, asha, hyperband; or {type: asha, ...}

:func:`load_study_file` and :func:`make_spec` return a validated
:class:`StudySpec`; :func:`plan_study` checks what needs more than types (the
search space, the sampler's and pruner's options, the trainer's config) and
returns a :class:`StudyPlan`. Every problem found is collected into one
:class:`~rltune.errors.ConfigError`, each named by its path
(``config.lr.loguniform: needs [low, high] with 0 < low < high``) and, in a
file, its line.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Optional

import yaml
from pydantic import ConfigDict, Field, ValidationError

from rltune._validation import MAX_SEED, MAX_TRIALS, UserInput, name_problem, results_dir_problem, safe_name
from rltune.errors import ConfigError
from rltune.orchestrator import _objectives as objectives
from rltune.orchestrator._constraints import parse_constraints
from rltune.orchestrator._objectives import Metric, Mode
from rltune.orchestrator._pareto_pruning import is_pareto, pareto_options
from rltune.orchestrator._pbt_settings import is_pbt, parse_pbt
from rltune.orchestrator._multi_agent_study import per_policy_key_problems, plain_multiagent
from rltune.orchestrator._resources import ResourcesPerTrial, resolve_resources
from rltune.orchestrator._seed_spec import MAX_SEEDS_PER_TRIAL, FinalEvaluation, parallel_seeds
from rltune.orchestrator._search_space import SearchSpace, gridify, parse_space, representative_configs, without_paths
from rltune.orchestrator._stop import StopCriteria
from rltune.orchestrator._study_combinations import combination_problems
from rltune.orchestrator._trainable_ref import Trainable, resolve_trainable
from rltune.orchestrator._rllib_study import in_rltune_names, tune_field_names
from rltune.orchestrator._yaml_files import deep_merge, line_of, read_mapping

SAMPLERS = {
    "grid": "RandomSampler",  # every point is enqueued; the sampler draws nothing
    "random": "RandomSampler",
    "tpe": "TPESampler",
    "gp": "GPSampler",
    "cmaes": "CmaEsSampler",
    "nsga2": "NSGAIISampler",  # multiobj: the multi-objective genetic samplers
    "nsga3": "NSGAIIISampler",
}
PRUNERS = {
    "none": "NopPruner",
    "median": "MedianPruner",
    "asha": "SuccessiveHalvingPruner",
    "successive_halving": "SuccessiveHalvingPruner",
    "hyperband": "HyperbandPruner",
}
_ALIASES = {"bayesopt": "gp", "bayesian": "gp", "cma": "cmaes", "cma-es": "cmaes", "sha": "successive_halving",
            "successivehalving": "successive_halving", "nop": "none", "fifo": "none",
            "nsgaii": "nsga2", "nsga_ii": "nsga2", "nsgaiii": "nsga3", "nsga_iii": "nsga3"}


class StudySpec(UserInput):
    """Every field of a study; None means not given (the default applies)."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True, allow_inf_nan=False)
    refuse_nul = True

    name: Optional[str] = Field(None, description="Study name: its directory under results_dir and its name in storage.")
    run: Any = Field(..., description="Trainer name (PPO, DQN), Trainer class, function fn(config, reporter), or 'pkg.module:Name'.")
    env: Any = Field(None, description="Shorthand for config.env.")
    config: dict[str, Any] = Field(default_factory=dict, description="The trainable's config, with search-space entries.")
    stop: Optional[dict[str, Any]] = Field(None, description="A trial stops when ANY result key reaches its value.")
    metric: Metric = Field("episode_reward_mean", description="Result key reported to Optuna and optimized; a list of "
                                                           "keys makes a multi-objective study.")
    mode: Mode = Field("max", description="max or min: maximize or minimize the metric (a list: one per metric).")
    num_samples: int = Field(1, ge=1, le=MAX_TRIALS, description="Runs of each grid point; without grid entries, the number of trials.")
    n_trials: Optional[int] = Field(None, ge=1, le=MAX_TRIALS, description="Total trials of the study (default: grid points x num_samples).")
    timeout_s: Optional[float] = Field(None, gt=0, description="No new trial starts after this many seconds.")
    search_alg: Any = Field("tpe", description="grid, random, tpe, gp, cmaes; or {type: NAME, <Optuna sampler options>}.")
    scheduler: Any = Field(None, description="Pruner: none, median, asha, successive_halving, hyperband; or {type: NAME, ...}; "
                                             "or PBT: {type: pbt, perturbation_interval, hyperparam_mutations, ...}.")
    pruner: Any = Field(None, description="Same as scheduler (Optuna's word).")
    n_jobs: int = Field(1, ge=1, description="Trials at once (capped by the CPUs: a trial uses 1 + num_workers).")
    resources_per_trial: Optional[ResourcesPerTrial] = Field(
        None, description="Tune's {cpu: N}: CPUs a trial holds of the budget (a trainer's at least 1 + num_workers).")
    max_concurrent: Optional[int] = Field(None, ge=1, description="Trials at once, ignoring the CPU budget.")
    checkpoint_freq: int = Field(0, ge=0, description="Checkpoint every N iterations (0: only at the end).")
    checkpoint_at_end: bool = Field(True, description="Checkpoint a trial when it stops.")
    keep_checkpoints_num: Optional[int] = Field(None, ge=1, description="Keep only the latest N checkpoints of a trial.")
    max_failures: int = Field(0, ge=0, description="Restart a failed trial from its last checkpoint up to N times.")
    trial_timeout_s: Optional[float] = Field(None, gt=0, description="Kill a trial (FAIL) that runs longer than this.")
    storage: Optional[str] = Field(
        None, description="Optuna storage URL; default a journal file in the study directory. An RDB URL "
                          "(postgresql://...) is shared: every rltune tune on it is a worker of the study. "
                          "${NAME} and ${file:PATH} in it read an environment variable or a file "
                          "(e.g. a password); a password is shown and stored as ***.")
    heartbeat_interval_s: int = Field(30, ge=1, description="How often a worker records its running trials' heartbeat.")
    heartbeat_grace_s: Optional[int] = Field(
        None, ge=1, description="A trial without heartbeat for this long is stale: failed and retried from its "
                                "checkpoint by another worker (default max(4 x heartbeat_interval_s, heartbeat_interval_s x 2 + 60)).")
    results_dir: Optional[str] = Field(None, description="Default $RLTUNE_RESULTS_DIR or ~/rltune_results.")
    tracking_uri: Optional[str] = Field(
        None, description="MLflow tracking URI; default: a local store under the results dir (or MLFLOW_TRACKING_URI); "
                          "${NAME} and ${file:PATH} are read as in storage."
    )
    tracking: bool = Field(True, description="Record the study in MLflow (env RLTUNE_TRACKING=0 turns it off too).")
    tensorboard: bool = Field(False, description="Also write each trial's results as TensorBoard event files in its "
                                                 "directory (tensorboard --logdir RESULTS_DIR).")
    curriculum: Optional[dict[str, Any]] = Field(None, description="Shorthand for config.curriculum (phases).")
    seed: Optional[int] = Field(None, ge=0, le=MAX_SEED - MAX_TRIALS,
                                description="Base seed: the sampler's, and trial n gets seed + n (default 0).")
    # multiobj: constraints on result keys (metric/mode lists above make a multi-objective study)
    constraints: Optional[list[str]] = Field(
        None, description="Feasibility of a trial from its last result: ['info/learner/default_policy/kl <= 0.05', "
                          "...]; feasible trials are preferred for the best (docs/multi-objective.md).")
    # seeds (issue 27): a configuration judged on several seeds, docs/seeds.md
    seeds_per_trial: int = Field(1, ge=1, le=MAX_SEEDS_PER_TRIAL, description="Runs of each configuration, each with its own config.seed.")
    seed_mode: Literal["parallel", "race"] = Field("parallel", description="parallel: the seeds at once (CPUs x seeds); race: one after another.")
    aggregate: Literal["mean", "median", "iqm", "min"] = Field("mean", description="The metric across seeds (min: the worst seed).")
    final_evaluation: Optional[FinalEvaluation] = Field(None, description="{top_k, seeds}: the top-k configurations retrained on fresh seeds.")



FIELDS = list(StudySpec.model_fields)


@dataclass
class StudyPlan:
    """A validated study: the spec, its trainable, search space, sampler and pruner (built lazily)."""

    spec: StudySpec
    trainable: Trainable
    config: dict[str, Any]
    space: SearchSpace
    stop: StopCriteria
    sampler_name: str
    sampler_options: dict[str, Any]
    pruner_name: str
    pruner_options: dict[str, Any]
    name_given: bool = True  # False: a default name (trainable_timestamp) that may take a suffix if taken
    scheduler: Any = None  # pbt: PBTSettings when scheduler is {type: pbt, ...} (the pruner is then none)

    @property
    def name(self) -> str:
        return self.spec.name or "study"

    @property
    def total_trials(self) -> int:
        if self.spec.n_trials is not None:
            return self.spec.n_trials
        return max(1, len(self.space.grid_points())) * self.spec.num_samples

    @property
    def direction(self) -> str:
        return self.directions[0]

    @property
    def directions(self) -> list[str]:
        """Optuna's direction per objective (one for a single metric)."""
        return objectives.directions_of(self.spec.metric, self.spec.mode)

    @property
    def multi_objective(self) -> bool:
        """Whether the study optimizes several metrics (``metric: [a, b]``)."""
        return not isinstance(self.spec.metric, str)

    @property
    def constraints(self) -> list[Any]:
        """The study's constraints, parsed (:class:`~._constraints.Constraint`)."""
        return parse_constraints(self.spec.constraints or [])[0]

    def make_sampler(self, seed_offset: int = 0) -> Any:
        """The Optuna sampler; its seed is the spec's ``seed`` (if any) plus ``seed_offset``.

        A resumed study passes the number of trials it already has, so that
        its random draws do not repeat those of the first session.
        """
        import optuna

        if self.sampler_name == "custom":
            return self.sampler_options["instance"]
        options = dict(self.sampler_options)
        cls = getattr(optuna.samplers, SAMPLERS[self.sampler_name])
        if "seed" in _parameters(cls):
            seed = options.get("seed", self.spec.seed)
            options["seed"] = None if seed is None else seed + seed_offset
        return cls(**options)

    def make_pruner(self) -> Any:
        import optuna

        if self.pruner_name == "custom":
            return self.pruner_options["instance"]
        if self.pruner_name == "pareto":  # multiobj: rltune's own rule (._pareto_pruning), not an Optuna pruner
            return optuna.pruners.NopPruner()
        return getattr(optuna.pruners, PRUNERS[self.pruner_name])(**self.pruner_options)

    def cpus_per_trial(self, config: dict[str, Any]) -> int:
        """CPUs a trial counts for: ``num_cpus_for_driver + num_workers x num_cpus_per_worker`` (default 1 each),
        rounded up, or ``resources_per_trial``'s CPUs when that asks for more."""
        asked = self.spec.resources_per_trial
        asked = resolve_resources(asked, config, estimate=config is self.config) if asked is not None else None
        if self.trainable.kind != "trainer":
            return (max(1, asked.cpus()) if asked is not None else 1) * parallel_seeds(self.spec)

        def number(key: str, default: float) -> float:
            value = config.get(key, default)
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0
            return float(value) if ok else default

        workers = int(number("num_workers", 0))
        cpus = number("num_cpus_for_driver", 1) + workers * number("num_cpus_per_worker", 1)
        own = max(1, math.ceil(cpus - 1e-9))
        return (max(own, asked.cpus()) if asked is not None else own) * parallel_seeds(self.spec)


# -- loading ------------------------------------------------------------------------------------
def load_study_file(
    path: str | os.PathLike[str],
    overrides: dict[str, Any] | None = None,
    *,
    config_overrides: dict[str, Any] | None = None,
) -> StudyPlan:
    """Read, validate and plan a study file; ``overrides`` (from flags) replace its fields.

    ``config_overrides`` is merged into the file's config (nested dicts key by key).

    Raises one :class:`ConfigError` naming the file and every problem (with its line).
    """
    where = f"study file {str(path)!r}"
    data, root = read_mapping(path, kind="study file", fields=FIELDS, required="'run' and 'config'")
    data.setdefault("name", safe_name(Path(path).stem))
    data.update({k: v for k, v in (overrides or {}).items() if v is not None})
    if config_overrides:
        data["config"] = deep_merge(data.get("config") if isinstance(data.get("config"), dict) else {}, config_overrides)
    return make_plan(data, where=where, root=root)


def make_plan(fields: dict[str, Any], *, where: str = "tune.run", root: yaml.Node | None = None) -> StudyPlan:
    """Validate the fields of a study (from a file or ``tune.run``) and plan it; one ConfigError with every problem."""
    def at(path: tuple[Any, ...], message: str) -> str:
        line = line_of(root, path) if root is not None else None
        return f"line {line}: {message}" if line else message

    fields, problems = tune_field_names(fields)
    try:
        spec = StudySpec.model_validate(fields)
    except ValidationError as exc:
        problems += [_describe_field_error(root, err) for err in exc.errors()]
        if isinstance(fields.get("config"), dict):  # the search space's problems too, all at once
            problems.extend(at(("config", *_path_of(p)), p) for p in parse_space(plain_multiagent(fields["config"]))[1])
        raise ConfigError(_by_line(problems), where=where) from None

    config = _with_shorthands(spec, problems, at)

    trainable = None
    try:
        trainable = resolve_trainable(spec.run)
    except ConfigError as exc:
        problems.extend(at(("run",), f"run: {p}") for p in exc.problems)

    pbt, config, pbt_problems = parse_pbt(spec.scheduler, config, trainable)  # pbt: missing mutation keys become entries
    problems.extend(at(("scheduler",), p) for p in pbt_problems)
    if trainable is not None and trainable.kind == "trainer":
        config = plain_multiagent(config)  # a PolicySpec's config is searched like the rest
    space, space_problems = parse_space(config)
    problems.extend(at(("config", *_path_of(p)), p) for p in space_problems)
    user_space, space, plan_config = in_rltune_names(trainable, config, space, bool(space_problems))

    space, (sampler_name, sampler_options), (pruner_name, pruner_options) = _sampler_and_pruner(
        spec, space, bool(space_problems), problems, at)

    stop = StopCriteria(None)
    try:
        stop = StopCriteria(spec.stop, where="stop")
    except ConfigError as exc:
        problems.extend(at(("stop",), f"stop.{p}") for p in exc.problems)

    if not spec.metric:
        problems.append(at(("metric",), "metric: must be a result key such as episode_reward_mean"))
    spec, more = objectives.checked(spec, sampler_name, pruner_name)  # multiobj: metric/mode lists, constraints
    more += combination_problems(spec, pbt is not None)  # fields that do not work together
    problems.extend(at((p.split(":")[0].split(".")[0],), p) for p in more)
    if spec.name is not None and name_problem(spec.name):
        problems.append(at(("name",), f"name: {name_problem(spec.name)}"))
    if results_dir_problem(spec.results_dir):
        problems.append(at(("results_dir",), f"results_dir: {results_dir_problem(spec.results_dir)}"))
    grid_points = math.prod(len(p.values) for p in space.grid)
    if grid_points > MAX_TRIALS:
        problems.append(at(("config",), f"config: the grid entries make {grid_points:,} grid points, more than "
                                        f"{MAX_TRIALS:,}; use fewer values, or choice entries with n_trials"))
    elif spec.n_trials is None and grid_points * spec.num_samples > MAX_TRIALS:
        problems.append(at(("num_samples",), f"num_samples: {grid_points:,} grid points x {spec.num_samples:,} samples "
                                             f"make more than {MAX_TRIALS:,} trials; set n_trials or use fewer"))

    if trainable is not None and trainable.kind == "trainer":
        if config.get("env") is None:
            problems.append(at(("config",), f"config.env: {trainable.name} needs an env (e.g. env: CartPole-v1)"))
        else:  # the rest of the config, without the entries already reported
            checked = without_paths(config, user_space.invalid)
            for p in _validate_trainer_configs(trainable, checked, user_space):
                problems.append(at(("config", *_path_of(p)), p))
        problems.extend(at(("metric",), p) for p in per_policy_key_problems("metric", objectives.as_list(spec.metric), config))
        problems.extend(at(("stop",), p) for p in per_policy_key_problems("stop", stop.criteria, config))
    if problems:
        raise ConfigError(_by_line(problems), where=where)
    name_given = spec.name is not None
    if not name_given:
        from datetime import datetime

        spec = spec.model_copy(update={"name": f"{trainable.name}_{datetime.now():%Y-%m-%d_%H-%M-%S}"})
    return StudyPlan(spec, trainable, plan_config, space, stop, sampler_name, sampler_options, pruner_name, pruner_options,
                     name_given, pbt)


def _with_shorthands(spec: StudySpec, problems: list[str], at: Any) -> dict[str, Any]:
    """The study's config with its ``env`` and ``curriculum`` fields in it (each given once)."""
    config = dict(spec.config)
    if spec.env is not None:
        if config.get("env") is not None and config["env"] != spec.env:
            problems.append(at(("env",), f"env is {spec.env!r} but config.env is {config['env']!r}; give the env once"))
        config["env"] = spec.env
    if spec.curriculum is not None:
        if config.get("curriculum") is not None:
            problems.append(at(("curriculum",), "curriculum is given both as a field and in config; give it once"))
        config["curriculum"] = spec.curriculum
    return config


def _sampler_and_pruner(spec: StudySpec, space: Any, space_invalid: bool, problems: list[str],
                        at: Any) -> tuple[Any, tuple[str, dict[str, Any]], tuple[str, dict[str, Any]]]:
    """The study's sampler and pruner (names and options), and its space made a grid for the grid sampler.

    Problems are appended to ``problems``, each placed by ``at(path, message)``.
    """
    sampler_name, sampler_options = "tpe", {}
    try:
        sampler_name, sampler_options = _choose("search_alg", spec.search_alg, SAMPLERS, "optuna.samplers", "BaseSampler")
    except ConfigError as exc:
        problems.extend(at(("search_alg",), p) for p in exc.problems)
    if sampler_name == "grid" and not space_invalid:
        space, grid_problems = gridify(space)
        problems.extend(at(("config", *_path_of(p)), p) for p in grid_problems)

    pruner_name, pruner_options = "none", {}
    if spec.scheduler is not None and spec.pruner is not None:
        problems.append(at(("pruner",), "scheduler and pruner are the same field; give one"))
    pruner_field = "pruner" if spec.pruner is not None else "scheduler"
    pruner_value = spec.pruner if spec.pruner is not None else spec.scheduler
    pruner_value = None if is_pbt(pruner_value) else pruner_value  # pbt: a scheduler beside no pruner
    if pruner_value is not None and is_pareto(pruner_value):  # multiobj: a multi-objective study's own rule
        pruner_name, pruner_options, pareto_problems = pareto_options(pruner_value)
        problems.extend(at((pruner_field,), f"{pruner_field}.{p}") for p in pareto_problems)
    elif pruner_value is not None:
        try:
            pruner_name, pruner_options = _choose(pruner_field, pruner_value, PRUNERS, "optuna.pruners", "BasePruner")
        except ConfigError as exc:
            problems.extend(at((pruner_field,), p) for p in exc.problems)
    return space, (sampler_name, sampler_options), (pruner_name, pruner_options)


def _by_line(problems: list[str]) -> list[str]:
    """Problems in file order (those without a line first), each once."""
    def line(text: str) -> int:
        head = text.split(":", 1)[0]
        return int(head[5:]) if head.startswith("line ") and head[5:].isdigit() else 0

    unique = list(dict.fromkeys(problems))
    return sorted(unique, key=line)


def _path_of(problem: str) -> tuple[str, ...]:
    """The config key path at the start of a search-space problem ('config.lr.loguniform: ...' -> ('lr',))."""
    head = problem.split(":", 1)[0]
    parts = head.split(".")
    return tuple(parts[1:])


def _describe_field_error(root: yaml.Node | None, err: dict[str, Any]) -> str:
    loc = err["loc"]
    path = ".".join(str(p) for p in loc)
    line = line_of(root, loc) if root is not None else None
    at = f"line {line}: " if line else ""
    if err["type"] == "extra_forbidden":
        valid = list({"resources_per_trial": ResourcesPerTrial, "final_evaluation": FinalEvaluation}.get(loc[0], StudySpec).model_fields)
        close = difflib.get_close_matches(str(loc[-1]), valid, n=1, cutoff=0.6)
        hint = f"did you mean {close[0]!r}?" if close else f"the fields are {', '.join(valid)}"
        return f"{at}{path}: unknown field; {hint}"
    if err["type"] == "missing":
        return f"{at}{path}: required (a trainer name such as PPO, 'pkg.module:Name', or a function)"
    if err["type"] == "value_error":  # our validators' messages say what they got
        return f"{at}{path}: {err['ctx']['error']}"
    shown = repr(err.get("input"))
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return f"{at}{path}: {err['msg']} (got {shown})"


# -- the trainable ------------------------------------------------------------------------------
def _validate_trainer_configs(trainable: Trainable, config: dict[str, Any], space: SearchSpace) -> list[str]:
    """Validate the trainer config with the search space's extreme values (unknown keys, bad values)."""
    from rltune.trainers import get_trainer_class

    cls = get_trainer_class(trainable.ref)
    problems: list[str] = []
    for param, candidate in representative_configs(config, space):
        try:
            cls.validate(candidate)
        except ConfigError as exc:
            for p in exc.problems:
                if f"config.{p}" in problems:
                    continue  # a problem of the whole config, already reported
                text = f"config.{p}" + (f" (when {param} = {_value_at(candidate, param)!r})" if param else "")
                if text not in problems:
                    problems.append(text)
    return problems


def _value_at(config: dict[str, Any], name: str) -> Any:
    node: Any = config
    for key in name.split("."):
        node = node.get(key) if isinstance(node, dict) else None
    return node


# -- sampler and pruner -------------------------------------------------------------------------
def _choose(field: str, value: Any, table: dict[str, str], module: str, base: str) -> tuple[str, dict[str, Any]]:
    """(name, options) for ``tpe`` / ``{type: tpe, ...}`` / ``{tpe: {...}}`` / an Optuna instance."""
    optuna_module = importlib.import_module(module) if not isinstance(value, (str, dict)) else None
    if optuna_module is not None and isinstance(value, getattr(optuna_module, base)):
        return "custom", {"instance": value}
    if isinstance(value, str):
        name, options = value, {}
    elif isinstance(value, dict) and ("type" in value or "name" in value):
        key = "type" if "type" in value else "name"
        name, options = value[key], {k: v for k, v in value.items() if k != key}
    elif isinstance(value, dict) and len(value) == 1 and isinstance(next(iter(value.values())), (dict, type(None))):
        (name, options), = value.items()
        options = options or {}
    else:
        raise ConfigError(
            f"{field}: must be one of {', '.join(table)}, or {{type: NAME, <options>}}, but got {value!r}"
        )
    if name is None:
        name = "none"
    key = str(name).lower().replace("-", "_")
    key = _ALIASES.get(key, key)
    if key not in table:
        close = difflib.get_close_matches(key, list(table), n=1, cutoff=0.5)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise ConfigError(f"{field}: unknown {field} {name!r}; {hint}(one of {', '.join(table)})")
    cls = getattr(importlib.import_module(module), table[key])
    allowed = _parameters(cls)
    problems = []
    for option, value in options.items():
        if isinstance(value, float) and not math.isfinite(value):
            problems.append(f"{field}.{option}: must be a finite number, but got {value!r}")
    for option in options:
        if option not in allowed:
            close = difflib.get_close_matches(option, list(allowed), n=1, cutoff=0.5)
            hint = f"did you mean {close[0]!r}?" if close else f"options: {', '.join(allowed) or 'none'}"
            problems.append(f"{field}.{option}: not an option of {key} (Optuna's {table[key]}); {hint}")
    if not problems:
        try:
            cls(**options)
        except ImportError as exc:
            problems.append(f"{field}: {key} needs a package that is not installed ({exc})")
        except (TypeError, ValueError) as exc:
            problems.append(f"{field}: invalid options for {key} (Optuna's {table[key]}): {exc}")
    if key == "grid" and options:
        problems.append(f"{field}: grid takes no options, but got {', '.join(options)}")
    if problems:
        raise ConfigError(problems)
    return key, dict(options)


def _parameters(cls: type) -> list[str]:
    return [n for n, p in inspect.signature(cls).parameters.items() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
