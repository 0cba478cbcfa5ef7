"""What a checkpoint's config may name: every key that names code is checked before anything is called."""

from __future__ import annotations

import json
import os
from typing import Any

from rltune.errors import CheckpointError
from rltune.trainers._checkpoint_fields import a_noun, describe, field_error

# A checkpoint is data: loading one never calls an object its config names unless it is of the
# kind the key expects (importing the named module is allowed: it is how the kind is checked).
_HINT = "give it in config_overrides (rltune rollout: {flag})"


def saved_env_problem(env: Any) -> str | None:
    """Why a checkpoint's saved ``env`` may not be built (None if it may).

    Allowed: a gymnasium id (a registration of this process), a
    :func:`register_env` name, or an import string of a ``gymnasium.Env``
    subclass; checked before anything is called.
    """
    import gymnasium as gym

    from rltune._imports import import_object
    from rltune.errors import ConfigError
    from rltune.env._registry import registered_creator

    if env is None:
        return None
    if not isinstance(env, str):
        return f"is {describe(env)}, not a gymnasium id, a register_env name or an import string"
    if registered_creator(env) is not None or env in gym.registry or ":" not in env or env.startswith(":"):
        return None  # resolve_env reports an unknown name without running anything
    try:
        obj = import_object(env, "")
    except ConfigError as exc:
        if env.partition(":")[2] in gym.registry:  # gymnasium's "module:Env-v0": the import registered the id
            return None
        return f"cannot be imported here ({exc.problems[0]})"
    if isinstance(obj, type) and issubclass(obj, gym.Env):
        return None
    return f"is {env!r}, which names {_describe_object(obj)}, not a gymnasium.Env subclass"


def _saved_callbacks_problem(spec: Any) -> str | None:
    from rltune._imports import import_object
    from rltune.callbacks._callbacks import DefaultCallbacks
    from rltune.errors import ConfigError

    if spec is None:
        return None
    specs = spec if isinstance(spec, list) else [spec]
    for item in specs:
        if not isinstance(item, str):
            return f"holds {describe(item)}, not an import string of a DefaultCallbacks subclass"
        try:
            obj = import_object(item, "")
        except ConfigError as exc:
            return f"cannot be imported here ({exc.problems[0]})"
        if not (isinstance(obj, type) and issubclass(obj, DefaultCallbacks)):
            return f"is {item!r}, which names {_describe_object(obj)}, not a DefaultCallbacks subclass"
    return None


def _saved_policy_class_problem(name: Any) -> str | None:
    from rltune._imports import import_object
    from rltune.errors import ConfigError
    from rltune.trainers._policy import Policy

    if name is None:
        return None
    if not isinstance(name, str):
        return f"holds {describe(name)}, not an import string of a Policy subclass"
    try:
        obj = import_object(name, "")
    except ConfigError as exc:
        return f"cannot be imported here ({exc.problems[0]})"
    if not (isinstance(obj, type) and issubclass(obj, Policy)):
        return f"is {name!r}, which names {_describe_object(obj)}, not a Policy subclass"
    return None


def _describe_object(obj: Any) -> str:
    kind = "class" if isinstance(obj, type) else type(obj).__name__
    return f"{a_noun(kind)} {getattr(obj, '__qualname__', '')}".rstrip()


def _check_code_keys(path: str | os.PathLike[str], config: dict[str, Any], prefix: str = "") -> None:
    def fail(key: str, problem: str, flag: str) -> CheckpointError:
        return field_error(path, prefix + key, f"{problem}; {_HINT.format(flag=flag)}", "config key")

    if "env" in config:
        problem = saved_env_problem(config["env"])
        if problem:
            raise fail("env", problem, "--env" if not prefix else "--config")
    problem = _saved_callbacks_problem(config.get("callbacks"))
    if problem:
        raise fail("callbacks", problem, "--config '{\"callbacks\": ...}'")
    if config.get("env_task_fn") is not None:
        problem = f"is {config['env_task_fn']!r}, but a checkpoint may not name a function to run"
        raise fail("env_task_fn", problem, "--config '{\"env_task_fn\": ...}', or null")
    multiagent = config.get("multiagent")
    if isinstance(multiagent, dict):
        for key in ("policy_mapping_fn", "policies_to_train"):
            value = multiagent.get(key)
            if value is not None and not isinstance(value, list):
                problem = f"is {value!r}, but a checkpoint may not name a function to run"
                given = json.dumps(value) if isinstance(value, str) and ":" in value else "..."  # the import string, to pass on
                raise fail(f"multiagent.{key}", problem, f"--config '{{\"multiagent\": {{\"{key}\": {given}}}}}'")
        policies = multiagent.get("policies")
        for pid, spec in (policies.items() if isinstance(policies, dict) else ()):
            problem = _saved_policy_class_problem(spec.get("policy_class") if isinstance(spec, dict) else None)
            if problem:
                raise fail(f"multiagent.policies.{pid}.policy_class", problem, "--config '{\"multiagent\": ...}'")
    if not prefix and isinstance(config.get("evaluation_config"), dict):
        _check_code_keys(path, config["evaluation_config"], "evaluation_config.")


def _saved_multiagent(block: Any) -> Any:
    """A saved ``multiagent`` block with its policies' spaces (saved as text; read from the env again) dropped."""
    if not isinstance(block, dict) or not isinstance(block.get("policies"), dict):
        return block
    policies = {}
    for pid, spec in block["policies"].items():
        if isinstance(spec, dict):
            spec = {k: v for k, v in spec.items() if not (k in ("observation_space", "action_space") and isinstance(v, str))}
        policies[pid] = spec
    return dict(block, policies=policies)


def checked_config(
    path: str | os.PathLike[str], saved: dict[str, Any], overrides: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A checkpoint's saved config updated by the caller's ``overrides``, every code-naming key checked.

    Keys the caller gives are the caller's; of the rest, ``env`` must be a
    gymnasium id, a register_env name or an import string of a
    ``gymnasium.Env`` subclass, ``callbacks`` import strings of
    ``DefaultCallbacks`` subclasses, and ``env_task_fn`` (and
    ``multiagent.policy_mapping_fn``) unset; the same inside
    ``evaluation_config``. Anything else is a :class:`CheckpointError`
    naming the key, raised before anything the checkpoint names is called.
    """
    overrides = overrides or {}
    config = dict(saved)
    for key in ("observation_space", "action_space"):  # saved as text only: the trainer reads them from the env
        config.pop(key, None)
    saved_ma = _saved_multiagent(config.get("multiagent"))
    if saved_ma is not None:
        config["multiagent"] = saved_ma
    given_ma = overrides.get("multiagent")
    config.update(overrides)
    checked = {k: v for k, v in config.items() if k not in overrides}
    if isinstance(given_ma, dict) and isinstance(saved_ma, dict):
        # Keys given replace the saved ones (e.g. only policy_mapping_fn, which is never saved); the rest is checked.
        config["multiagent"] = {**saved_ma, **given_ma}
        checked["multiagent"] = {k: v for k, v in saved_ma.items() if k not in given_ma}
    unsaved = sorted(k for k, v in config.items() if isinstance(v, dict) and "__unserializable__" in v)
    if unsaved:
        raise CheckpointError(
            f"checkpoint {str(path)!r}: config keys {unsaved} could not be saved "
            "(lambdas or objects from __main__); pass them in config_overrides"
        )
    _check_code_keys(path, checked)
    return config
