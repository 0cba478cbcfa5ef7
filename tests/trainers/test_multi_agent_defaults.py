"""RLlib's multi-agent defaults: ``super().reset`` seeds, no ``multiagent`` block shares ``default_policy``, spaces from PolicySpecs."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from rltune.env import MultiAgentEnv
from rltune.errors import ConfigError
from rltune.trainers import PPO, PolicySpec
from trainer_params import iteration_config

TINY = {"model": {"fcnet_hiddens": [16]}, "seed": 1, "rollout_fragment_length": 8}
OBS = gym.spaces.Box(-10.0, 10.0, (2,), np.float32)
ACT = gym.spaces.Discrete(2)


class Pair(MultiAgentEnv):
    """Two agents acting together for 5 steps, written as RLlib's examples are: ``reset`` starts with ``super().reset``."""

    possible_agents = ["a", "b"]

    def __init__(self, config: Any = None) -> None:
        self.observation_space, self.action_space = OBS, ACT
        self.t = 0

    def _obs(self) -> dict:
        noise = self.np_random.uniform(-1.0, 1.0)
        return {a: np.array([self.t, noise], np.float32) for a in self.possible_agents}

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action_dict: dict) -> tuple[dict, dict, dict, dict, dict]:
        self.t += 1
        rewards = {a: float(action) for a, action in action_dict.items()}
        done = self.t >= 5
        return self._obs(), rewards, {"__all__": done}, {"__all__": False}, {}


class PairWithOptions(Pair):
    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        super().reset(seed=seed, options=options)
        self.t = 0
        return self._obs(), {}


class Unequal(Pair):
    """Agent "b" has more actions than agent "a": they cannot share one policy."""

    def __init__(self, config: Any = None) -> None:
        super().__init__(config)
        self.action_space = gym.spaces.Dict({"a": ACT, "b": gym.spaces.Discrete(3)})


class Undeclared(Pair):
    """Declares no spaces at all: its PolicySpecs give them."""

    def __init__(self, config: Any = None) -> None:
        self.t = 0


@pytest.mark.parametrize("env_cls", [Pair, PairWithOptions])
def test_super_reset_seeds_the_env_and_returns_to_the_subclass(env_cls):
    first, second = env_cls(), env_cls()
    assert np.array_equal(first.reset(seed=3)[0]["a"], second.reset(seed=3)[0]["a"])
    with PPO(config={"env": env_cls, "multiagent": {"policies": {"p"}}, **iteration_config(PPO, 16), **TINY}) as trainer:
        assert trainer.train()["timesteps_total"] >= 16


def test_no_multiagent_block_maps_every_agent_to_default_policy(trainer_cls):
    with trainer_cls(config={"env": Pair, **iteration_config(trainer_cls, 32), **TINY}) as trainer:
        result = trainer.train()
        assert set(trainer.workers.local_worker.policy_map) == {"default_policy"}
        assert set(result["info"]["learner"]) == {"default_policy"}
        assert result["policy_reward_mean"].keys() == {"default_policy"}
        policy = trainer.get_policy()
        assert (policy.observation_space, policy.action_space) == (OBS, ACT)
        assert trainer.compute_single_action(np.zeros(2, np.float32)) in (0, 1)


def test_no_multiagent_block_with_remote_workers_and_evaluation():
    cfg = {"env": Pair, "num_workers": 1, "evaluation_interval": 1, "evaluation_duration": 1,
           **iteration_config(PPO, 16), **TINY}
    with PPO(config=cfg) as trainer:
        result = trainer.train()
        assert result["evaluation"]["policy_reward_mean"].keys() == {"default_policy"}


def test_no_multiagent_block_with_agents_of_other_spaces_is_a_clear_error():
    with pytest.raises(ConfigError) as info:
        PPO(config={"env": Unequal, **TINY})
    message = str(info.value)
    assert "no 'multiagent' block" in message and "agent 'a'" in message and "agent 'b'" in message, message
    assert "configure 'multiagent'" in message


def test_an_env_without_spaces_takes_them_from_its_policy_specs(trainer_cls):
    policies = {"left": PolicySpec(observation_space=OBS, action_space=ACT),
                "right": PolicySpec(None, OBS, ACT, {})}
    cfg = {"env": Undeclared, "multiagent": {"policies": policies,
                                             "policy_mapping_fn": lambda agent, *a, **k: "left" if agent == "a" else "right"},
           **iteration_config(trainer_cls, 32), **TINY}
    with trainer_cls(config=cfg) as trainer:
        result = trainer.train()
        assert set(result["info"]["learner"]) == {"left", "right"}
        assert trainer.get_policy("right").observation_space == OBS


def test_an_env_without_spaces_and_a_spec_without_them_is_a_clear_error():
    policies = {"left": PolicySpec(observation_space=OBS, action_space=ACT), "right": PolicySpec(observation_space=OBS)}
    cfg = {"env": Undeclared, "multiagent": {"policies": policies,
                                             "policy_mapping_fn": lambda agent, *a, **k: "left" if agent == "a" else "right"},
           **TINY}
    with pytest.raises(ConfigError, match=r"multiagent.policies.right: env 'Undeclared' declares no action space .*"
                                          r"give its action_space \(PolicySpec\(action_space=...\)\)"):
        PPO(config=cfg)


def test_a_checkpoint_of_the_shared_default_policy_restores(tmp_path):
    cfg = {"env": Pair, **iteration_config(PPO, 16), **TINY}
    with PPO(config=cfg) as trainer:
        trainer.train()
        checkpoint = trainer.save(tmp_path / "ckpt")
        weights = trainer.get_policy().get_weights()
    with PPO.from_checkpoint(checkpoint) as restored:
        assert set(restored.workers.local_worker.policy_map) == {"default_policy"}
        for key, value in restored.get_policy().get_weights().items():
            np.testing.assert_array_equal(value, weights[key])
