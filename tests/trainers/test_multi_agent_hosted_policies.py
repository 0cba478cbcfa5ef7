"""A trainer hosts policies of another algorithm: it acts with them (their algorithm's config), never trains them.

RLlib's two-trainers workflow: a PPO trainer with a ``DQNPolicy`` entry and
a DQN trainer with a ``PPOPolicy`` entry, each training its own policy and
copying the other's weights.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from rltune.env import make_multi_agent
from rltune.errors import ConfigError
from rltune.trainers import DQN, PPO, DQNPolicy, PolicySpec, PPOPolicy, Trainer
from rltune.trainers.algorithms._dqn import DQNSettings
from rltune.trainers.algorithms._ppo import PPOSettings

TwoCartPoles = make_multi_agent("CartPole-v1")
MODEL = {"fcnet_hiddens": [8]}
POLICIES = {
    "ppo_policy": PolicySpec(PPOPolicy, config={"model": MODEL}),
    "dqn_policy": PolicySpec(DQNPolicy, config={"model": MODEL, "hiddens": [4], "dueling": False}),
}


def by_parity(agent_id: Any, *args: Any, **kwargs: Any) -> str:
    return "ppo_policy" if agent_id % 2 == 0 else "dqn_policy"


def config(trains: str, **extra: Any) -> dict[str, Any]:
    tiny = (
        {"train_batch_size": 32, "rollout_fragment_length": 16, "sgd_minibatch_size": 16, "num_sgd_iter": 1}
        if trains == "ppo_policy" else
        {"learning_starts": 16, "min_sample_timesteps_per_iteration": 32, "train_batch_size": 8}
    )
    return {
        "env": TwoCartPoles, "env_config": {"num_agents": 2}, "seed": 0, **tiny,
        "multiagent": {"policies": POLICIES, "policy_mapping_fn": by_parity, "policies_to_train": [trains]},
        **extra,
    }


def same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def test_a_ppo_trainer_acts_with_a_dqn_policy_built_from_dqns_config_and_trains_only_its_own(tmp_path):
    with PPO(config=config("ppo_policy"), results_dir=tmp_path) as trainer:
        hosted = trainer.get_policy("dqn_policy")
        assert isinstance(hosted, DQNPolicy) and isinstance(hosted.config, DQNSettings)
        assert hosted.config.hiddens == [4] and not hosted.config.dueling  # the policy's overrides
        assert hosted.config.model.fcnet_hiddens == [8] and hosted.config.n_step == DQNSettings().n_step  # DQN's defaults
        assert isinstance(trainer.get_policy("ppo_policy").config, PPOSettings)
        before = hosted.get_weights()
        result = trainer.train()
        assert set(result["info"]["learner"]) == {"ppo_policy"}
        assert {"ppo_policy", "dqn_policy"} <= set(result["policy_reward_mean"])  # both acted
        assert same(trainer.get_policy("dqn_policy").get_weights(), before)  # never trained here
        assert trainer.compute_single_action(np.zeros(4, np.float32), policy_id="dqn_policy") in (0, 1)


def test_listing_a_hosted_policy_in_policies_to_train_is_a_config_error_naming_it(tmp_path):
    bad = config("ppo_policy")
    bad["multiagent"]["policies_to_train"] = ["ppo_policy", "dqn_policy"]
    with pytest.raises(ConfigError, match=r"policies_to_train: \['dqn_policy'\] are policies of another algorithm "
                                          r"\(DQNPolicy\).*train them in a trainer of their algorithm"):
        PPO(config=bad, results_dir=tmp_path)


def test_a_hosted_policys_overrides_are_checked_against_its_own_algorithms_keys(tmp_path):
    policies = dict(POLICIES, dqn_policy=PolicySpec(DQNPolicy, config={"hidens": [4]}))
    bad = config("ppo_policy")
    bad["multiagent"]["policies"] = policies
    with pytest.raises(ConfigError, match=r"multiagent\.policies\.dqn_policy\.config: .*hidens: unknown key; did you mean 'hiddens'"):
        PPO(config=bad, results_dir=tmp_path)
    policies = dict(POLICIES, dqn_policy=PolicySpec(DQNPolicy, config={"num_workers": 2}))
    bad["multiagent"]["policies"] = policies
    with pytest.raises(ConfigError, match=r"multiagent\.policies\.dqn_policy\.config\.num_workers: a run-level key"):
        PPO(config=bad, results_dir=tmp_path)


def test_two_trainers_each_train_their_own_policy_and_swap_weights(tmp_path):
    with PPO(config=config("ppo_policy"), results_dir=tmp_path) as ppo, \
            DQN(config=config("dqn_policy"), results_dir=tmp_path) as dqn:
        assert isinstance(dqn.get_policy("ppo_policy").config, PPOSettings)
        for _ in range(2):
            assert set(dqn.train()["info"]["learner"]) == {"dqn_policy"}
            assert set(ppo.train()["info"]["learner"]) == {"ppo_policy"}
            ppo.set_weights(dqn.get_weights(["dqn_policy"]))
            dqn.set_weights(ppo.get_weights(["ppo_policy"]))
        for pid in ("ppo_policy", "dqn_policy"):
            assert same(ppo.get_policy(pid).get_weights(), dqn.get_policy(pid).get_weights())
            assert ppo.compute_single_action(np.zeros(4, np.float32), policy_id=pid) == \
                dqn.compute_single_action(np.zeros(4, np.float32), policy_id=pid)


def test_a_hosted_policys_weights_are_saved_and_restored(tmp_path):
    with DQN(config=config("dqn_policy"), results_dir=tmp_path) as dqn:
        dqn.train()
        trained = dqn.get_weights(["dqn_policy"])
    with PPO(config=config("ppo_policy"), results_dir=tmp_path) as ppo:
        ppo.set_weights(trained)
        path = ppo.save(tmp_path / "ckpt")
        fresh = ppo.get_policy("dqn_policy").get_weights()
        ppo.get_policy("dqn_policy").set_weights({k: np.zeros_like(v) for k, v in fresh.items()})
        ppo.restore(path)
        assert same(ppo.get_policy("dqn_policy").get_weights(), trained["dqn_policy"])
    overrides = {"env": TwoCartPoles, "multiagent": {"policy_mapping_fn": by_parity}}
    restored = Trainer.from_checkpoint(path, overrides, results_dir=tmp_path)
    with restored:
        assert isinstance(restored, PPO) and isinstance(restored.get_policy("dqn_policy").config, DQNSettings)
        assert same(restored.get_policy("dqn_policy").get_weights(), trained["dqn_policy"])
        assert set(restored.train()["info"]["learner"]) == {"ppo_policy"}


def test_add_policy_hosts_a_policy_of_another_algorithm(tmp_path):
    with PPO(config=config("ppo_policy"), results_dir=tmp_path) as ppo:
        added = ppo.add_policy("dqn_2", DQNPolicy, config={"model": MODEL, "hiddens": [4], "dueling": False},
                               policy_state=ppo.get_policy("dqn_policy").get_weights())
        assert isinstance(added.config, DQNSettings)
        assert same(added.get_weights(), ppo.get_policy("dqn_policy").get_weights())
        assert set(ppo.train()["info"]["learner"]) == {"ppo_policy"}
