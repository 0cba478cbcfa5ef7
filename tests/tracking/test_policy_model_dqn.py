"""The MLflow pyfunc model of a DQN policy serves RLlib's Q heads (hiddens, dueling, noisy, ParameterNoise's layer norms)."""

from __future__ import annotations

import json

import mlflow.pyfunc
import numpy as np
import pytest

from rltune.tracking._mlflow_model import POLICY_DIR, SPEC_FILE, load_policy, save_policy_model
from rltune.trainers import DQN

BASE = {"model": {"fcnet_hiddens": [16]}, "rollout_fragment_length": 16, "train_batch_size": 8, "learning_starts": 0,
        "min_sample_timesteps_per_iteration": 32, "seed": 0}


def _probe() -> np.ndarray:
    return np.random.default_rng(0).normal(size=(12, 4)).astype(np.float32)


@pytest.mark.parametrize("head", [{"hiddens": [16], "noisy": True},
                                  {"hiddens": [16], "exploration_config": {"type": "ParameterNoise", "random_timesteps": 0}}],
                         ids=["noisy", "parameter noise"])
def test_an_exported_dqn_policy_predicts_the_trainers_greedy_actions(tmp_path, head):
    with DQN(config={**BASE, **head}, env="CartPole-v1") as trainer:
        trainer.train()
        path = save_policy_model(trainer, tmp_path / "model")
        expected = [int(trainer.compute_single_action(o)) for o in _probe()]
        q_values = trainer.get_policy().q_values(_probe())
    model = mlflow.pyfunc.load_model(str(path))
    assert model.predict(_probe()).tolist() == expected
    policy = load_policy(path / "artifacts" / POLICY_DIR)
    np.testing.assert_array_equal(policy.q_values(_probe()), q_values)


def test_a_dqn_export_written_before_the_q_head_loads_as_the_head_less_net(tmp_path):
    with DQN(config={**BASE, "hiddens": []}, env="CartPole-v1") as trainer:
        path = save_policy_model(trainer, tmp_path / "model")
        expected = trainer.get_policy().q_values(_probe())
    spec_file = path / "artifacts" / POLICY_DIR / SPEC_FILE
    spec = json.loads(spec_file.read_text())
    del spec["config"]["hiddens"]  # as an older rltune wrote it
    spec_file.write_text(json.dumps(spec))
    np.testing.assert_array_equal(load_policy(spec_file.parent).q_values(_probe()), expected)
