"""Typed trainer configs: defaults, one documented field per key, validation at the edge.

Each trainer has a pydantic model (:class:`TrainerSettings` and a subclass per
algorithm). User dicts are validated once, in :func:`validate_config`, which
collects every problem and names it by its path (``model.fcnet_hiddens``) and,
for an unknown key, the closest valid one. The core then trusts the model.
"""

from __future__ import annotations

import difflib
from typing import Any, Literal, Optional, Union

import numpy as np

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_serializer, field_validator

from rltune._validation import MAX_SEED, UserInput, error_text
from rltune.env._vector import is_vector_env
from rltune.errors import UNKNOWN_KEY, ConfigError, Problem
from rltune.trainers.rllib._rllib_names import rllib_key_problem
from rltune.trainers.policies._filters import filter_name_problem


class _Strict(UserInput):
    """Base of every config model: unknown keys are errors, aliases (``lambda``) accepted.

    Numbers must be finite (``lr: .inf`` and ``Infinity`` in JSON are
    refused) and a bool is not a number (``train_batch_size: true`` would be 1).
    """

    model_config = ConfigDict(extra="forbid", populate_by_name=True, arbitrary_types_allowed=True, allow_inf_nan=False)



class ModelConfig(_Strict):
    """The built-in fully connected models (RLlib's ``model`` block)."""

    fcnet_hiddens: list[int] = Field([256, 256], description="Sizes of the hidden layers of the MLP.")
    fcnet_activation: Literal["tanh", "relu", "elu", "swish", "linear"] = Field(
        "tanh", description="Activation between hidden layers."
    )
    vf_share_layers: bool = Field(
        False, description="Actor-critic models: share the hidden layers between policy and value heads."
    )
    max_seq_len: int = Field(
        20, ge=1, description="Recurrent models: the longest sequence a training batch holds (episodes are cut into sequences of at most this many steps)."
    )

    @field_validator("fcnet_hiddens")
    @classmethod
    def _positive_sizes(cls, sizes: list[int]) -> list[int]:
        if any(s <= 0 for s in sizes):
            raise ValueError(f"layer sizes must be positive, but got {sizes}")
        return sizes


class MultiAgentConfig(_Strict):
    """RLlib's ``multiagent`` block (see ``_policy_spec.py``); empty for single-agent envs."""

    policies: dict[str, Any] = Field(
        default_factory=dict,
        description="Policy ids to PolicySpec(policy_class, observation_space, action_space, config) "
        "(or RLlib's 4-tuples, dicts, None), or a set of ids; empty for a single-agent env.",
    )
    policy_mapping_fn: Optional[Any] = Field(
        None, description="fn(agent_id, episode, worker, **kwargs) -> policy id, called when an agent first appears in an episode."
    )
    policies_to_train: Optional[Any] = Field(
        None, description="Policy ids updated by their learners (a list, or fn(policy_id, batch) -> bool); all if unset."
    )
    observation_fn: Optional[Any] = Field(
        None, description="fn(agent_obs, worker, base_env, policies, episode, **kwargs) -> agent_obs: rewrites the "
        "observations of each env step's agents (a dict by agent id) before their policies see them (RLlib's)."
    )

    @field_validator("policies", mode="before")
    @classmethod
    def _specs(cls, value: Any) -> dict[str, Any]:
        from rltune.trainers.policies._policy_spec import parse_policies

        return parse_policies(value)

    @field_validator("policy_mapping_fn", "observation_fn", mode="before")
    @classmethod
    def _function(cls, value: Any, info: ValidationInfo) -> Any:
        # The kind only (importing an import string waits for the trainer): a wrong one fails at the call that gave it.
        if value is None or callable(value) or (isinstance(value, str) and value.strip(":.") and (":" in value or "." in value)):
            return value
        signature = "(agent_id, episode, worker, **kwargs) -> policy id" if info.field_name == "policy_mapping_fn" \
            else "(agent_obs, worker, base_env, policies, episode, **kwargs) -> agent_obs"
        raise ValueError(f"must be a function fn{signature}, or its import string 'pkg.module:fn'")

    @field_validator("policies_to_train", mode="before")
    @classmethod
    def _to_train(cls, value: Any) -> Any:
        if value is None or callable(value) or (isinstance(value, str) and ":" in value):
            return value
        if isinstance(value, (list, tuple, set)) and all(isinstance(v, str) for v in value):
            return list(value)
        raise ValueError(f"must be a list of policy ids or a function (policy_id, batch) -> bool, but got {value!r:.100}")

    @field_serializer("policies")
    def _specs_as_json(self, policies: dict[str, Any]) -> dict[str, Any]:
        return {pid: spec.to_json() for pid, spec in policies.items()}


