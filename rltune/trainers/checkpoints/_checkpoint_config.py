"""What a checkpoint's config may name: every key that names code is checked before anything is imported or called.

Which modules may be imported at all is the trust set of
``_checkpoint_trust.py``; the checks here add the kind each key expects.
"""

from __future__ import annotations

import json
import os
from typing import Any

from rltune.errors import CheckpointError
from rltune.trainers.checkpoints._checkpoint_fields import a_noun, describe, field_error
from rltune.trainers.checkpoints._checkpoint_trust import CheckpointTrust, TrustProblem

_HINT = "give it in config_overrides (rltune rollout: {flag})"


def saved_env_problem(env: Any, trust: CheckpointTrust | None = None) -> str | None:
    """Why a checkpoint's saved ``env`` may not be built (None if it may).

    Allowed: a gymnasium id (a registration of this process), a
    :func:`register_env` name, or an import string of a ``gymnasium.Env``
    subclass whose module is in the trust set (``trust``; default: the
    modules this process imported, rltune's and ``$RLTUNE_TRUST``'s);
    decided before anything is imported.
    """
    import gymnasium as gym

    from rltune.env._registry import registered_creator

    if env is None:
        return None
    if not isinstance(env, str):
        return f"is {describe(env)}, not a gymnasium id, a register_env name or an import string"
    if registered_creator(env) is not None or env in gym.registry or ":" not in env or env.startswith(":"):
        return None  # resolve_env reports an unknown name without running anything
    # gymnasium's own "module:Env-v0" form: importing the module registers the id
    return _class_problem(env, gym.Env, "gymnasium.Env", trust, registers=lambda: env.partition(":")[2] in gym.registry)


def _class_problem(ref: Any, kind: type, kind_name: str, trust: CheckpointTrust | None,
                   registers: Any = None) -> str | None:
    """Why the import string ``ref`` may not name a ``kind`` subclass here (None if it may).

    ``registers``: for an env, whether the failed import registered the gymnasium id it names.
    """
    from rltune._imports import import_object
    from rltune.errors import ConfigError

    if not isinstance(ref, str):
        return f"holds {describe(ref)}, not an import string of {a_noun(kind_name)} subclass"
    trust = trust or CheckpointTrust.of()
    problem = trust.import_problem(ref)
    if problem:
        return problem
    try:
        obj = import_object(ref, "")
    except ConfigError as exc:
        if registers is not None and registers():
            return None
        return f"cannot be imported here ({exc.problems[0]})"
    problem = trust.object_problem(ref)
    if problem:
        return problem
    if isinstance(obj, type) and issubclass(obj, kind):
        return None
    return f"is {ref!r}, which names {_describe_object(obj)}, not {a_noun(kind_name)} subclass"


def _function_problem(ref: Any, trust: CheckpointTrust) -> str | None:
    """Why a saved function (env_task_fn, policy_mapping_fn, ...) may not be used: a function has no kind to check."""
    from rltune._imports import import_object
    from rltune.errors import ConfigError

    if not isinstance(ref, str):
        return f"is {describe(ref)}, but a checkpoint may not name a function to run"
    problem = trust.import_problem(ref, function=True)
    if problem:
        return problem
    try:
        obj = import_object(ref, "")
    except ConfigError as exc:
        return f"cannot be imported here ({exc.problems[0]})"
    problem = trust.object_problem(ref, function=True)
    if problem:
        return problem
    return None if callable(obj) else f"is {ref!r}, which names {_describe_object(obj)}, not a function"


def _describe_object(obj: Any) -> str:
    kind = "class" if isinstance(obj, type) else type(obj).__name__
    return f"{a_noun(kind)} {getattr(obj, '__qualname__', '')}".rstrip()


