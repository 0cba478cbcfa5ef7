"""The policy's weights version: every route that changes weights reaches the fast rollout paths, lazily."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import rltune.trainers.policies._models as models
import rltune.trainers.policies._q_model as q_model
from rltune.trainers import DQN, PPO
from rltune.trainers.algorithms._dqn import DQNPolicy
from rltune.trainers.policies._numpy_mlp import MAX_NUMPY_ROWS
from rltune.trainers.algorithms._ppo import PPOPolicy

TINY = {"num_workers": 0, "num_envs_per_worker": 2, "rollout_fragment_length": 25, "train_batch_size": 50,
        "seed": 0, "lr": 0.05, "model": {"fcnet_hiddens": [16]}}
DQN_TINY = {**TINY, "learning_starts": 0, "min_sample_timesteps_per_iteration": 20, "target_network_update_freq": 10}
PPO_TINY = {**TINY, "sgd_minibatch_size": 25, "num_sgd_iter": 2}
TRAINERS = [(PPO, PPO_TINY), (DQN, DQN_TINY)]
IDS = ["PPO", "DQN"]


def _obs(rows: int) -> np.ndarray:
    return np.random.default_rng(3).normal(size=(rows, 4)).astype(np.float32)


def _assert_fast_paths_match_forward(policy) -> None:
    """The numpy path (few rows) and the torch sampling path (many rows) give what ``forward`` gives now."""
    for rows in (3, MAX_NUMPY_ROWS + 1):
        obs = _obs(rows)
        with torch.inference_mode():
            expected = policy.model(torch.from_numpy(obs))
            got = policy.numpy_inference(obs) if rows <= MAX_NUMPY_ROWS else policy.inference_forward(torch.from_numpy(obs))
        assert got is not None
        for e, g in zip(expected if isinstance(expected, tuple) else (expected,), got if isinstance(got, tuple) else (got,)):
            np.testing.assert_allclose(np.asarray(g), e.numpy(), rtol=1e-5, atol=1e-5)


def _warm(policy) -> None:
    policy.compute_actions(_obs(3), explore=False)  # builds the numpy copy
    policy.compute_actions(_obs(MAX_NUMPY_ROWS + 1), explore=False)  # builds the fused copy (PPO)


@pytest.mark.parametrize("trainer_cls,config", TRAINERS, ids=IDS)
def test_a_learner_update_reaches_the_fast_paths(trainer_cls, config):
    trainer = trainer_cls(config=config, env="CartPole-v1")
    try:
        policy = trainer.get_policy()
        _warm(policy)
        before = policy.get_weights()
        trainer.train()
        assert any(not np.array_equal(before[k], v) for k, v in policy.get_weights().items())
        _assert_fast_paths_match_forward(policy)
    finally:
        trainer.stop()


@pytest.mark.parametrize("trainer_cls,config", TRAINERS, ids=IDS)
def test_set_weights_reaches_the_fast_paths(trainer_cls, config):
    trainer = trainer_cls(config=config, env="CartPole-v1")
    try:
        policy = trainer.get_policy()
        _warm(policy)
        weights = {k: np.random.default_rng(1).normal(size=v.shape).astype(v.dtype) for k, v in policy.get_weights().items()}
        trainer.set_weights({"default_policy": weights})
        _assert_fast_paths_match_forward(policy)
    finally:
        trainer.stop()


@pytest.mark.parametrize("trainer_cls,config", TRAINERS, ids=IDS)
def test_a_restore_reaches_the_fast_paths(trainer_cls, config, tmp_path):
    trainer = trainer_cls(config=config, env="CartPole-v1")
    try:
        policy = trainer.get_policy()
        with torch.no_grad():
            for p in policy.model.parameters():
                p.add_(0.5)
        policy.weights_changed()  # a hand edit is the one change the policy cannot see by itself
        path = trainer.save(str(tmp_path))
        trainer.train()
        _warm(policy)
        trainer.restore(path)
        _assert_fast_paths_match_forward(policy)
    finally:
        trainer.stop()


@pytest.mark.parametrize("trainer_cls,config", TRAINERS, ids=IDS)
def test_acting_with_unchanged_weights_copies_them_once(trainer_cls, config, monkeypatch):
    copies = []

    class CountingNumpyMLP(models.NumpyMLP):
        def __init__(self, *args, **kwargs):
            copies.append(1)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(models, "NumpyMLP", CountingNumpyMLP)
    monkeypatch.setattr(q_model, "NumpyMLP", CountingNumpyMLP)  # DQN's QModel
    trainer = trainer_cls(config=config, env="CartPole-v1")
    try:
        for _ in range(5):
            trainer.compute_single_action(np.zeros(4, dtype=np.float32))
        assert len(copies) == 1
        trainer.get_policy().compute_actions(_obs(3))
        assert len(copies) == 1
        trainer.train()  # samples with the numpy path, then updates: one more copy at most per update
        copies.clear()
        for _ in range(3):
            trainer.compute_single_action(np.zeros(4, dtype=np.float32))
        assert len(copies) == 1
    finally:
        trainer.stop()


def test_the_fused_torch_path_is_not_rebuilt_while_weights_stay(monkeypatch):
    builds = []
    fused_layers = models.ActorCriticModel._fused_layers

    def counting(self):
        if self._fused is None:
            builds.append(1)
        return fused_layers(self)

    monkeypatch.setattr(models.ActorCriticModel, "_fused_layers", counting)
    trainer = PPO(config=PPO_TINY, env="CartPole-v1")
    try:
        policy = trainer.get_policy()
        for _ in range(4):
            policy.compute_actions(_obs(MAX_NUMPY_ROWS + 1))
        assert len(builds) == 1
        policy.set_weights(policy.get_weights())
        policy.compute_actions(_obs(MAX_NUMPY_ROWS + 1))
        assert len(builds) == 2
    finally:
        trainer.stop()


def test_a_target_network_sync_does_not_count_as_a_policy_change():
    trainer = DQN(config=DQN_TINY, env="CartPole-v1")
    try:
        policy = trainer.get_policy()
        version = policy.weights_version
        trainer.algorithm.learners["default_policy"].sync_target()
        assert policy.weights_version == version
    finally:
        trainer.stop()


# -- a custom model implements forward alone ---------------------------------------------------------
class ForwardOnlyActorCritic(nn.Module):
    def __init__(self, obs_size: int, num_outputs: int) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(obs_size, 16), nn.Tanh())
        self.pi = nn.Linear(16, num_outputs)
        self.vf = nn.Linear(16, 1)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = self.body(obs)
        return self.pi(features), self.vf(features).squeeze(-1)


class ForwardOnlyPPOPolicy(PPOPolicy):
    def make_model(self) -> nn.Module:
        return ForwardOnlyActorCritic(self.preprocessor.size, int(self.action_space.n))


class ForwardOnlyDQNPolicy(DQNPolicy):
    def make_model(self) -> nn.Module:
        return nn.Sequential(nn.Linear(self.preprocessor.size, 16), nn.ReLU(), nn.Linear(16, int(self.action_space.n)))


class ForwardOnlyPPO(PPO):
    policy_class = ForwardOnlyPPOPolicy


class ForwardOnlyDQN(DQN):
    policy_class = ForwardOnlyDQNPolicy


@pytest.mark.parametrize("trainer_cls,config", [(ForwardOnlyPPO, PPO_TINY), (ForwardOnlyDQN, DQN_TINY)], ids=IDS)
def test_a_custom_model_with_forward_alone_samples_trains_and_acts(trainer_cls, config):
    trainer = trainer_cls(config=config, env="CartPole-v1")
    try:
        assert not hasattr(trainer.get_policy().model, "numpy_forward")
        result = trainer.train()
        assert result["timesteps_total"] > 0
        assert trainer.compute_single_action(np.zeros(4, dtype=np.float32)) in (0, 1)
        actions, _ = trainer.get_policy().compute_actions(_obs(MAX_NUMPY_ROWS + 1))
        assert actions.shape == (MAX_NUMPY_ROWS + 1,)
    finally:
        trainer.stop()


@pytest.mark.parametrize("copy_policy", ["deepcopy", "pickle"])
def test_a_copied_policy_counts_its_own_weight_changes(copy_policy):
    import copy
    import pickle

    trainer = PPO(config=PPO_TINY, env="CartPole-v1")
    try:
        original = trainer.get_policy()
        policy = copy.deepcopy(original) if copy_policy == "deepcopy" else pickle.loads(pickle.dumps(original))
        _warm(policy)
        versions = original.weights_version, policy.weights_version
        policy.set_weights({k: v + 0.5 for k, v in policy.get_weights().items()})
        assert (original.weights_version, policy.weights_version) == (versions[0], versions[1] + 1)
        _assert_fast_paths_match_forward(policy)
    finally:
        trainer.stop()
