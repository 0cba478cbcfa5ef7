"""A trained rltune policy as an MLflow pyfunc model: raw observations in, env actions out.

::

    model = mlflow.pyfunc.load_model("runs:/<run_id>/policy_model")
    actions = model.predict(observations)                       # [B, *obs_shape] -> [B] (Discrete) or [B, *act_shape]
    actions = model.predict(observations, params={"explore": True})   # sample instead of the greedy action

The model directory holds, besides MLflow's own files, an artifact
``policy/``: the policy exported by the trainers
(:func:`rltune.trainers.checkpoints.export_policy`: its config, spaces,
weights and observation filter), which loading builds back as an acting
policy (:func:`~rltune.trainers.checkpoints.load_exported_policy`), no
trainer, env or worker. The model is a "model from code"
(``rltune_policy_model.py``), not a pickle.

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

import os
from pathlib import Path
from typing import Any

import mlflow.pyfunc
import numpy as np

from rltune.tracking._mlflow_compat import python_model_base
from rltune.trainers import checkpoints as export

POLICY_DIR = "policy"
# The trainers' export, under the names this module had when it wrote the export itself.
SPEC_FILE = export.EXPORT_SPEC_FILE
exported_policy_ids = export.exported_policy_ids
write_policy_dir = export.export_policy
load_policy = export.load_exported_policy
load_observation_filter = export.load_exported_filter


# -- the pyfunc model ------------------------------------------------------------------------------
class PolicyModel(python_model_base()):  # type: ignore[misc]  # the signature (tensors) validates inputs
    """MLflow pyfunc wrapper of a rltune policy; ``predict`` maps a batch of observations to env actions."""

    def load_context(self, context: Any) -> None:
        import gymnasium as gym

        self.policy = export.load_exported_policy(context.artifacts[POLICY_DIR])
        self.obs_filter = export.load_exported_filter(context.artifacts[POLICY_DIR])
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
    that :func:`rltune.trainers.checkpoints.export_policy` wrote.

    The model is a "model from code" (a three-line file naming
    :class:`PolicyModel`), not a pickle: MLflow 3 refuses to unpickle models
    unless ``MLFLOW_ALLOW_PICKLE_DESERIALIZATION`` is set.
    """
    import tempfile

    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # no progress bars in trial logs
    with tempfile.TemporaryDirectory(prefix="rltune_policy_") as tmp:
        if isinstance(trainer_or_checkpoint, (str, os.PathLike)) and (Path(trainer_or_checkpoint) / SPEC_FILE).is_file():
            policy_dir = Path(trainer_or_checkpoint)  # already exported
        else:
            policy_dir = export.export_policy(trainer_or_checkpoint, Path(tmp) / POLICY_DIR, policy_id=policy_id)
        info = export.exported_policy_info(policy_dir)
        code = Path(tmp) / "rltune_policy_model.py"
        code.write_text(MODEL_CODE)
        mlflow.pyfunc.save_model(
            path=str(path),
            python_model=str(code),
            artifacts={POLICY_DIR: str(policy_dir)},
            signature=signature_of(info.observation_space, info.action_space),
            input_example=_input_example(info.observation_space),
            pip_requirements=requirements(),  # given, so MLflow does not load the model in a subprocess to infer them
            metadata={"rltune_algorithm": info.algorithm, "rltune_policy_id": info.policy_id},
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