def _check_code_keys(path: str | os.PathLike[str], config: dict[str, Any], trust: CheckpointTrust,
                     prefix: str = "") -> None:
    from rltune.callbacks._callbacks import DefaultCallbacks
    from rltune.trainers.policies._policy import Policy

    def check(key: str, problem: str | None, flag: str) -> None:
        if problem:
            joiner = ", or " if isinstance(problem, TrustProblem) else "; "
            raise field_error(path, prefix + key, f"{problem}{joiner}{_HINT.format(flag=flag)}", "config key")

    if "env" in config:
        check("env", saved_env_problem(config["env"], trust), "--env" if not prefix else "--config")
    callbacks = config.get("callbacks")
    for item in (callbacks if isinstance(callbacks, list) else [] if callbacks is None else [callbacks]):
        check("callbacks", _class_problem(item, DefaultCallbacks, "DefaultCallbacks", trust), "--config '{\"callbacks\": ...}'")
    if config.get("env_task_fn") is not None:
        check("env_task_fn", _function_problem(config["env_task_fn"], trust),
              "--config '{\"env_task_fn\": ...}', or null")
    multiagent = config.get("multiagent")
    if isinstance(multiagent, dict):
        for key in ("policy_mapping_fn", "policies_to_train", "observation_fn"):
            value = multiagent.get(key)
            if value is not None and not isinstance(value, list):
                given = json.dumps(value) if isinstance(value, str) and ":" in value else "..."  # the import string, to pass on
                check(f"multiagent.{key}", _function_problem(value, trust),
                      f"--config '{{\"multiagent\": {{\"{key}\": {given}}}}}'")
        policies = multiagent.get("policies")
        for pid, spec in (policies.items() if isinstance(policies, dict) else ()):
            name = spec.get("policy_class") if isinstance(spec, dict) else None
            if name is not None:
                check(f"multiagent.policies.{pid}.policy_class", _class_problem(name, Policy, "Policy", trust),
                      "--config '{\"multiagent\": ...}'")
    if not prefix and isinstance(config.get("evaluation_config"), dict):
        _check_code_keys(path, config["evaluation_config"], trust, "evaluation_config.")


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


def _in_rltune_names(path: str | os.PathLike[str], saved: dict[str, Any], overrides: dict[str, Any],
                     config_class: type) -> tuple[dict[str, Any], dict[str, Any], dict[str, str]]:
    """The saved config and the overrides with RLlib's names translated, and the names the user wrote
    (``Translation.origins``); what cannot be translated is an error."""
    from rltune.errors import ConfigError
    from rltune.trainers.rllib._rllib_names import translate_config

    saved_translation = translate_config(saved, config_class)
    if saved_translation.problems:
        raise CheckpointError(f"checkpoint {str(path)!r}: saved config: "
                              f"{'; '.join(map(str, saved_translation.problems))}")
    given = translate_config(overrides, config_class)
    if given.problems:
        raise ConfigError(given.problems, where="config_overrides")
    return saved_translation.config, given.config, {**saved_translation.origins, **given.origins}


def checked_config(
    path: str | os.PathLike[str],
    saved: dict[str, Any],
    overrides: dict[str, Any] | None = None,
    *,
    trust: CheckpointTrust | None = None,
    config_class: type | None = None,
) -> dict[str, Any]:
    """A checkpoint's saved config updated by the caller's ``overrides``, every code-naming key checked.

    Keys the caller gives are the caller's; of the rest, ``env`` must be a
    gymnasium id, a register_env name or an import string of a
    ``gymnasium.Env`` subclass, ``callbacks`` import strings of
    ``DefaultCallbacks`` subclasses, policy classes of ``Policy``
    subclasses, and functions (``env_task_fn``,
    ``multiagent.policy_mapping_fn``) unset unless trusted; the same inside
    ``evaluation_config``; every import string's module must be in the
    trust set (``trust``, default :meth:`CheckpointTrust.of` the
    overrides). Anything else is a :class:`CheckpointError` naming the
    key, raised before anything the checkpoint names is imported.
    ``config_class``: the trainer's config class, whose RLlib aliases
    (a top-level ``policy_mapping_fn``...) are put under rltune's names
    first, so that an alias cannot bypass a check.
    """
    overrides = overrides or {}
    origins = None
    if config_class is not None:
        saved, overrides, origins = _in_rltune_names(path, saved, overrides, config_class)
    trust = trust or CheckpointTrust.of(overrides=overrides)
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
    _check_code_keys(path, checked, trust)
    if origins is None:
        return config
    from rltune.trainers.rllib._rllib_names import Translated

    return Translated(config, origins=origins)  # the trainer validates it without translating it again
