"""The algorithm owns the policy set: policies, learners, master observation filters, policies_to_train.

The trainer's local rollout worker acts with that very set; remote rollout
workers hold acting copies that the weight syncs keep equal; an algorithm
built on a set of its own trains with no rollout worker at all.
"""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from rltune.trainers import PPO
from rltune.trainers.algorithms._ppo import PPOAlgorithm, PPOPolicy
from rltune.trainers import PolicySet
from rltune.trainers.policies._policy_spec import PolicySpec
from rltune.trainers.sampling._fragment import Fragment
from rltune.trainers.sampling._sample_batch import SampleResult
from rltune.trainers.policies._policy import RandomPolicy

from .multi_agent_envs import TurnGame

TINY = {"num_workers": 0, "rollout_fragment_length": 20, "train_batch_size": 40, "sgd_minibatch_size": 20,
        "num_sgd_iter": 1, "seed": 0, "model": {"fcnet_hiddens": [8]}}


def by_player(agent_id: Any, *args: Any, **kwargs: Any) -> str:
    return f"pol_{agent_id}"


MULTI = {
    "env": TurnGame,
    "observation_filter": "MeanStdFilter",
    "multiagent": {"policies": {"pol_x": PolicySpec(), "pol_o": PolicySpec(policy_class=RandomPolicy)},
                   "policy_mapping_fn": by_player},
    **TINY,
}


def test_the_algorithm_owns_every_policy_its_filters_and_the_training_set(tmp_path) -> None:
    with PPO(MULTI, results_dir=tmp_path) as trainer:
        owned = trainer.algorithm.policy_set
        assert isinstance(owned, PolicySet)
        assert set(owned.policies) == {"pol_x", "pol_o"}  # trained and hosted alike
        assert set(trainer.algorithm.learners) == {"pol_x"}  # a RandomPolicy acts, never learns
        assert set(owned.filters) == {"pol_x", "pol_o"}  # the master observation filters
        assert trainer.get_policy("pol_o") is owned.policies["pol_o"]
        # the local worker acts with the algorithm's own objects, not copies
        assert trainer.workers.local_worker.policy_set is owned
        trainer.train()
        assert owned.filters["pol_x"].stats.count > 0  # sampling updated the master filter in place
        trainer.set_policies_to_train([])
        assert owned.training.candidates() == set() and not trainer.algorithm.trains("pol_x", None)
        frozen = owned.get_weights()["pol_x"]
        trainer.train()
        for key, value in owned.get_weights()["pol_x"].items():
            np.testing.assert_array_equal(value, frozen[key])  # sampled, not trained
        trainer.set_policies_to_train(["pol_x"])
        assert trainer.algorithm.trains("pol_x", None)
        assert trainer.algorithm.policies["pol_x"] is owned.policies["pol_x"]


def test_remote_workers_act_with_copies_kept_equal_by_the_weight_sync(tmp_path) -> None:
    with PPO({**TINY, "env": "CartPole-v1", "num_workers": 1}, results_dir=tmp_path) as trainer:
        owned = trainer.algorithm.policy_set
        trainer.train()
        remote = trainer.workers.foreach_worker(lambda w: (w.worker_index, w.get_weights()), local=False)
        assert [index for index, _ in remote] == [1]
        mine = owned.get_weights()["default_policy"]
        theirs = remote[0][1]["default_policy"]
        assert set(mine) == set(theirs)
        for key in mine:
            np.testing.assert_array_equal(mine[key], theirs[key])


def test_an_algorithm_trains_on_a_policy_set_of_its_own_without_rollout_workers() -> None:
    cfg = PPO.validate({"env": "CartPole-v1", **TINY})
    spaces = {"default_policy": (gym.spaces.Box(-1.0, 1.0, (3,), np.float32), gym.spaces.Discrete(2))}
    owned = PolicySet(cfg, PPOPolicy, {"default_policy": PolicySpec()}, spaces, multi_agent=False)
    fragment = _fragment(rows=40)

    class Recorded:
        def sample(self, min_steps: int) -> SampleResult:
            return SampleResult(fragments=[copy.deepcopy(fragment)], env_steps=40, agent_steps=40)

        def sync_weights(self, global_vars: dict[str, Any] | None = None) -> None:
            pass

        def metrics(self) -> dict[str, int]:
            return {}

    algorithm = PPOAlgorithm(cfg, owned, Recorded(), np.random.default_rng(0))
    before = owned.get_weights()["default_policy"]
    outcome = algorithm.training_step(0)
    assert set(outcome.learner_info) == {"default_policy"}
    after = owned.get_weights()["default_policy"]
    assert any(not np.array_equal(before[k], after[k]) for k in before)  # the set's own policy learned
    owned.select(policies_to_train=[])
    assert algorithm.training_step(40).learner_info == {}  # the set's training selection rules the algorithm
    owned.add("second", PolicySpec(), spaces["default_policy"], policies_to_train=["default_policy", "second"])
    algorithm.sync_learners()
    assert set(algorithm.learners) == {"default_policy", "second"}


def _fragment(rows: int) -> Fragment:
    rng = np.random.default_rng(0)
    obs = rng.uniform(-1, 1, (rows, 1, 3)).astype(np.float32)
    done = np.zeros((rows, 1), bool)
    done[9::10] = True
    batch = {
        "obs": obs,
        "new_obs": np.roll(obs, -1, axis=0),
        "actions": rng.integers(0, 2, (rows, 1)),
        "rewards": rng.uniform(0, 1, (rows, 1)).astype(np.float32),
        "terminateds": done,
        "truncateds": np.zeros((rows, 1), bool),
    }
    return Fragment("default_policy", batch)


@pytest.mark.parametrize("filters", ["NoFilter", "MeanStdFilter"])
def test_evaluation_and_checkpoints_read_the_algorithms_set(tmp_path, filters: str) -> None:
    config = {**MULTI, "observation_filter": filters, "evaluation_duration": 2}
    with PPO(config, results_dir=tmp_path) as trainer:
        trainer.train()
        path = trainer.save(tmp_path / "ckpt")
        assert trainer.evaluate()["evaluation"]["episodes_this_iter"] == 2
        saved = trainer.get_weights()
    with PPO(config, results_dir=tmp_path) as restored:
        restored.restore(path)
        owned = restored.algorithm.policy_set
        for pid, weights in saved.items():
            for key, value in weights.items():
                np.testing.assert_array_equal(owned.policies[pid].get_weights()[key], value)
