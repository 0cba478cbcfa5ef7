"""One trained policy exported to a directory of its own, and loaded back as an acting policy (no trainer, env or worker).

What rltune.tracking's MLflow model is made of; the directory holds only
what inference needs (not the trainer's checkpoint with its optimizer
state or replay buffer)::

    policy.json   algorithm, the trainer config (JSON, with the policy's overrides), policy id,
                  observation and action spaces (rltune.trainers.policies._space_json)
    weights.pt    the policy model's state dict (tensors only, loaded with weights_only=True)
    observation_filter.npz   with ``observation_filter: MeanStdFilter``: the trainer's statistics of
                  the policy's observations (count, mean, m2; loaded with allow_pickle=False),
                  applied frozen, as in training

:func:`export_policy` writes one from a Trainer or a checkpoint path;
:func:`load_exported_policy` builds ``<Algorithm>.policy_class(obs_space,
action_space, config)`` from it and :func:`load_exported_filter` its
filter; :func:`exported_policy_info` reads its algorithm, id and spaces.
"""

from __future__ import annotations

import io
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from rltune._metrics import DEFAULT_POLICY_ID

SPEC_FILE = "policy.json"
WEIGHTS_FILE = "weights.pt"
FILTER_FILE = "observation_filter.npz"
_UNSAVED_CONFIG_KEYS = ("callbacks", "env_task_fn", "curriculum", "observation_space", "action_space")


@dataclass(frozen=True)
class ExportedPolicyInfo:
    """What an exported policy directory says about its policy, without building it."""

    algorithm: str
    policy_id: str
    observation_space: gym.Space
    action_space: gym.Space


def exported_policy_ids(trainer_or_checkpoint: Any) -> list[str]:
    """The policies of a Trainer (or a checkpoint path) worth exporting: those its algorithm trains.

    ``default_policy`` of a single-agent trainer; of a multi-agent one, each
    policy its config declares with the algorithm's own class (no
    ``policy_class``, or exactly the algorithm's) and trains (in
    ``policies_to_train`` when that is a list): heuristics, policies of
    another algorithm it hosts, and the frozen snapshots ``add_policy``
    made are left out.
    """
    from rltune._imports import current_import_string

    config, specs, algorithm = _config_specs_and_algorithm(trainer_or_checkpoint)
    if not specs:
        return [DEFAULT_POLICY_ID]
    own = (None, _own_policy_class(trainer_or_checkpoint, algorithm))
    multiagent = config.get("multiagent") or {}
    declared = multiagent.get("policies") or {}
    to_train = multiagent.get("policies_to_train")
    classes = {pid: spec.get("policy_class") for pid, spec in specs.items()}
    classes = {pid: current_import_string(c) if isinstance(c, str) else c for pid, c in classes.items()}
    return [pid for pid in specs
            if classes[pid] in own and pid in declared and (not isinstance(to_train, list) or pid in to_train)]


def _own_policy_class(trainer_or_checkpoint: Any, algorithm: str) -> str | None:
    """The import string of the policy class of a Trainer's (or a checkpoint's) algorithm; None if unknown here."""
    from rltune.errors import ConfigError
    from rltune.trainers import Trainer, get_trainer_class

    try:
        trainer_cls = type(trainer_or_checkpoint) if isinstance(trainer_or_checkpoint, Trainer) else get_trainer_class(algorithm)
    except ConfigError:
        return None
    return f"{trainer_cls.policy_class.__module__}:{trainer_cls.policy_class.__qualname__}"


def _config_specs_and_algorithm(trainer_or_checkpoint: Any) -> tuple[dict[str, Any], dict[str, Any], str]:
    """The trainer config (JSON), the multi-agent policy specs as a checkpoint saves them (empty: single-agent), the algorithm."""
    from rltune.trainers import Trainer
    from rltune.trainers.checkpoints import _checkpoint as ckpt

    if isinstance(trainer_or_checkpoint, Trainer):
        trainer = trainer_or_checkpoint
        return ckpt.json_safe(trainer.config), trainer.policy_specs_state(), trainer.name
    metadata = ckpt.read_metadata(trainer_or_checkpoint)
    return metadata.get("config", {}), metadata.get("policy_specs") or {}, metadata.get("algorithm", "")