class TrainerSettings(_Strict):
    """Keys shared by every trainer (RLlib's classic names).

    A policy's ``config`` is one of these; it reads like RLlib's config dict too:
    ``policy.config["gamma"]``, ``policy.config.get("lambda")``, ``"lr" in policy.config``.
    """

    def __getitem__(self, key: str) -> Any:
        config = self.model_dump(by_alias=True)
        if key not in config:
            close = difflib.get_close_matches(str(key), list(config), n=1, cutoff=0.6)
            raise KeyError(f"{type(self).__name__} has no key {key!r}" + (f"; did you mean {close[0]!r}?" if close else ""))
        return config[key]

    def get(self, key: str, default: Any = None) -> Any:
        """The value of a config key (RLlib's name, e.g. ``"lambda"``), or ``default``."""
        return self.model_dump(by_alias=True).get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self.model_dump(by_alias=True)

    env: Any = Field(None, description="Gymnasium id, env class, register_env name, 'pkg.module:Name' or a gymnasium VectorEnv.")
    env_config: dict[str, Any] = Field(default_factory=dict, description="Passed to the env creator as an EnvContext.")
    observation_space: Any = Field(None, description="Observation space; read from a rollout worker's env if unset.")
    action_space: Any = Field(None, description="Action space; read from a rollout worker's env if unset.")
    disable_env_checking: bool = Field(False, description="Skip gymnasium's env checker on the first env built.")
    auto_wrap_old_gym_envs: bool = Field(
        True, description="Run an env on the old gym API (reset() -> obs, a 4-tuple step) through rltune.env.OldGymApi, "
        "with a warning; false: refuse it (an EnvError that says how to update it).")
    framework: Literal["torch"] = Field(
        "torch", description="RLlib's framework key; rltune runs on PyTorch ('tf', 'tf2' configs run on it too, with a warning)."
    )
    observation_filter: str = Field(
        "NoFilter",
        description="NoFilter (observations as the env returns them), MeanStdFilter (each policy's observations "
        "normalised by their running mean and std, synced across workers, saved in checkpoints) or "
        "ConcurrentMeanStdFilter (the same here).",
    )
    num_workers: int = Field(0, ge=0, description="Rollout worker processes; 0 samples in the trainer's own process.")
    num_envs_per_worker: int = Field(1, ge=1, description="Envs stepped as one vector (one batched forward per step).")
    rollout_fragment_length: int = Field(200, ge=1, description="Steps per env in one sample() call of a worker.")
    batch_mode: Literal["truncate_episodes", "complete_episodes"] = Field(
        "truncate_episodes",
        description="truncate_episodes: a worker's sample is rollout_fragment_length steps of each env, cutting episodes; "
        "complete_episodes: whole episodes only, at least that many steps (a running episode's steps wait for its end).",
    )
    num_cpus_per_worker: float = Field(
        1, ge=0, description="CPUs a rollout worker process counts for in a study's CPU budget (trials at once)."
    )
    num_cpus_for_driver: float = Field(
        1, ge=0, description="CPUs the trainer process counts for in a study's CPU budget (trials at once)."
    )
    train_batch_size: int = Field(4000, ge=1, description="Samples per training iteration.")
    gamma: float = Field(0.99, ge=0.0, le=1.0, description="Discount factor.")
    lr: float = Field(5e-5, gt=0.0, description="Learning rate (start value when lr_schedule is set).")
    lr_schedule: Optional[list[tuple[int, float]]] = Field(
        None, description="Piecewise-linear [[timestep, lr], ...]; overrides lr."
    )
    grad_clip: Optional[float] = Field(None, gt=0.0, description="Max global gradient norm; None for no clipping.")
    model: ModelConfig = Field(default_factory=ModelConfig, description="The built-in model.")
    seed: Optional[int] = Field(None, ge=0, le=MAX_SEED, description="Seed for torch, numpy and the envs (>= 0); None for random.")
    callbacks: Any = Field(None, description="DefaultCallbacks subclass, import string, or list of either.")
    env_task_fn: Any = Field(
        None, description="fn(result, env, env_context) -> task, run per env after every iteration (TaskSettableEnv)."
    )
    curriculum: Optional[dict[str, Any]] = Field(
        None, description="Phases for CurriculumCallback: {metric, phases: [{task, threshold, min_iterations, patience, demote_below}]}."
    )
    multiagent: MultiAgentConfig = Field(default_factory=MultiAgentConfig, description="Multi-agent settings.")
    num_gpus: float = Field(0, ge=0, description="GPUs for the learner; > 0 needs CUDA.")
    explore: bool = Field(True, description="Sample with exploration when collecting training data.")
    clip_actions: bool = Field(True, description="Clip continuous actions to the action space bounds before env.step.")
    restart_failed_sub_environments: bool = Field(
        False, description="Rebuild an env whose step or reset raises (same EnvContext) and go on sampling."
    )
    nan_policy: Literal["raise", "drop_episode"] = Field(
        "raise",
        description="A NaN or infinite reward or observation from an env: 'raise' an EnvError naming the env, worker, "
        "agent and step; 'drop_episode' end and drop that episode (none of its steps is trained on), reset the env "
        "and count it (num_dropped_episodes_nonfinite in results).",
    )
    recreate_failed_workers: bool = Field(False, description="Restart a rollout worker process that died.")
    max_num_worker_restarts: int = Field(100, ge=0, description="Restarts allowed per worker before giving up.")
    sample_timeout_s: float = Field(
        60.0,
        gt=0.0,
        description="Seconds a rollout worker process has to answer each call (a sample() of "
        "rollout_fragment_length steps of each of its envs, a weights and filters sync, foreach_env, stop; its start: "
        "at least 300): one that does not is killed and, with recreate_failed_workers, replaced, else a WorkerError "
        "names it. It bounds remote workers only: with num_workers: 0, and in evaluation, envs step in the trainer's "
        "own process, where a hung step cannot be interrupted safely.",
    )
    metrics_num_episodes_for_smoothing: int = Field(
        100, ge=1, description="Episodes averaged into episode_reward_mean and the other episode stats."
    )
    evaluation_interval: Optional[int] = Field(
        None,
        ge=1,
        description="Run evaluate() on the first and every this-many-th training iteration and put its stats "
        "under the results' 'evaluation' key (every result carries the latest); None for no evaluation during training.",
    )
    evaluation_duration: int = Field(10, ge=1, description="Episodes run by evaluate().")
    evaluation_config: dict[str, Any] = Field(
        default_factory=dict, description="Overrides for the evaluation env (e.g. env_config)."
    )
    log_level: Literal["DEBUG", "INFO", "WARN", "WARNING", "ERROR"] = Field(
        "WARN", description="Log level in the trainer and every rollout worker."
    )
    torch_compile_learner: Union[bool, Literal["auto"]] = Field(
        "auto",
        description="Run each learner step (loss, gradients, clipping, Adam) as one torch.compile'd function: "
        "much faster steps after a compile of a few seconds on the first one (longer with a cold inductor cache). "
        "'auto': eager, compiled once the run has taken 500 SGD steps when this step was compiled before in "
        "inductor's cache, 20000 otherwise; never without a C++ compiler for inductor ($CXX or g++ on PATH).",
    )
    torch_compile_learner_dynamo_backend: str = Field(
        "inductor", description="torch.compile backend that compiles the learner step's traced graph ('inductor' needs a C++ compiler)."
    )
    torch_compile_learner_dynamo_mode: Optional[str] = Field(
        None, description="Inductor mode of the learner step's compile (None, 'max-autotune', ...: the modes of torch.compile)."
    )
    torch_num_threads: Optional[int] = Field(
        1, ge=1, description="torch intra-op (and numpy BLAS) threads in each process; 1 is fastest for small models, None leaves the defaults."
    )

    @field_validator("env", mode="before")
    @classmethod
    def _env_kind(cls, value: Any) -> Any:
        if value is None or isinstance(value, str) or callable(value) or is_vector_env(value):
            return value  # which env it names is checked when it is built
        raise ValueError("must be a gymnasium id, a registered name, an env class, a creator function, an import "
                         f"string 'pkg.module:Name' or a gymnasium VectorEnv")

    @field_validator("env_task_fn", mode="before")
    @classmethod
    def _task_fn_kind(cls, value: Any) -> Any:
        if value is None or callable(value) or (isinstance(value, str) and ":" in value.strip(":")):
            return value
        raise ValueError("must be a function fn(result, env, env_context) -> task, or its import string 'pkg.module:fn'")

    @field_validator("observation_space", "action_space", mode="before")
    @classmethod
    def _a_space(cls, value: Any) -> Any:
        import gymnasium as gym

        if value is None or isinstance(value, gym.Space):
            return value
        raise ValueError("must be a gymnasium space (or None: read from the env)")

    @field_validator("observation_filter", mode="before")
    @classmethod
    def _known_filter(cls, name: Any) -> str:
        problem = filter_name_problem(name)
        if problem:
            raise ValueError(problem)
        return name

    @field_validator("torch_compile_learner", mode="before")
    @classmethod
    def _bool_or_auto(cls, value: Any) -> Any:
        if isinstance(value, bool) or value == "auto":
            return value
        raise ValueError("must be true, false or 'auto'")

    @field_validator("lr_schedule")
    @classmethod
    def _sorted_schedule(cls, points: Optional[list[tuple[int, float]]]) -> Optional[list[tuple[int, float]]]:
        return _check_schedule(points)


