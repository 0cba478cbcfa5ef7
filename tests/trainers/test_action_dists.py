"""The action distribution catalog (``_action_dists.py``): product distributions over every supported action space.

Log-probabilities and entropies are the sums of torch.distributions' per
component; rows decode to the env's structured actions (Discrete parts
offset by ``start``) and encode back; PPO samples actions in the env's
space for every kind; DQN refuses all but Discrete by name.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces

from rltune.errors import SpaceError
from rltune.trainers import DQN, PPO
from rltune.trainers.policies._action_dists import action_dist_for

from .envs import SpaceEnv, make_space

TUPLE = spaces.Tuple((
    spaces.Discrete(3, start=2),
    spaces.Box(-1.0, 1.0, (2,), np.float32),
    spaces.MultiDiscrete([2, 3]),
    spaces.MultiBinary(2),
))
DICT = spaces.Dict({"move": spaces.Discrete(4, start=-1), "push": spaces.Box(0.0, 2.0, (1,), np.float32),
                    "nested": spaces.Tuple((spaces.MultiBinary((2, 2)), spaces.Discrete(2)))})
TINY = {"rollout_fragment_length": 12, "num_envs_per_worker": 2, "train_batch_size": 24, "sgd_minibatch_size": 12,
        "num_sgd_iter": 2, "model": {"fcnet_hiddens": [16]}, "seed": 0}


def _reference(inputs: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """TUPLE's log-probs and entropies from torch.distributions, summed per component (inputs: 3 + 2 + 2 + 3 + 2 logits/means, 2 log stds)."""
    d = torch.distributions
    logits, means, md0, md1, bits, log_std = torch.split(inputs, [3, 2, 2, 3, 2, 2], dim=1)
    parts = [
        (d.Categorical(logits=logits), actions[:, 0].long()),
        (d.Independent(d.Normal(means, log_std.exp()), 1), actions[:, 1:3]),
        (d.Categorical(logits=md0), actions[:, 3].long()),
        (d.Categorical(logits=md1), actions[:, 4].long()),
        (d.Independent(d.Bernoulli(logits=bits), 1), actions[:, 5:7]),
    ]
    return sum(p.log_prob(a) for p, a in parts), sum(p.entropy() for p, _ in parts)


def test_log_probs_and_entropies_are_torch_distributions_summed_per_component():
    dist = action_dist_for(TUPLE)
    assert (dist.num_inputs, dist.num_log_std, dist.width) == (12, 2, 7)
    assert dist.action_shape == (7,) and dist.action_dtype == np.float32
    rng = np.random.default_rng(0)
    inputs = rng.normal(size=(64, 14)).astype(np.float32)
    actions, logp = dist.sample(inputs, rng, deterministic=False)
    torch_inputs, torch_actions = torch.from_numpy(inputs), torch.from_numpy(actions)
    expected_logp, expected_entropy = _reference(torch_inputs, torch_actions)
    product = dist.torch_dist(torch_inputs)
    torch.testing.assert_close(product.logp(torch_actions), expected_logp)
    torch.testing.assert_close(product.entropy(), expected_entropy)
    np.testing.assert_allclose(logp, expected_logp.numpy(), rtol=1e-4, atol=1e-4)  # what the rollout stored


def test_deterministic_actions_are_each_components_mode():
    dist = action_dist_for(TUPLE)
    inputs = np.zeros((1, 14), np.float32)
    inputs[0, [1, 3, 4, 5, 9, 10, 11]] = [5.0, 0.3, -0.4, 5.0, 5.0, 5.0, -5.0]
    actions, _ = dist.sample(inputs, np.random.default_rng(0), deterministic=True)
    np.testing.assert_allclose(actions[0], [1, 0.3, -0.4, 0, 2, 1, 0], rtol=1e-6)
    assert dist.to_env(actions)[0][0] == 3  # index 1 of Discrete(3, start=2)


@pytest.mark.parametrize("space", [TUPLE, DICT, spaces.MultiDiscrete([[2, 3], [4, 5]], start=[[1, 1], [0, -2]]),
                                   spaces.MultiBinary(5), spaces.Discrete(3, start=7)])
def test_rows_decode_to_the_envs_actions_and_encode_back(space):
    dist = action_dist_for(space)
    rng = np.random.default_rng(1)
    actions, logp = dist.uniform(rng, 50)
    assert np.all(np.isfinite(logp))
    for row, env_action in zip(actions, dist.to_env(actions)):
        assert space.contains(env_action), env_action
        np.testing.assert_allclose(dist.encode(env_action), row)
    for _ in range(20):
        action = space.sample()
        assert _same(dist.to_env(dist.encode(action)[None])[0], action)


def _same(a, b) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, tuple):
        return len(a) == len(b) and all(map(_same, a, b))
    return np.array_equal(np.asarray(a), np.asarray(b))


def test_an_all_discrete_product_keeps_integer_rows():
    dist = action_dist_for(spaces.Tuple((spaces.Discrete(2), spaces.MultiDiscrete([3, 3]), spaces.MultiBinary(1))))
    assert dist.action_dtype == np.int64 and dist.action_shape == (4,)


@pytest.mark.parametrize("name", ["multi_discrete", "multi_binary", "tuple", "dict", "discrete_start"])
def test_ppo_acts_in_the_envs_space_of_every_kind(name):
    space = make_space(name)
    with PPO(config={**TINY, "env_config": {"space": "box", "action_space": name}}, env=SpaceEnv) as trainer:
        result = trainer.train()
        assert np.isfinite(result["info"]["learner"]["default_policy"]["total_loss"])
        obs = make_space("box").sample()
        for explore in (False, True):
            for _ in range(10):
                action = trainer.compute_single_action(obs, explore=explore)
                assert space.contains(action), action
                assert space.contains(trainer.get_policy().compute_single_action(obs, explore=explore))


def test_ppo_trains_with_a_multi_binary_action_and_random_exploration():
    config = {**TINY, "env_config": {"space": "box", "action_space": "multi_binary"},
              "exploration_config": {"type": "StochasticSampling", "random_timesteps": 12}}
    with PPO(config=config, env=SpaceEnv) as trainer:
        for _ in range(2):
            result = trainer.train()
        assert np.isfinite(result["info"]["learner"]["default_policy"]["total_loss"])
        action = trainer.compute_single_action(make_space("box").sample())
        assert action.dtype == np.int8 and action.shape == (3,)


@pytest.mark.parametrize("name, kind", [("tuple", "Tuple"), ("multi_discrete", "MultiDiscrete"), ("box", "Box")])
def test_dqn_refuses_every_action_space_but_discrete_by_name(name, kind):
    with pytest.raises(SpaceError) as info:
        DQN(config={"env_config": {"space": "box", "action_space": name}, "model": {"fcnet_hiddens": [16]}}, env=SpaceEnv)
    message = str(info.value)
    assert "DQN needs a Discrete action space" in message and kind in message


def test_a_random_policy_acts_in_structured_spaces_too():
    from rltune.trainers import RandomPolicy
    from rltune.trainers.algorithms._ppo import PPOSettings

    policy = RandomPolicy(spaces.Box(-1.0, 1.0, (2,), np.float32), DICT, PPOSettings())
    actions, _ = policy.compute_actions(np.zeros((5, 2), np.float32))
    assert actions.shape == (5, policy.action_dist.width)
    assert all(DICT.contains(a) for a in policy.to_env_actions(actions))
