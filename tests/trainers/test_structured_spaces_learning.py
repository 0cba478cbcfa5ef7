"""PPO learns with structured observations and actions: a Dict observation with a Tuple action, a MultiDiscrete action.

Each env is a one-step bandit whose best action depends on the observation,
so a policy that ignores it (or a random one) earns clearly less. Budgets
are tiny; the thresholds sit well between the random and the best return.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from rltune.trainers import PPO

# 8 envs x 32 one-step episodes per iteration, 8 epochs of 4 minibatches
CONFIG = {"num_envs_per_worker": 8, "rollout_fragment_length": 32, "train_batch_size": 256, "sgd_minibatch_size": 64,
          "num_sgd_iter": 8, "lr": 3e-3, "model": {"fcnet_hiddens": [32]}, "seed": 0}


class DictObsTupleActionEnv(gym.Env):
    """Observation ``{"x": Box(-1, 1, (1,)), "k": Discrete(3, start=1)}``; action ``(Discrete(3, start=1), Box(-1, 1, (1,)))``.

    Reward: 1 if the discrete part equals ``k``, plus ``1 - |b - x|`` for the
    Box part ``b``: the best action copies both parts of the observation (2
    in all); random actions average about 0.33 + 0.33.
    """

    def __init__(self, config: Any = None) -> None:
        self.observation_space = spaces.Dict({"x": spaces.Box(-1.0, 1.0, (1,), np.float32), "k": spaces.Discrete(3, start=1)})
        self.action_space = spaces.Tuple((spaces.Discrete(3, start=1), spaces.Box(-1.0, 1.0, (1,), np.float32)))
        self.bad_actions = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.obs = {"x": self.np_random.uniform(-1, 1, (1,)).astype(np.float32), "k": int(self.np_random.integers(1, 4))}
        return self.obs, {}

    def step(self, action):
        if not self.action_space.contains(action):
            self.bad_actions += 1
        kind, value = action
        reward = float(kind == self.obs["k"]) + 1.0 - abs(float(np.asarray(value).reshape(-1)[0]) - float(self.obs["x"][0]))
        return {"x": self.obs["x"].copy(), "k": self.obs["k"]}, reward, True, False, {}


class MultiDiscreteActionEnv(gym.Env):
    """Observation: a one-hot of a target ``t`` in 0..3; action ``MultiDiscrete([4, 4])``; reward 1 per entry equal to ``t``
    (random: 0.5 on average, best: 2)."""

    def __init__(self, config: Any = None) -> None:
        self.observation_space = spaces.Discrete(4)
        self.action_space = spaces.MultiDiscrete([4, 4])
        self.bad_actions = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.target = int(self.np_random.integers(4))
        return self.target, {}

    def step(self, action):
        if not self.action_space.contains(action):
            self.bad_actions += 1
        return self.target, float((np.asarray(action) == self.target).sum()), True, False, {}


def _train(env: type, iterations: int) -> tuple[PPO, dict]:
    trainer = PPO(config=CONFIG, env=env)
    for _ in range(iterations):
        result = trainer.train()
    return trainer, result


def test_ppo_learns_a_dict_observation_and_a_tuple_action():
    trainer, result = _train(DictObsTupleActionEnv, 12)
    with trainer:
        assert result["episode_reward_mean"] > 1.4, result["episode_reward_mean"]  # random: about 0.67
        assert trainer.foreach_env(lambda env: env.bad_actions) == [0] * 8
        for k in (1, 2, 3):
            action = trainer.compute_single_action({"x": np.array([0.5], np.float32), "k": k})
            assert trainer.get_policy().action_space.contains(action)
            assert action[0] == k  # the start offset: the env's own values, 1..3


def test_ppo_learns_a_multi_discrete_action():
    trainer, result = _train(MultiDiscreteActionEnv, 8)
    with trainer:
        assert result["episode_reward_mean"] > 1.5, result["episode_reward_mean"]  # random: 0.5
        assert trainer.foreach_env(lambda env: env.bad_actions) == [0] * 8
        for target in range(4):
            action = trainer.compute_single_action(target)
            assert isinstance(action, np.ndarray) and action.tolist() == [target, target]