def _check_schedule(points: Optional[list[tuple[int, float]]]) -> Optional[list[tuple[int, float]]]:
    if points is None:
        return None
    if not points:
        raise ValueError("needs at least one [timestep, value] point")
    steps = [p[0] for p in points]
    if steps != sorted(steps):
        raise ValueError(f"timesteps must be increasing, but got {steps}")
    return points


def validate_config(config_cls: type[_Strict], config: dict[str, Any] | None, *, where: str = "config") -> Any:
    """Validate a user dict against ``config_cls``; raise one :class:`ConfigError` listing every problem."""
    if config is None:
        config = {}
    if not isinstance(config, dict):
        raise ConfigError(f"must be a mapping of keys to values, but got {type(config).__name__}", where=where)
    try:
        return config_cls.model_validate(config)
    except ValidationError as exc:
        raise ConfigError([_describe_error(config_cls, err) for err in exc.errors()], where=where) from None


def _describe_error(config_cls: type[_Strict], err: dict[str, Any]) -> Problem:
    loc = tuple(str(p) for p in err["loc"])
    if err["type"] == "extra_forbidden":
        rllib = rllib_key_problem(config_cls, loc)
        if rllib:
            return rllib
        valid = _valid_keys(config_cls, err["loc"][:-1])
        close = difflib.get_close_matches(str(err["loc"][-1]), valid, n=1, cutoff=0.5)
        return Problem(loc, UNKNOWN_KEY, f"did you mean {close[0]!r}?" if close else "", kind=UNKNOWN_KEY)
    value = err.get("input")
    shown = repr(value)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return Problem(loc, f"{error_text(err)} (got {shown})")