def export_policy(trainer_or_checkpoint: Any, out: str | os.PathLike[str], *, policy_id: str = DEFAULT_POLICY_ID) -> Path:
    """Write ``policy.json``, ``weights.pt`` (and the observation filter) of a Trainer or a checkpoint path into ``out``.

    A policy of a multi-agent trainer is exported with its own spaces and
    its config overrides.
    """
    import torch

    from rltune.trainers import Trainer
    from rltune.trainers.checkpoints import _checkpoint as ckpt
    from rltune.trainers.policies._policy_spec import merge_overrides
    from rltune.trainers.policies._space_json import space_to_json

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    config, specs, algorithm = _config_specs_and_algorithm(trainer_or_checkpoint)
    if isinstance(trainer_or_checkpoint, Trainer):
        trainer = trainer_or_checkpoint
        policy = trainer.get_policy(policy_id)
        obs_space, act_space = policy.observation_space, policy.action_space
        weights = {k: v.detach().cpu() for k, v in policy.model.state_dict().items()}
        obs_filter = trainer.algorithm.policy_set.filters.get(policy_id)
        filter_stats = obs_filter.stats.copy() if obs_filter is not None else None
    else:
        metadata = ckpt.read_metadata(trainer_or_checkpoint)
        tensors = ckpt.read_tensors(trainer_or_checkpoint, metadata)
        weights = tensors["policies"][policy_id]
        filter_stats = ckpt.read_observation_filters(trainer_or_checkpoint, tensors).get(policy_id)
        obs_space, act_space = _checkpoint_spaces(trainer_or_checkpoint, metadata, specs, policy_id, config)
    if policy_id in specs:  # the policy's config: the trainer's with its overrides (as training merges them)
        config = merge_overrides({k: v for k, v in config.items() if k != "multiagent"}, specs[policy_id].get("config") or {})
    spec = {
        "algorithm": algorithm,
        "policy_id": policy_id,
        "config": config,
        "observation_space": space_to_json(obs_space),
        "action_space": space_to_json(act_space),
    }
    (out / SPEC_FILE).write_text(json.dumps(spec, indent=1, sort_keys=True))
    buffer = io.BytesIO()  # torch.save to a path reports a full disk as "unexpected pos"; a plain write, by errno
    torch.save(weights, buffer)
    (out / WEIGHTS_FILE).write_bytes(buffer.getbuffer())
    if filter_stats is not None:
        np.savez(out / FILTER_FILE, **filter_stats.to_arrays())
    return out


def _checkpoint_spaces(
    checkpoint: str | os.PathLike[str], metadata: dict[str, Any], specs: dict[str, Any], policy_id: str, config: dict[str, Any]
) -> tuple[gym.Space, gym.Space]:
    """A checkpoint's spaces of one policy: a multi-agent one saves each policy's, a single-agent one its policy's."""
    from rltune.trainers.checkpoints._checkpoint import field_error
    from rltune.trainers.policies._space_json import space_from_json

    if policy_id in specs:
        return tuple(space_from_json(specs[policy_id][k]) for k in ("observation_space", "action_space"))  # type: ignore[return-value]
    spaces = metadata.get("spaces")
    if spaces is None:
        return _spaces_of_env(checkpoint, config)
    try:
        return space_from_json(spaces["observation_space"]), space_from_json(spaces["action_space"])
    except (ValueError, KeyError, TypeError) as exc:
        raise field_error(checkpoint, "spaces", f"is not the policy's spaces ({exc})") from None


def _spaces_of_env(checkpoint: str | os.PathLike[str], config: dict[str, Any]) -> tuple[gym.Space, gym.Space]:
    """A checkpoint of an older rltune saves its spaces as text only: build one env of its config to get them."""
    from rltune.env._build import build_env
    from rltune.env._context import EnvContext
    from rltune.env._registry import resolve_env
    from rltune.errors import CheckpointError
    from rltune.trainers.checkpoints._checkpoint import field_error, saved_env_problem

    problem = saved_env_problem(config.get("env"))  # a checkpoint is data: build only an env it may name
    if problem:
        raise field_error(checkpoint, "env", problem, "config key")
    if not isinstance(config.get("env_config") or {}, dict):
        raise CheckpointError(f"checkpoint {str(checkpoint)!r}: config key 'env_config' is not a dict")
    env = build_env(resolve_env(config.get("env")), EnvContext(config.get("env_config") or {}, worker_index=0), check=False)
    try:
        return env.observation_space, env.action_space
    finally:
        env.close()


