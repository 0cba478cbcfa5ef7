"""Restoring a checkpoint into a trainer of another policy set is a CheckpointError naming both, never a crash."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from rltune.errors import CheckpointError
from rltune.trainers import PPO

from .multi_agent_envs import TurnGame

TINY = {"train_batch_size": 16, "rollout_fragment_length": 8, "sgd_minibatch_size": 8, "num_sgd_iter": 1,
        "model": {"fcnet_hiddens": [8]}}


def by_player(agent_id: Any, *args: Any, **kwargs: Any) -> str:
    return f"pol_{agent_id}"


def multi_agent(policies: Any = ("pol_x", "pol_o")) -> dict[str, Any]:
    return {"env": TurnGame, "multiagent": {"policies": policies, "policy_mapping_fn": by_player}, **TINY}


class Corridor2(gym.Env):
    """A single-agent env with TurnGame's spaces (so only the policy set differs)."""

    observation_space = gym.spaces.Box(0.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, env_config: Any = None) -> None:
        pass

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        return np.zeros(2, np.float32), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        return np.zeros(2, np.float32), 1.0, True, False, {}


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("policy_sets")
    with PPO(config=multi_agent(), results_dir=root) as trainer:
        ma = trainer.save(root / "multi")
    with PPO(config={"env": Corridor2, **TINY}, results_dir=root) as trainer:
        single = trainer.save(root / "single")
    return {"multi": ma, "single": single}


def _unchanged_after_a_failed_restore(trainer: PPO, path: str, match: str) -> None:
    before = trainer.get_weights()
    with pytest.raises(CheckpointError, match=match):
        trainer.restore(path)
    after = trainer.get_weights()
    assert sorted(after) == sorted(before)
    assert all(np.array_equal(after[p][k], before[p][k]) for p in before for k in before[p])


def test_a_multi_agent_checkpoint_into_a_single_agent_trainer(checkpoints, tmp_path):
    with PPO(config={"env": Corridor2, **TINY}, results_dir=tmp_path) as trainer:
        _unchanged_after_a_failed_restore(
            trainer, checkpoints["multi"],
            r"holds the policies \['pol_o', 'pol_x'\] of a multi-agent config; this PPO is single-agent "
            r"\(its only policy is 'default_policy'\)")


def test_a_single_agent_checkpoint_into_a_multi_agent_trainer(checkpoints, tmp_path):
    with PPO(config=multi_agent(), results_dir=tmp_path) as trainer:
        _unchanged_after_a_failed_restore(
            trainer, checkpoints["single"],
            r"has no weights for policies \['pol_o', 'pol_x'\]: it holds \['default_policy'\] of a single-agent "
            r"config; this PPO is multi-agent")


def test_a_policy_the_checkpoint_lacks(checkpoints, tmp_path):
    policies = {"pol_x": None, "pol_o": None, "pol_z": None}
    with PPO(config=multi_agent(policies), results_dir=tmp_path) as trainer:
        _unchanged_after_a_failed_restore(trainer, checkpoints["multi"],
                                          r"has no weights for policies \['pol_z'\]: it holds \['pol_o', 'pol_x'\]$")


class WideTurnGame(TurnGame):
    """TurnGame with one more (constant) observation: policies of other spaces."""

    def __init__(self, config: Any = None) -> None:
        super().__init__(config)
        self.observation_space = gym.spaces.Box(0.0, 1.0, (3,), np.float32)

    def _obs(self, agent: str) -> np.ndarray:
        return np.append(super()._obs(agent), np.float32(0.0))


def test_policies_of_other_spaces(checkpoints, tmp_path):
    with PPO(config={**multi_agent(), "env": WideTurnGame}, results_dir=tmp_path) as trainer:
        _unchanged_after_a_failed_restore(trainer, checkpoints["multi"],
                                          r"does not fit this PPO's 'pol_[xo]' model \(another env or model config\?\)")