def _valid_keys(config_cls: type[_Strict], loc: tuple[Any, ...]) -> list[str]:
    model: Any = config_cls
    for part in loc:
        field = model.model_fields.get(part) or next(
            (f for f in model.model_fields.values() if f.alias == part), None
        )
        if field is None or not (isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel)):
            return []
        model = field.annotation
    return [f.alias or name for name, f in model.model_fields.items()]


def default_config(config_cls: type[_Strict]) -> dict[str, Any]:
    """The full default config of ``config_cls`` as a plain dict with RLlib's key names."""
    return config_cls().model_dump(by_alias=True)


def describe_config(config_cls: type[_Strict], indent: str = "") -> list[str]:
    """Lines of ``key: default  # description`` for every key, nested blocks indented."""
    lines: list[str] = []
    defaults = config_cls()
    for name, field in config_cls.model_fields.items():
        key = field.alias or name
        value = getattr(defaults, name)
        if isinstance(value, BaseModel):
            lines.append(f"{indent}{key}:  # {field.description}")
            lines.extend(describe_config(type(value), indent + "  "))
        else:
            lines.append(f"{indent}{key}: {value!r}  # {field.description}")
    return lines


def schedule_value(points: Optional[list[tuple[int, float]]], default: float, timestep: int) -> float:
    """Piecewise-linear value of a ``[[timestep, value], ...]`` schedule (flat outside its ends)."""
    if not points:
        return default
    steps = [p[0] for p in points]
    values = [p[1] for p in points]
    return float(np.interp(timestep, steps, values))
