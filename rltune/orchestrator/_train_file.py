"""Train files (``rltune train -f FILE.yaml``): one trial's fields in YAML, validated with file and line.

A train file holds the fields of ``rltune train``'s flags::

    name: cartpole-ppo          # optional: the trial directory's name
    run: PPO
    env: CartPole-v1            # or config.env
    stop: {episode_reward_mean: 475, timesteps_total: 200000}
    checkpoint_freq: 10
    checkpoint_at_end: true
    results_dir: ~/rltune_results
    config: {lr: 0.0003, ...}
    curriculum: {phases: [{task: 2, threshold: 0.9}, {task: 8}]}   # optional

RLlib's tuned-example layout, the same fields under one top-level key that
becomes the name (``cartpole-ppo: {run: PPO, ...}``), is read too.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, Optional

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rltune.errors import ConfigError


class TrainSpec(BaseModel):
    """The fields of one ``rltune train`` trial, from flags and/or a train file; None means not given."""

    model_config = ConfigDict(extra="forbid")

    name: Optional[str] = Field(None, description="Trial directory name; default RUN_ENV_timestamp.")
    run: Optional[str] = Field(None, description="Algorithm name (PPO, DQN) or 'pkg.module:TrainerClass'.")
    env: Optional[str] = Field(None, description="Gymnasium id, register_env name or 'pkg.module:Name'.")
    config: Optional[dict[str, Any]] = Field(None, description="The trainer's config (see --show-config).")
    stop: Optional[dict[str, float]] = Field(None, description="Stop when any result key reaches its value.")
    checkpoint_freq: Optional[int] = Field(None, ge=0, description="Save a checkpoint every N iterations (0: never).")
    checkpoint_at_end: Optional[bool] = Field(None, description="Save a checkpoint when the trial ends.")
    results_dir: Optional[str] = Field(None, description="Where trial directories go.")
    curriculum: Optional[dict[str, Any]] = Field(
        None, description="Curriculum phases (goes to config['curriculum']; see rltune.callbacks.CurriculumCallback)."
    )


FIELDS = list(TrainSpec.model_fields)


def load_train_file(path: str | Path) -> TrainSpec:
    """Read and validate a train file; :class:`ConfigError` names the file, the line and the fix."""
    where = f"train file {str(path)!r}"
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        raise ConfigError("the file does not exist", where=where) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read it ({exc})", where=where) from None
    try:
        data = yaml.safe_load(text)
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        raise ConfigError(_describe_yaml_error(exc), where=where) from None
    if data is None:
        raise ConfigError(f"the file is empty; it needs at least 'run' and 'env' (fields: {', '.join(FIELDS)})", where=where)
    if not isinstance(data, dict):
        raise ConfigError(
            f"line 1: must be a mapping of fields ({', '.join(FIELDS)}), but got a {type(data).__name__}", where=where
        )
    if len(data) == 1:  # RLlib's layout: {experiment_name: {run: ..., env: ...}}
        (key, value), = data.items()
        if key not in FIELDS and isinstance(value, dict) and "run" in value:
            data = {"name": str(key), **value}
            root = root.value[0][1]
    try:
        return TrainSpec.model_validate(data)
    except ValidationError as exc:
        raise ConfigError([_describe_field_error(root, err) for err in exc.errors()], where=where) from None


def _describe_yaml_error(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    context = getattr(exc, "context", None)
    text = f"{context}, {problem}" if context else problem
    if mark is None:
        return f"not valid YAML: {text}"
    return f"line {mark.line + 1}, column {mark.column + 1}: not valid YAML: {text}"


def _describe_field_error(root: yaml.Node, err: dict[str, Any]) -> str:
    loc = err["loc"]
    path = ".".join(str(p) for p in loc)
    line = _line_of(root, loc)
    at = f"line {line}: " if line else ""
    if err["type"] == "extra_forbidden":
        close = difflib.get_close_matches(str(loc[-1]), FIELDS, n=1, cutoff=0.5)
        hint = f"did you mean {close[0]!r}?" if close else f"the fields are {', '.join(FIELDS)}"
        return f"{at}{path}: unknown field; {hint}"
    shown = repr(err.get("input"))
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return f"{at}{path}: {err['msg']} (got {shown})"


def _line_of(node: yaml.Node, loc: tuple[Any, ...]) -> int | None:
    """1-based line of the YAML node at ``loc`` (the deepest one found), or None."""
    line = None
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            match = next(((k, v) for k, v in node.value if k.value == str(part)), None)
            if match is None:
                break
            line = match[0].start_mark.line + 1
            node = match[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            break
    return line
