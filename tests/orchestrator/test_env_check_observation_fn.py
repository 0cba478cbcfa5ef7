"""A study's env check knows ``multiagent.observation_fn``: the policies' observation spaces are what the function returns."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from rltune.env import make_multi_agent
from rltune.orchestrator._env_check import _agents_of, _check_agents
from rltune.trainers import PolicySpec

TwoCartPoles = make_multi_agent("CartPole-v1")
CENTRAL = gym.spaces.Box(-np.inf, np.inf, (8,), np.float32)  # both carts


def both_carts(agent_obs, **kwargs):
    return {agent: np.concatenate([obs, agent_obs.get(1 - agent, np.zeros(4, np.float32))]) for agent, obs in agent_obs.items()}


def test_a_policy_of_the_functions_space_passes_the_check_and_fails_it_without_the_function():
    env = TwoCartPoles({"num_agents": 2})
    block = {"policies": {"shared": PolicySpec(observation_space=CENTRAL)}, "observation_fn": both_carts}
    assert _check_agents(env, "TwoCartPoles", _agents_of(block)) is None
    kind, problems, _ = _check_agents(env, "TwoCartPoles", _agents_of({**block, "observation_fn": None}))
    assert kind == "ConfigError" and "its observation space Box" in problems[0]