def exported_policy_info(policy_dir: str | os.PathLike[str]) -> ExportedPolicyInfo:
    """The algorithm, policy id and spaces of a policy :func:`export_policy` wrote."""
    from rltune.trainers.policies._space_json import space_from_json

    spec = json.loads((Path(policy_dir) / SPEC_FILE).read_text())
    return ExportedPolicyInfo(spec["algorithm"], spec["policy_id"], space_from_json(spec["observation_space"]),
                              space_from_json(spec["action_space"]))


def load_exported_policy(policy_dir: str | os.PathLike[str]) -> Any:
    """Build the policy that :func:`export_policy` wrote (CPU, eval mode; no trainer, no env)."""
    import torch

    from rltune.trainers import get_trainer_class
    from rltune.trainers._config import validate_config
    from rltune.trainers.policies._space_json import space_from_json

    policy_dir = Path(policy_dir)
    spec = json.loads((policy_dir / SPEC_FILE).read_text())
    trainer_cls = get_trainer_class(spec["algorithm"])
    fields = {f.alias or name for name, f in trainer_cls.config_class.model_fields.items()}
    config = {k: v for k, v in spec["config"].items()
              if k in fields and k not in _UNSAVED_CONFIG_KEYS
              and not (isinstance(v, dict) and "__unserializable__" in v)}
    config = trainer_cls.saved_config(config)  # an export of an older rltune: the defaults it was written with
    config["num_gpus"] = 0
    cfg = validate_config(trainer_cls.config_class, config, where="exported policy config")
    policy = trainer_cls.policy_class(space_from_json(spec["observation_space"]), space_from_json(spec["action_space"]),
                                      cfg, device="cpu", seed=cfg.seed)
    policy.model.load_state_dict(torch.load(policy_dir / WEIGHTS_FILE, map_location="cpu", weights_only=True))
    policy.model.eval()
    return policy


def load_exported_filter(policy_dir: str | os.PathLike[str]) -> Any:
    """The exported policy's observation filter (a frozen MeanStdFilter), or None if it was trained without one."""
    from rltune.trainers.policies._filters import MeanStdFilter, RunningStats

    policy_dir = Path(policy_dir)
    name = json.loads((policy_dir / SPEC_FILE).read_text())["config"].get("observation_filter", "NoFilter")
    file = policy_dir / FILTER_FILE
    if not file.exists():
        if name != "NoFilter":
            raise ValueError(f"the policy was trained with observation_filter {name!r}, but {FILTER_FILE} is missing")
        return None
    with np.load(file, allow_pickle=False) as data:
        stats = RunningStats.from_arrays(data["count"], data["mean"], data["m2"])
    obs_filter = MeanStdFilter(stats.size, track_delta=False)
    obs_filter.set_stats(stats)
    return obs_filter


def policies_from_checkpoint(path: str | os.PathLike[str], policy_ids: Any = None) -> Any:
    """RLlib's ``Policy.from_checkpoint``: the policy of an exported policy directory, or a checkpoint's policies by id.

    An exported policy directory (``rltune export-policy``, :func:`export_policy`)
    gives its policy; a trainer checkpoint gives a dict of its policies
    (``policy_ids`` picks some; default: those its algorithm trains). Each is
    built on the CPU, in eval mode, without a trainer or env. RLlib 2.x's
    path of one policy in a checkpoint, ``<checkpoint>/policies/<policy id>``,
    gives that policy.
    """
    import tempfile

    from rltune.errors import CheckpointError

    if (Path(path) / SPEC_FILE).is_file():
        return load_exported_policy(path)
    where = Path(path)
    if not where.exists() and where.parent.name == "policies" and where.parent.parent.is_dir():
        # RLlib 2.x's layout, <checkpoint>/policies/<policy id>: that policy of the trainer checkpoint
        return policies_from_checkpoint(where.parent.parent, where.name)[where.name]
    available = exported_policy_ids(path)  # a CheckpointError if path is not a checkpoint
    wanted = list(available if policy_ids is None else ([policy_ids] if isinstance(policy_ids, str) else policy_ids))
    missing = [pid for pid in wanted if pid not in available]
    if missing:
        raise CheckpointError(f"Policy.from_checkpoint({str(path)!r}): no trained policy {', '.join(map(repr, missing))} "
                              f"in it (it has {', '.join(map(repr, available))})")
    policies = {}
    for pid in wanted:
        with tempfile.TemporaryDirectory(prefix="rltune-policy-") as out:
            policies[pid] = load_exported_policy(export_policy(path, out, policy_id=pid))
    return policies
