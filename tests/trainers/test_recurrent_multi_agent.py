"""The multi-agent sampler's recurrent state: one per (env, agent), reset at episode starts, recorded per step."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from rltune.env import MultiAgentEnv
from rltune.trainers import PPO, PolicySpec

from .test_recurrent_sampling import CONFIG, CounterPolicy


class TakingTurns(MultiAgentEnv):
    """Agent "a" acts every step, agent "b" every other step; each observes how often it acted in the episode (6 steps)."""

    def __init__(self, config=None):
        super().__init__()
        self.possible_agents = self.agents = ["a", "b"]
        self.observation_space = gym.spaces.Box(0.0, 10.0, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.t = 0
        self.acted = {}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        self.acted = {"a": 0, "b": 0}
        return {a: np.array([0.0], np.float32) for a in self.agents}, {}

    def step(self, actions):
        self.t += 1
        for agent in actions:
            self.acted[agent] += 1
        acting = ["a", "b"] if self.t % 2 == 0 else ["a"]
        done = self.t == 6
        obs = {a: np.array([self.acted[a]], np.float32) for a in (self.agents if done else acting)}
        return obs, {a: 1.0 for a in obs}, {"__all__": done}, {"__all__": False}, {}


def test_each_agent_carries_its_own_state_from_its_episode_start():
    config = {**CONFIG, "rollout_fragment_length": 8, "train_batch_size": 16,
              "multiagent": {"policies": {"p": PolicySpec(policy_class=CounterPolicy)},
                             "policy_mapping_fn": lambda agent_id, *args, **kwargs: "p"}}
    trainer = PPO(config=config, env=TakingTurns)
    try:
        worker = trainer.workers.local_worker
        for _ in range(3):
            fragments = worker.sample().fragments
            assert fragments
            for fragment in fragments:
                keep = fragment.keep if fragment.keep is not None else np.ones(fragment.shape, bool)
                columns = fragment.columns
                np.testing.assert_array_equal(columns["state_in_0"][keep][:, 0], columns["obs"][keep][:, 0])
                np.testing.assert_array_equal(columns["state_out_0"][keep], columns["state_in_0"][keep] + 1)
        assert trainer.train()["info"]["learner"]["p"]["num_sgd_steps"] > 0
    finally:
        trainer.stop()
