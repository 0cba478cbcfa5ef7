"""The trainer roles: a third algorithm in one file, another sample source, learners by policy id."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from rltune.trainers import DQN, PPO, Trainer
from rltune.trainers.algorithms._algorithm import StepOutcome
from rltune.trainers._config import TrainerSettings
from rltune.trainers.sampling._sample_batch import SampleResult
from rltune.trainers.sampling._sample_source import SampleSource
from .reinforce import REINFORCE, REINFORCEAlgorithm, REINFORCEPolicy

TINY = {"num_workers": 0, "rollout_fragment_length": 50, "train_batch_size": 100, "seed": 0, "lr": 1e-2,
        "model": {"fcnet_hiddens": [16]}}


class ReplaySource:
    """A SampleSource that replays a fixed list of sample results (no env is stepped)."""

    def __init__(self, results: list[SampleResult]) -> None:
        self.results = results
        self.calls = 0
        self.synced: list[dict] = []

    def sample(self, min_steps: int) -> SampleResult:
        result = copy.deepcopy(self.results[self.calls % len(self.results)])
        self.calls += 1
        return result

    def sync_weights(self, global_vars=None) -> None:
        self.synced.append(dict(global_vars or {}))

    def metrics(self) -> dict[str, int]:
        return {"num_healthy_workers": 0, "num_worker_restarts": 0, "num_env_restarts": 0}


def test_the_reinforce_file_is_short_and_plugs_into_the_roles():
    assert len(Path(__file__).with_name("reinforce.py").read_text().splitlines()) < 80
    with REINFORCE(TINY, env="CartPole-v1") as trainer:
        before = trainer.get_policy().get_weights()
        result = trainer.train()
        assert result["timesteps_this_iter"] == 100 and result["training_iteration"] == 1
        stats = result["info"]["learner"]["default_policy"]
        assert stats["cur_lr"] == 1e-2 and np.isfinite(stats["total_loss"])
        after = trainer.get_policy().get_weights()
        assert any(not np.array_equal(before[k], after[k]) for k in before)
        assert result["num_healthy_workers"] == 0


def test_a_reinforce_checkpoint_stores_the_learner_and_restores(tmp_path):
    with REINFORCE(TINY, env="CartPole-v1") as trainer:
        trainer.train()
        path = trainer.save(tmp_path / "ck")
        optimizer = trainer.get_learner().optimizer.state_dict()["state"][0]
        weights = trainer.get_weights()
    with REINFORCE.from_checkpoint(path) as restored:
        assert restored.iteration == 1
        for key, value in restored.get_learner().optimizer.state_dict()["state"][0].items():
            torch.testing.assert_close(value, optimizer[key])
        for key, value in restored.get_weights()["default_policy"].items():
            np.testing.assert_array_equal(value, weights["default_policy"][key])
        assert restored.train()["training_iteration"] == 2


def _recorded(trainer_cls, config, rounds=2) -> list[SampleResult]:
    with trainer_cls(config, env="CartPole-v1") as recorder:
        return [recorder.workers.sample(1) for _ in range(rounds)]


@pytest.mark.parametrize("trainer_cls, config", [
    (PPO, {**TINY, "sgd_minibatch_size": 50, "num_sgd_iter": 2}),
    (DQN, {**TINY, "rollout_fragment_length": 4, "train_batch_size": 8, "learning_starts": 0,
           "min_sample_timesteps_per_iteration": 8}),
    (REINFORCE, TINY),
], ids=["PPO", "DQN", "REINFORCE"])
def test_a_replay_of_fixed_batches_drives_a_trainer(trainer_cls, config):
    recorded = _recorded(trainer_cls, config)
    source = ReplaySource(recorded)

    class Replayed(trainer_cls):
        def make_sample_source(self) -> SampleSource:
            return source

    assert isinstance(source, SampleSource)
    with Replayed(config, env="CartPole-v1") as trainer:
        assert isinstance(trainer.workers, SampleSource)  # the default source, unused here
        trainer.workers.sample = lambda min_steps: pytest.fail("the rollout workers sampled")
        before = trainer.get_policy().get_weights()
        result = trainer.train()
        assert source.calls >= 1 and source.synced  # batches came from the source; weights went back to it
        expected = sum(r.env_steps for r in (recorded * 4)[: source.calls])
        assert result["timesteps_this_iter"] == expected
        assert result["info"]["learner"]["default_policy"]
        after = trainer.get_policy().get_weights()
        assert any(not np.array_equal(before[k], after[k]) for k in before)


def _two_policies() -> dict[str, REINFORCEPolicy]:
    cfg = Trainer.validate({**TINY, "env": "CartPole-v1"})
    obs_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
    return {pid: REINFORCEPolicy(obs_space, gym.spaces.Discrete(2), cfg, seed=i) for i, pid in enumerate(["a", "b"])}


def _batch(policy: REINFORCEPolicy, rows: int = 20) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(rows, 1, 4)).astype(np.float32)
    return policy.postprocess_trajectory({
        "obs": obs,
        "actions": rng.integers(0, 2, (rows, 1)),
        "rewards": np.ones((rows, 1), np.float32),
        "terminateds": np.zeros((rows, 1), bool),
        "truncateds": np.zeros((rows, 1), bool),
    })


def test_an_algorithm_trains_a_dict_of_policies_and_checkpoints_every_learner():
    policies = _two_policies()
    cfg: TrainerSettings = next(iter(policies.values())).config
    source = ReplaySource([SampleResult(batches={pid: _batch(p) for pid, p in policies.items()}, env_steps=20)])
    algorithm = REINFORCEAlgorithm(cfg, policies, source, np.random.default_rng(0))
    outcome = algorithm.training_step(0)
    assert isinstance(outcome, StepOutcome) and set(outcome.learner_info) == {"a", "b"}
    assert source.synced == [{"timestep": 20}]
    values, tensors = algorithm.get_state()
    assert set(tensors["learners"]) == {"a", "b"}  # policies other than default_policy: by id
    fresh = REINFORCEAlgorithm(cfg, _two_policies(), source, np.random.default_rng(0))
    fresh.set_state(values, tensors)
    for pid in policies:
        saved = algorithm.learners[pid].optimizer.state_dict()["state"][0]
        for key, value in fresh.learners[pid].optimizer.state_dict()["state"][0].items():
            torch.testing.assert_close(value, saved[key])


DATA = Path(__file__).with_name("data")


def test_a_ppo_checkpoint_written_before_the_roles_restores_its_learner(tmp_path):
    """``data/ppo_format2`` was written by rltune before the Learner/Algorithm split (format version 2)."""
    path = shutil.copytree(DATA / "ppo_format2", tmp_path / "ck")
    saved = torch.load(path / "state.pt", weights_only=False)["algorithm"]["optimizer"]["state"][0]
    with PPO.from_checkpoint(path) as trainer:
        assert trainer.iteration == 1 and trainer.timesteps_total == 100
        learner = trainer.get_learner()
        assert learner.kl_coeff == 0.1  # halved once from 0.2, in the metadata's algorithm_state
        for key, value in learner.optimizer.state_dict()["state"][0].items():
            torch.testing.assert_close(value, saved[key])
        assert trainer.train()["training_iteration"] == 2


def test_a_dqn_checkpoint_written_before_the_roles_restores_its_learner_and_buffer(tmp_path):
    """``data/dqn_format2``: the same for DQN, with its replay buffer and target network."""
    path = shutil.copytree(DATA / "dqn_format2", tmp_path / "ck")
    saved = torch.load(path / "state.pt", weights_only=False)["algorithm"]
    with DQN.from_checkpoint(path) as trainer:
        assert trainer.algorithm.num_grad_steps == 8 and len(trainer.algorithm.buffers["default_policy"]) == 32
        learner = trainer.get_learner()
        for key, value in learner.target_model.state_dict().items():
            torch.testing.assert_close(value, saved["target_model"][key])
        torch.testing.assert_close(learner.optimizer.state_dict()["state"][0]["exp_avg"], saved["optimizer"]["state"][0]["exp_avg"])
        assert trainer.train()["training_iteration"] == 2


def test_the_off_policy_base_takes_its_numbers_from_the_algorithm_not_dqn_keys():
    """An off-policy algorithm with config keys of its own (none of DQN's) runs on the base's replay and target syncs."""
    from rltune.trainers.algorithms._algorithm import OffPolicyAlgorithm, OffPolicyLearner, ReplaySettings

    from .reinforce import REINFORCELearner

    class ToyConfig(TrainerSettings):
        buffer_size: int = 60
        warmup_steps: int = 20

    class ReplayedREINFORCELearner(OffPolicyLearner):
        loss = REINFORCELearner.loss
        update = REINFORCELearner.update

        def frozen_modules(self):
            return None

    class ToyOffPolicy(OffPolicyAlgorithm):
        policy_class = REINFORCEPolicy
        learner_class = ReplayedREINFORCELearner

        def replay_settings(self) -> ReplaySettings:
            return ReplaySettings(capacity=self.cfg.buffer_size, learning_starts=self.cfg.warmup_steps,
                                  target_update_freq=30, min_steps_per_iteration=100)

    class Toy(Trainer):
        name = "ToyOffPolicy"
        config_class = ToyConfig
        algorithm_class = ToyOffPolicy

    trainer = Toy(config={**TINY, "rollout_fragment_length": 10, "train_batch_size": 16}, env="CartPole-v1")
    try:
        assert not hasattr(trainer.cfg, "replay_buffer_config")
        result = trainer.train()
        assert result["timesteps_this_iter"] >= 100
        assert len(trainer.algorithm.buffers["default_policy"]) == 60
        assert trainer.algorithm.num_target_updates >= 2 and trainer.algorithm.num_grad_steps >= 8
    finally:
        trainer.stop()
