"""The sampler's recurrent state path: kept per env, reset at episode starts (after failures too), recorded per step."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from rltune.errors import ConfigError
from rltune.trainers import PPO, Fragment, PPOPolicy


class Counting(gym.Env):
    """obs = [steps so far in the episode]; 5 steps long. ``fail_at``: the env's step() raises once, at that call."""

    observation_space = gym.spaces.Box(0.0, 10.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, config=None):
        self.t = 0
        self.calls = 0
        self.fail_at = (config or {}).get("fail_at") if not getattr(config, "recreated", False) else None

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([0.0], np.float32), {}

    def step(self, action):
        self.calls += 1
        if self.calls == self.fail_at:
            raise RuntimeError("boom")
        self.t += 1
        return np.array([self.t], np.float32), 1.0, self.t == 5, False, {}


class StepCounter(nn.Module):
    """A recurrent model whose state counts the steps it saw since its initial state (no learning of interest)."""

    def __init__(self) -> None:
        super().__init__()
        self.logits = nn.Parameter(torch.zeros(2))
        self.value = nn.Parameter(torch.zeros(()))

    def get_initial_state(self) -> list[torch.Tensor]:
        return [torch.zeros(1)]

    def forward(self, obs, state, seq_lens):
        batch, steps = obs.shape[:2]
        return self.logits.expand(batch, steps, 2), self.value.expand(batch, steps), [state[0] + steps]


class CounterPolicy(PPOPolicy):
    def make_model(self) -> nn.Module:
        return StepCounter()


class CounterPPO(PPO):
    policy_class = CounterPolicy


CONFIG = {"num_workers": 0, "num_envs_per_worker": 2, "rollout_fragment_length": 7, "train_batch_size": 14,
          "sgd_minibatch_size": 14, "num_sgd_iter": 1, "seed": 0, "model": {"fcnet_hiddens": [8]}}


def assert_state_counts_episode_steps(fragment) -> None:
    """Each row acted from the state of the steps its episode had so far (= its observation)."""
    columns = fragment.columns
    np.testing.assert_array_equal(columns["state_in_0"][..., 0], columns["obs"][..., 0])
    np.testing.assert_array_equal(columns["state_out_0"], columns["state_in_0"] + 1)
    np.testing.assert_array_equal(fragment.state_in[0], columns["state_in_0"][0])


def test_the_state_resets_at_each_episode_start_across_fragments():
    trainer = CounterPPO(config=CONFIG, env=Counting)  # 5-step episodes over 7-step fragments
    try:
        assert trainer.get_policy().is_recurrent()
        worker = trainer.workers.local_worker
        starts = []
        for _ in range(3):
            fragment = worker.sample().fragments[0]
            assert fragment.shape == (7, 2)
            assert_state_counts_episode_steps(fragment)
            starts.append(fragment.state_in[0][:, 0].tolist())
        assert starts == [[0, 0], [2, 2], [4, 4]]  # the fragments start mid-episode: the state goes on
    finally:
        trainer.stop()


def test_the_state_resets_when_an_env_fails_and_is_rebuilt():
    config = {**CONFIG, "env_config": {"fail_at": 3}, "restart_failed_sub_environments": True, "disable_env_checking": True}
    trainer = CounterPPO(config=config, env=Counting)
    try:
        fragment = trainer.workers.local_worker.sample().fragments[0]
        assert trainer.workers.local_worker.num_env_restarts() == 2
        assert_state_counts_episode_steps(fragment)  # the rebuilt envs' episodes start from the initial state
        assert fragment.columns["truncateds"][2].all()
    finally:
        trainer.stop()


def test_a_remote_worker_carries_the_state_between_steps_and_fragments():
    trainer = CounterPPO(config={**CONFIG, "num_workers": 1}, env=Counting)
    try:
        for _ in range(2):
            fragments = trainer.workers.sample(14).fragments
            assert fragments
            for fragment in fragments:
                assert_state_counts_episode_steps(fragment)
        assert trainer.train()["info"]["learner"]["default_policy"]["num_sgd_steps"] > 0
    finally:
        trainer.stop()


def test_compute_single_action_with_a_state_returns_the_next_state():
    trainer = CounterPPO(config=CONFIG, env=Counting)
    try:
        policy = trainer.get_policy()
        state = policy.get_initial_state()
        np.testing.assert_array_equal(state[0], [0.0])
        for step in range(1, 4):
            action, state, extras = policy.compute_single_action(np.array([0.0], np.float32), state)
            assert action in (0, 1) and set(extras) >= {"action_logp", "vf_preds"}
        np.testing.assert_array_equal(state[0], [3.0])
    finally:
        trainer.stop()


def test_a_stateless_policy_records_no_state():
    trainer = PPO(config=CONFIG, env=Counting)
    try:
        policy = trainer.get_policy()
        assert policy.get_initial_state() == [] and not policy.is_recurrent()
        actions, state_out, extras = policy.compute_actions_with_state(np.zeros((3, 1), np.float32), [])
        assert actions.shape == (3,) and state_out == [] and "vf_preds" in extras
        assert policy.compute_single_action(np.array([0.0], np.float32)) in (0, 1)
        fragment = trainer.workers.local_worker.sample().fragments[0]
        assert fragment.state_in is None and not any(name.startswith("state_") for name in fragment.columns)
    finally:
        trainer.stop()


def test_a_recurrent_policy_refuses_recorded_steps_without_its_acting_columns_and_states():
    trainer = CounterPPO(config=CONFIG, env=Counting)
    try:
        policy = trainer.get_policy()
        bare = Fragment.from_episode("default_policy", [[0.0], [1.0], [2.0]], [0, 1], [1.0, 1.0])
        with pytest.raises(ConfigError, match="vf_preds and action_logp"):
            policy.postprocess_trajectory(bare.columns)
        acted = Fragment.from_episode("default_policy", [[0.0], [1.0], [2.0]], [0, 1], [1.0, 1.0],
                                      vf_preds=[0.0, 0.0], action_logp=[-0.7, -0.7])
        with pytest.raises(ConfigError, match="state_out"):
            policy.postprocess_trajectory(acted.columns)
    finally:
        trainer.stop()
