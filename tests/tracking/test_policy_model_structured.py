"""The MLflow pyfunc model of a PPO policy over a structured action space answers gymnasium's flatten of each action."""

from __future__ import annotations

import mlflow.pyfunc
import numpy as np
from gymnasium.spaces import utils as space_utils

from rltune.tracking._mlflow_model import save_policy_model
from rltune.trainers import PPO
from trainers.envs import SpaceEnv, make_space

CONFIG = {"rollout_fragment_length": 8, "num_envs_per_worker": 2, "train_batch_size": 16, "sgd_minibatch_size": 8,
          "num_sgd_iter": 1, "model": {"fcnet_hiddens": [16]}, "seed": 0,
          "env_config": {"space": "box", "action_space": "dict"}}


def test_an_exported_dict_action_policy_predicts_the_trainers_actions_flattened(tmp_path):
    observations = np.random.default_rng(0).uniform(-1, 1, size=(6, 4)).astype(np.float32)
    space = make_space("dict")
    with PPO(config=CONFIG, env=SpaceEnv) as trainer:
        trainer.train()
        path = save_policy_model(trainer, tmp_path / "model")
        expected = [space_utils.flatten(space, trainer.compute_single_action(o)) for o in observations]
    predicted = mlflow.pyfunc.load_model(str(path)).predict(observations)
    assert predicted.shape == (6, space_utils.flatdim(space))
    np.testing.assert_allclose(predicted, np.stack(expected), rtol=1e-6)
    assert all(space.contains(space_utils.unflatten(space, row)) for row in predicted.astype(np.float32))
