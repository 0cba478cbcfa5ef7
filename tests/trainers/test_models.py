"""The built-in models' rollout paths (fused torch chain, numpy) compute what their forward computes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rltune.trainers._config import ModelConfig
from rltune.trainers.policies._models import ActorCriticModel
from rltune.trainers.policies._q_model import QModel


def _obs(rows: int, size: int) -> np.ndarray:
    return np.random.default_rng(0).normal(size=(rows, size)).astype(np.float32) * 3


def _perturb(model: torch.nn.Module) -> None:
    # Zero-initialised biases and tiny head gains would hide a mixed-up layer: randomise everything.
    torch.manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_()


@pytest.mark.parametrize("activation", ["tanh", "relu", "elu", "swish", "linear"])
@pytest.mark.parametrize("shared", [False, True], ids=["separate", "shared"])
@pytest.mark.parametrize("free_log_std", [0, 2], ids=["discrete", "box"])
def test_actor_critic_rollout_paths_match_forward(activation, shared, free_log_std):
    cfg = ModelConfig(fcnet_hiddens=[16, 8], fcnet_activation=activation, vf_share_layers=shared)
    model = ActorCriticModel(5, free_log_std or 3, cfg, free_log_std=free_log_std)
    _perturb(model)
    model.invalidate_fused()
    obs = _obs(7, 5)
    with torch.no_grad():
        dist_inputs, values = model(torch.from_numpy(obs))
        fused_inputs, fused_values = model.forward_inference(torch.from_numpy(obs))
    np_inputs, np_values = model.numpy_forward(obs)
    for got in (fused_inputs.numpy(), np_inputs):
        np.testing.assert_allclose(got, dist_inputs.numpy(), rtol=1e-5, atol=1e-5)
    for got in (fused_values.numpy(), np_values):
        np.testing.assert_allclose(got, values.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dueling", [False, True], ids=["plain", "dueling"])
def test_q_model_numpy_path_matches_forward(dueling):
    model = QModel(4, 3, ModelConfig(fcnet_hiddens=[32, 32], fcnet_activation="relu"), dueling=dueling)
    _perturb(model)
    model.invalidate_fused()
    obs = _obs(5, 4)
    with torch.no_grad():
        expected = model(torch.from_numpy(obs)).numpy()
    np.testing.assert_allclose(model.numpy_forward(obs), expected, rtol=1e-5, atol=1e-4)


def test_the_numpy_path_sees_new_weights_after_invalidation():
    model = QModel(4, 2, ModelConfig(fcnet_hiddens=[8]), dueling=False)
    obs = _obs(3, 4)
    before = model.numpy_forward(obs).copy()
    _perturb(model)
    np.testing.assert_array_equal(model.numpy_forward(obs), before)  # a copy until told
    model.invalidate_fused()
    with torch.no_grad():
        np.testing.assert_allclose(model.numpy_forward(obs), model(torch.from_numpy(obs)).numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("algo", ["PPO", "DQN"])
def test_a_policy_acts_alike_on_few_rows_numpy_and_many_rows_torch(algo):
    from rltune.trainers import DQN, PPO
    from rltune.trainers.policies._numpy_mlp import MAX_NUMPY_ROWS

    trainer = (PPO if algo == "PPO" else DQN)(config={"num_envs_per_worker": 1, "seed": 0}, env="CartPole-v1")
    try:
        policy = trainer.get_policy()
        _perturb(policy.model)
        policy.weights_changed()
        obs = _obs(MAX_NUMPY_ROWS + 1, 4)  # torch path
        many_actions, many_extras = policy.compute_actions(obs, explore=False)
        few_actions, few_extras = policy.compute_actions(obs[:5], explore=False)  # numpy path
        np.testing.assert_array_equal(few_actions, many_actions[:5])
        for key, value in few_extras.items():
            np.testing.assert_allclose(value, many_extras[key][:5], rtol=1e-5, atol=1e-5)
    finally:
        trainer.stop()


def test_one_activation_table_serves_the_config_and_every_path():
    from typing import get_args

    from rltune.trainers.policies._activations import ACTIVATIONS
    from rltune.trainers._config import ModelConfig as Config

    assert set(get_args(Config.model_fields["fcnet_activation"].annotation)) == set(ACTIVATIONS)
    x = np.linspace(-30, 30, 61, dtype=np.float32)[None]
    for name, activation in ACTIVATIONS.items():
        expected = activation.module()(torch.from_numpy(x)).numpy()
        np.testing.assert_allclose(activation.torch_fn(torch.from_numpy(x)).numpy(), expected, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(activation.numpy_fn(x.copy()), expected, rtol=1e-5, atol=1e-6, err_msg=name)
