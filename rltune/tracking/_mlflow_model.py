"""A trained rltune policy as an MLflow pyfunc model: raw observations in, env actions out.

::

    model = mlflow.pyfunc.load_model("runs:/<run_id>/policy_model")
    actions = model.predict(observations)                       # [B, *obs_shape] -> [B] (Discrete) or [B, *act_shape]
    actions = model.predict(observations, params={"explore": True})   # sample instead of the greedy action

The model directory holds, besides MLflow's own files, an artifact
``policy/`` with only what inference needs (not the trainer's checkpoint
with its optimizer state or replay buffer)::

    policy.json   algorithm, the trainer config (JSON), policy id, observation and action spaces
    weights.pt    the policy model's state dict (tensors only, loaded with weights_only=True)
    observation_filter.npz   with ``observation_filter: MeanStdFilter``: the trainer's statistics of
                  the policy's observations (count, mean, m2; loaded with allow_pickle=False),
                  applied frozen to every input, as in training

Loading builds just the policy (``<Algorithm>.policy_class(obs_space,
action_space, config)``), no trainer, env or worker. The model is a
"model from code" (``rltune_policy_model.py``), not a pickle.

Inputs (MLflow checks their dtype and shape against the signature): a Box
observation space takes raw observations ``[B, *shape]`` of the space's
dtype (float32 for most envs); a Discrete one takes ints ``[B]``; other
spaces take observations flattened with ``gymnasium.spaces.utils.flatten``
(``[B, flatdim]``, float32). Outputs: ``[B]`` int64 for Discrete actions,
``[B, *shape]`` float32 for Box actions (clipped to the bounds when
``clip_actions``). The serving environment needs rltune installed (it is
in the model's requirements).
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import mlflow.pyfunc
import numpy as np

from rltune.tracking._mlflow_compat import python_model_base

POLICY_DIR = "policy"
SPEC_FILE = "policy.json"
WEIGHTS_FILE = "weights.pt"
FILTER_FILE = "observation_filter.npz"
_UNSAVED_CONFIG_KEYS = ("callbacks", "env_task_fn", "curriculum", "observation_space", "action_space")


# -- export ----------------------------------------------------------------------------------------
def exported_policy_ids(trainer_or_checkpoint: Any) -> list[str]:
    """The policies a trial's pyfunc models are made of.

    ``default_policy`` of a single-agent trainer; of a multi-agent one, each
    policy its config declares with the algorithm's own class (no
    ``policy_class``) and trains (in ``policies_to_train`` when that is a
    list): heuristics and the frozen snapshots ``add_policy`` made are left out.
    """
    config, specs = _config_and_policy_specs(trainer_or_checkpoint)
    if not specs:
        return ["default_policy"]
    multiagent = config.get("multiagent") or {}
    declared = multiagent.get("policies") or {}
    to_train = multiagent.get("policies_to_train")
    return [pid for pid, spec in specs.items()
            if spec.get("policy_class") is None and pid in declared
            and (not isinstance(to_train, list) or pid in to_train)]


def _config_and_policy_specs(trainer_or_checkpoint: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The trainer config (JSON) and the multi-agent policy specs as a checkpoint saves them (empty: single-agent)."""
    from rltune.trainers import Trainer
    from rltune.trainers.checkpoints import _checkpoint as ckpt

    if isinstance(trainer_or_checkpoint, Trainer):
        return ckpt.json_safe(trainer_or_checkpoint.config), trainer_or_checkpoint.policy_specs_state()
    metadata = ckpt.read_metadata(trainer_or_checkpoint)
    return metadata.get("config", {}), metadata.get("policy_specs") or {}


