"""Policies over structured spaces survive checkpoints: spaces of every kind saved as JSON, weights and actions restored."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from gymnasium import spaces

from rltune.trainers import PPO
from rltune.trainers.policies._space_json import space_from_json

from .test_structured_spaces_learning import DictObsTupleActionEnv

CONFIG = {"rollout_fragment_length": 8, "num_envs_per_worker": 2, "train_batch_size": 16, "sgd_minibatch_size": 8,
          "num_sgd_iter": 2, "model": {"fcnet_hiddens": [16]}, "seed": 0}


def _saved_spaces(checkpoint: str) -> dict:
    """The policy's spaces as the checkpoint's metadata saves them (JSON)."""
    return json.loads((Path(checkpoint) / "rltune_checkpoint.json").read_text())["spaces"]


def test_a_dict_observation_tuple_action_policy_restores_with_its_spaces_and_actions(tmp_path):
    env = DictObsTupleActionEnv()
    observations = [{"x": np.array([x], np.float32), "k": k} for x in (-0.6, 0.1, 0.8) for k in (1, 2, 3)]
    with PPO(config=CONFIG, env=DictObsTupleActionEnv) as trainer:
        trainer.train()
        checkpoint = trainer.save(str(tmp_path / "ckpt"))
        before = [trainer.compute_single_action(obs) for obs in observations]
    saved = _saved_spaces(checkpoint)
    assert space_from_json(saved["observation_space"]) == env.observation_space
    assert space_from_json(saved["action_space"]) == env.action_space
    assert space_from_json(saved["action_space"]).spaces[0] == spaces.Discrete(3, start=1)
    with PPO(config={**CONFIG, "seed": 1}, env=DictObsTupleActionEnv) as restored:
        restored.restore(checkpoint)
        after = [restored.compute_single_action(obs) for obs in observations]
    for (k1, box1), (k2, box2) in zip(before, after):
        assert k1 == k2 and env.action_space.spaces[0].contains(k1)
        np.testing.assert_array_equal(box1, box2)
