"""Train files (``rltune train -f FILE.yaml``): one trial's fields in YAML, validated with file and line.

A train file holds the fields of ``rltune train``'s flags::

    name: cartpole-ppo          # optional: the trial directory's name
    run: PPO
    env: CartPole-v1            # or config.env
    stop: {episode_reward_mean: 475, timesteps_total: 200000}
    checkpoint_freq: 10
    checkpoint_at_end: true     # the default (false: only checkpoint_freq's)
    results_dir: ~/rltune_results
    tensorboard: false          # optional: no TensorBoard event files (default: written)
    config: {lr: 0.0003, ...}
    curriculum: {phases: [{task: 2, threshold: 0.9}, {task: 8}]}   # optional
    schedule: [{at_iteration: 0, config: {lr: 0.001}}, {at_iteration: 8, config: {lr: 0.0005}}]  # optional

RLlib's tuned-example layout, the same fields under one top-level key that
becomes the name (``cartpole-ppo: {run: PPO, ...}``), is read too, with Tune's
``local_dir`` / ``storage_path`` for ``results_dir``. A file whose config has
search-space entries, or ``num_samples`` > 1, is a study: ``rltune train``
says to run it with ``rltune tune``.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, Optional

import yaml
from pydantic import Field, ValidationError, field_validator

from rltune._validation import UserInput, name_problem, results_dir_problem
from rltune.errors import ConfigError
from rltune.orchestrator._replay import ScheduleSegment
from rltune.orchestrator._yaml_files import line_of, read_mapping


class TrainSpec(UserInput):
    """The fields of one ``rltune train`` trial, from flags and/or a train file; None means not given."""

    refuse_nul = True

    name: Optional[str] = Field(None, description="Trial directory name; default RUN_ENV_timestamp.")
    run: Optional[str] = Field(None, description="Algorithm name (PPO, DQN) or 'pkg.module:TrainerClass'.")
    env: Optional[str] = Field(None, description="Gymnasium id, register_env name or 'pkg.module:Name'.")
    config: Optional[dict[str, Any]] = Field(None, description="The trainer's config (see --show-config).")
    stop: Optional[dict[str, float]] = Field(None, description="Stop when any result key reaches its value.")
    checkpoint_freq: Optional[int] = Field(None, ge=0, description="Save a checkpoint every N iterations (0: never).")
    checkpoint_at_end: Optional[bool] = Field(
        None, description="Save a checkpoint when the trial ends (default: yes, as in study files)."
    )
    results_dir: Optional[str] = Field(None, description="Where trial directories go.")
    tensorboard: Optional[bool] = Field(None, description="Also write TensorBoard event files (default: yes).")
    curriculum: Optional[dict[str, Any]] = Field(
        None, description="Curriculum phases (goes to config['curriculum']; see rltune.callbacks.CurriculumCallback)."
    )
    num_samples: Optional[int] = Field(
        None, ge=1, description="Tune's runs of the experiment: 1 here (more make a study: rltune tune FILE)."
    )
    schedule: Optional[list[ScheduleSegment]] = Field(
        None, description="Config changes replayed during the run (a PBT study's best_config.yaml writes its best "
                          "member's); see rltune.orchestrator._replay."
    )


    @field_validator("name")
    @classmethod
    def _safe_name(cls, name: Optional[str]) -> Optional[str]:
        problem = name_problem(name) if name is not None else None
        if problem:
            raise ValueError(problem)
        return name

    @field_validator("results_dir")
    @classmethod
    def _a_directory(cls, path: Optional[str]) -> Optional[str]:
        problem = results_dir_problem(path)
        if problem:
            raise ValueError(problem)
        return path


FIELDS = list(TrainSpec.model_fields)


def load_train_file(path: str | Path) -> TrainSpec:
    """Read and validate a train file; :class:`ConfigError` names the file, the line and the fix.

    A study (search-space entries, ``num_samples`` > 1) is named as one
    first, whatever study fields it has besides.
    """
    data, root = read_mapping(path, kind="train file", fields=FIELDS, required="'run' and 'env'")
    where = f"train file {str(path)!r}"
    problem = study_problem(data.get("config"), data.get("num_samples"), f"rltune tune {path}")
    if problem:
        raise ConfigError(problem, where=where)
    return validate_train_fields(data, where=where, root=root)


def study_problem(config: Any, num_samples: Any, command: str) -> str | None:
    """Why fields with search-space entries or ``num_samples`` > 1 are a study for ``command``, or None."""
    from rltune.orchestrator._search_space import parse_space

    space, _ = parse_space(config) if isinstance(config, dict) else (None, [])
    if space:
        entries = ", ".join(f"config.{p.name} ({p.kind})" for p in space.params)
        return f"{entries}: search-space entries make a study of many trials; run it with '{command}'"
    if isinstance(num_samples, int) and not isinstance(num_samples, bool) and num_samples > 1:
        return f"num_samples: {num_samples} runs make a study of {num_samples} trials; run it with '{command}'"
    return None


def validate_train_fields(fields: dict[str, Any], *, where: str, root: yaml.Node | None = None) -> TrainSpec:
    """A :class:`TrainSpec` of ``fields``, or one :class:`ConfigError` naming every bad field (and its line)."""
    from rltune.trainers.rllib._rllib_names import translate_fields

    fields, problems = translate_fields(fields)
    try:
        spec = TrainSpec.model_validate(fields)
    except ValidationError as exc:
        raise ConfigError(problems + [_describe_field_error(root, err) for err in exc.errors()], where=where) from None
    if problems:
        raise ConfigError(problems, where=where)
    return spec


def _describe_field_error(root: yaml.Node | None, err: dict[str, Any]) -> str:
    loc = err["loc"]
    path = ".".join(str(p) for p in loc)
    line = line_of(root, loc) if root is not None else None
    at = f"line {line}: " if line else ""
    if err["type"] == "extra_forbidden":
        fields = FIELDS if len(loc) == 1 else list(ScheduleSegment.model_fields) if loc[0] == "schedule" else []
        close = difflib.get_close_matches(str(loc[-1]), fields, n=1, cutoff=0.5)
        hint = (f"did you mean {close[0]!r}?" if close else f"the fields are {', '.join(fields)}" if fields
                else "remove it")
        return f"{at}{path}: unknown field; {hint}"
    if err["type"] == "value_error":  # our validators' messages say what they got
        return f"{at}{path}: {err['ctx']['error']}"
    shown = repr(err.get("input"))
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return f"{at}{path}: {err['msg']} (got {shown})"