def _policy_export_config(config: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """One policy's config: the trainer's with the policy's overrides (as training merges them), no ``multiagent``."""
    from rltune.trainers.policies._policy_spec import merge_overrides

    return merge_overrides({k: v for k, v in config.items() if k != "multiagent"}, overrides)


def write_policy_dir(trainer_or_checkpoint: Any, out: str | os.PathLike[str], *, policy_id: str = "default_policy") -> Path:
    """Write ``policy.json`` and ``weights.pt`` of a Trainer (or of a checkpoint path) into ``out``.

    A policy of a multi-agent trainer is exported with its own spaces and
    its config overrides.
    """
    import torch

    from rltune.trainers import Trainer
    from rltune.trainers.checkpoints import _checkpoint as ckpt
    from rltune.trainers.policies._space_json import space_from_json, space_to_json

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    config, specs = _config_and_policy_specs(trainer_or_checkpoint)
    if isinstance(trainer_or_checkpoint, Trainer):
        trainer = trainer_or_checkpoint
        policy = trainer.get_policy(policy_id)
        algorithm = trainer.name
        obs_space, act_space = policy.observation_space, policy.action_space
        weights = {k: v.detach().cpu() for k, v in policy.model.state_dict().items()}
        obs_filter = trainer.workers.local_worker.filters.get(policy_id)
        filter_stats = obs_filter.stats.copy() if obs_filter is not None else None
    else:
        metadata = ckpt.read_metadata(trainer_or_checkpoint)
        algorithm = metadata["algorithm"]
        tensors = ckpt.read_tensors(trainer_or_checkpoint, metadata)
        weights = tensors["policies"][policy_id]
        filter_stats = ckpt.read_observation_filters(trainer_or_checkpoint, tensors).get(policy_id)
        if policy_id in specs:  # a multi-agent checkpoint saves each policy's spaces
            obs_space, act_space = (space_from_json(specs[policy_id][k]) for k in ("observation_space", "action_space"))
        elif metadata.get("spaces") is not None:  # a single-agent one its policy's: no env is built
            obs_space, act_space = _saved_spaces(trainer_or_checkpoint, metadata["spaces"])
        else:
            obs_space, act_space = _spaces_of_env(trainer_or_checkpoint, config)
    if policy_id in specs:
        config = _policy_export_config(config, specs[policy_id].get("config") or {})
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


def _saved_spaces(checkpoint: str | os.PathLike[str], spaces: Any) -> tuple[Any, Any]:
    """The spaces a single-agent checkpoint saved as data (metadata field ``spaces``)."""
    from rltune.trainers.checkpoints._checkpoint import field_error
    from rltune.trainers.policies._space_json import space_from_json

    try:
        return space_from_json(spaces["observation_space"]), space_from_json(spaces["action_space"])
    except (ValueError, KeyError, TypeError) as exc:
        raise field_error(checkpoint, "spaces", f"is not the policy's spaces ({exc})") from None


def _spaces_of_env(checkpoint: str | os.PathLike[str], config: dict[str, Any]) -> tuple[Any, Any]:
    """A checkpoint of an older rltune saves its spaces as text only: build one env of its config to get them."""
    from rltune.errors import CheckpointError
    from rltune.trainers import EnvContext
    from rltune.trainers.checkpoints._checkpoint import field_error, saved_env_problem
    from rltune.env._build import build_env
    from rltune.env._registry import resolve_env

    problem = saved_env_problem(config.get("env"))  # a checkpoint is data: build only an env it may name
    if problem:
        raise field_error(checkpoint, "env", problem, "config key")
    if not isinstance(config.get("env_config") or {}, dict):
        raise CheckpointError(f"checkpoint {str(checkpoint)!r}: config key 'env_config' is not a dict")

    env = build_env(resolve_env(config.get("env")), EnvContext(config.get("env_config") or {}, worker_index=0),
                    check=False)
    try:
        return env.observation_space, env.action_space
    finally:
        env.close()


def load_policy(policy_dir: str | os.PathLike[str]) -> Any:
    """Build the policy that :func:`write_policy_dir` exported (CPU, no trainer, no env)."""
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


def load_observation_filter(policy_dir: str | os.PathLike[str]) -> Any:
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


# -- the pyfunc model ------------------------------------------------------------------------------
class PolicyModel(python_model_base()):  # type: ignore[misc]  # the signature (tensors) validates inputs
    """MLflow pyfunc wrapper of a rltune policy; ``predict`` maps a batch of observations to env actions."""

    def load_context(self, context: Any) -> None:
        import gymnasium as gym

        self.policy = load_policy(context.artifacts[POLICY_DIR])
        self.obs_filter = load_observation_filter(context.artifacts[POLICY_DIR])
        space = self.policy.observation_space
        self._raw = isinstance(space, (gym.spaces.Box, gym.spaces.Discrete))

    def predict(self, context, model_input, params=None):  # no type hints: MLflow would validate against them
        if isinstance(model_input, dict) and len(model_input) == 1:  # {"observations": array}
            model_input = next(iter(model_input.values()))
        obs = model_input.to_numpy() if hasattr(model_input, "to_numpy") else np.asarray(model_input)
        policy = self.policy
        if self._raw:
            batch = policy.preprocessor.batch(obs)
        else:
            batch = np.asarray(obs, dtype=np.float32).reshape(-1, policy.preprocessor.size)
        if self.obs_filter is not None:
            batch = self.obs_filter.normalize(batch)
        explore = bool((params or {}).get("explore", False))
        actions, _ = policy.compute_actions(batch, explore=explore)
        env_actions = policy.to_env_actions(actions)
        if getattr(policy, "is_structured", False):  # as the signature says: gymnasium's flatten of each action
            from gymnasium.spaces import utils as space_utils

            return np.stack([space_utils.flatten(policy.action_space, a) for a in env_actions]).astype(np.float32)
        return np.asarray(env_actions, dtype=policy.action_dtype if not policy.is_continuous else np.float32)


def signature_of(obs_space: Any, act_space: Any) -> Any:
    """The model's signature: tensors in and out, and the ``explore`` param."""
    import gymnasium as gym
    from gymnasium.spaces import utils as space_utils
    from mlflow.models import ModelSignature
    from mlflow.types.schema import ParamSchema, ParamSpec, Schema, TensorSpec

    if isinstance(obs_space, gym.spaces.Box):
        inputs = TensorSpec(np.dtype(obs_space.dtype), (-1, *obs_space.shape))
    elif isinstance(obs_space, gym.spaces.Discrete):
        inputs = TensorSpec(np.dtype(np.int64), (-1,))
    else:
        inputs = TensorSpec(np.dtype(np.float32), (-1, int(space_utils.flatdim(obs_space))))
    if isinstance(act_space, gym.spaces.Box):
        outputs = TensorSpec(np.dtype(np.float32), (-1, *act_space.shape))
    elif isinstance(act_space, gym.spaces.Discrete):
        outputs = TensorSpec(np.dtype(np.int64), (-1,))
    else:  # MultiDiscrete, MultiBinary, Tuple, Dict: gymnasium's flatten of the action (one-hot discrete parts)
        outputs = TensorSpec(np.dtype(np.float32), (-1, int(space_utils.flatdim(act_space))))
    return ModelSignature(inputs=Schema([inputs]), outputs=Schema([outputs]),
                          params=ParamSchema([ParamSpec("explore", "boolean", False)]))


def requirements() -> list[str]:
    """The model's pip requirements (pinned to this environment; rltune itself must be installed to serve it)."""
    from importlib import metadata

    pins = []
    for name in ("rltune", "mlflow", "torch", "gymnasium", "numpy", "pydantic"):
        try:
            version = metadata.version(name).split("+")[0]
            pins.append(f"{name}=={version}")
        except metadata.PackageNotFoundError:
            pins.append(name)
    return pins


MODEL_CODE = """\
# The MLflow "model from code" of a rltune policy: MLflow runs this file to build the model (no pickle).
from mlflow.models import set_model

from rltune.tracking._mlflow_model import PolicyModel

set_model(PolicyModel())
"""


def save_policy_model(trainer_or_checkpoint: Any, path: str | os.PathLike[str], *,
                      policy_id: str = "default_policy") -> Path:
    """Save a policy (``policy_id``) as an MLflow pyfunc model directory at ``path`` (which must not exist).

    ``trainer_or_checkpoint``: a Trainer, a checkpoint path, or a directory
    that :func:`write_policy_dir` exported.

    The model is a "model from code" (a three-line file naming
    :class:`PolicyModel`), not a pickle: MLflow 3 refuses to unpickle models
    unless ``MLFLOW_ALLOW_PICKLE_DESERIALIZATION`` is set.
    """
    import tempfile

    from rltune.trainers.policies._space_json import space_from_json

    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # no progress bars in trial logs
    with tempfile.TemporaryDirectory(prefix="rltune_policy_") as tmp:
        if isinstance(trainer_or_checkpoint, (str, os.PathLike)) and (Path(trainer_or_checkpoint) / SPEC_FILE).is_file():
            policy_dir = Path(trainer_or_checkpoint)  # already exported by write_policy_dir
        else:
            policy_dir = write_policy_dir(trainer_or_checkpoint, Path(tmp) / POLICY_DIR, policy_id=policy_id)
        spec = json.loads((policy_dir / SPEC_FILE).read_text())
        obs_space = space_from_json(spec["observation_space"])
        code = Path(tmp) / "rltune_policy_model.py"
        code.write_text(MODEL_CODE)
        mlflow.pyfunc.save_model(
            path=str(path),
            python_model=str(code),
            artifacts={POLICY_DIR: str(policy_dir)},
            signature=signature_of(obs_space, space_from_json(spec["action_space"])),
            input_example=_input_example(obs_space),
            pip_requirements=requirements(),  # given, so MLflow does not load the model in a subprocess to infer them
            metadata={"rltune_algorithm": spec["algorithm"], "rltune_policy_id": spec["policy_id"]},
        )
    return Path(path)


def _input_example(obs_space: Any) -> np.ndarray:
    """Two observations of the space (bounded samples), as the model takes them."""
    import gymnasium as gym
    from gymnasium.spaces import utils as space_utils

    obs_space.seed(0)
    samples = [obs_space.sample() for _ in range(2)]
    if isinstance(obs_space, gym.spaces.Box):
        return np.clip(np.stack(samples), -10, 10).astype(obs_space.dtype)
    if isinstance(obs_space, gym.spaces.Discrete):
        return np.asarray(samples, dtype=np.int64)
    return np.stack([space_utils.flatten(obs_space, s) for s in samples]).astype(np.float32)
