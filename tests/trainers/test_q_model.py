"""DQN's Q-network as RLlib builds it: fcnet body + ``hiddens`` head per stream, dueling, noisy layers; its numpy paths."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from rltune.trainers import DQN
from rltune.trainers._config import ModelConfig
from rltune.trainers.algorithms._dqn import DQNSettings, DQNPolicy
from rltune.trainers.policies._q_model import NoisyLinear, QModel, scaled_noise

RLLIB_CARTPOLE = {"model": {"fcnet_hiddens": [64], "fcnet_activation": "linear"}, "n_step": 3}


def _policy(**config) -> DQNPolicy:
    cfg = DQNSettings.model_validate(config)
    return DQNPolicy(gym.spaces.Box(-1, 1, (4,), np.float32), gym.spaces.Discrete(2), cfg, seed=0)


def _linear_shapes(module: nn.Module) -> list[tuple[int, int]]:
    return [(m.in_features, m.out_features) for m in module.modules() if isinstance(m, (nn.Linear, NoisyLinear))]


def _randomise(model: nn.Module) -> None:
    torch.manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(std=0.5)
    model.invalidate_fused()


def test_rllibs_cartpole_config_builds_a_linear_body_then_a_relu_head_per_stream():
    model = _policy(**RLLIB_CARTPOLE).model
    assert _linear_shapes(model.body) == [(4, 64)]
    assert not any(isinstance(m, nn.ReLU) for m in model.body)  # fcnet_activation: linear
    assert _linear_shapes(model.advantage_hidden) == [(64, 256)] and _linear_shapes(model.advantage_head) == [(256, 2)]
    assert _linear_shapes(model.value_hidden) == [(64, 256)] and _linear_shapes(model.value_head) == [(256, 1)]
    # The head makes Q non-linear in the observation: an affine net has Q(x) + Q(-x) == 2 Q(0) everywhere.
    _randomise(model)
    x = torch.randn(64, 4)
    with torch.no_grad():
        gap = model(x) + model(-x) - 2 * model(torch.zeros(1, 4))
    assert gap.abs().max() > 1e-2


def test_without_dueling_there_is_one_stream_and_hiddens_sets_its_layers():
    model = _policy(dueling=False, hiddens=[32, 16], model={"fcnet_hiddens": [8]}).model
    assert model.value_head is None and model.value_hidden is None
    assert _linear_shapes(model) == [(4, 8), (8, 32), (32, 16), (16, 2)]


def test_empty_hiddens_is_the_head_less_net_with_its_old_parameter_names():
    model = _policy(hiddens=[], model={"fcnet_hiddens": [8]}).model
    assert set(model.state_dict()) == {"body.0.weight", "body.0.bias", "advantage_head.weight", "advantage_head.bias",
                                       "value_head.weight", "value_head.bias"}


@pytest.mark.parametrize("dueling", [False, True], ids=["plain", "dueling"])
@pytest.mark.parametrize("noisy", [False, True], ids=["linear", "noisy"])
@pytest.mark.parametrize("layer_norm", [False, True], ids=["", "layer-norm"])
@pytest.mark.parametrize("hiddens", [[], [16, 8]], ids=["no-head", "head"])
def test_numpy_paths_match_forward(dueling, noisy, layer_norm, hiddens):
    cfg = ModelConfig(fcnet_hiddens=[12], fcnet_activation="tanh")
    model = QModel(5, 3, cfg, dueling=dueling, hiddens=hiddens, noisy=noisy, layer_norm=layer_norm)
    _randomise(model)
    obs = np.random.default_rng(0).normal(size=(7, 5)).astype(np.float32)
    with torch.no_grad():
        expected = model(torch.from_numpy(obs), noise=False).numpy()
    np.testing.assert_allclose(model.numpy_forward(obs), expected, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(model.numpy_net()(obs), expected, rtol=1e-4, atol=1e-4)
    if noisy:  # the noise of the numpy path is the torch layer's, drawn in the same order
        rng = np.random.default_rng(3)
        noisy_q = model.numpy_forward(obs, np.random.default_rng(3))
        with torch.no_grad():
            for layer in _noisy_layers_in_draw_order(model):
                for eps in (layer.eps_in, layer.eps_out):
                    eps.copy_(torch.from_numpy(scaled_noise(rng.standard_normal(eps.shape[0]).astype(np.float32))))
            np.testing.assert_allclose(noisy_q, model(torch.from_numpy(obs)).numpy(), rtol=1e-4, atol=1e-4)
        assert np.abs(noisy_q - expected).max() > 1e-3


def _noisy_layers_in_draw_order(model: QModel) -> list[NoisyLinear]:
    """The noisy layers in the order the numpy path draws their noise: each stream's hidden layers, then its output."""
    layers = [*(layer.linear for layer in model.advantage_hidden), model.advantage_head]
    if model.value_head is not None:
        layers += [*(layer.linear for layer in model.value_hidden), model.value_head]
    return layers


def test_noisy_layers_sample_while_exploring_and_are_off_when_greedy():
    policy = _policy(noisy=True, hiddens=[16], model={"fcnet_hiddens": [8]})
    assert all(isinstance(m, NoisyLinear) for m in [policy.model.advantage_head, policy.model.value_head])
    obs = np.random.default_rng(0).normal(size=(3, 4)).astype(np.float32)
    many = np.repeat(obs, 30, axis=0)  # > MAX_NUMPY_ROWS rows: the torch path
    for rows in (obs, many):
        explored = [policy.q_values(rows, noise=True) for _ in range(2)]
        assert np.abs(explored[0] - explored[1]).max() > 1e-4  # new noise on every forward
        greedy = [policy.q_values(rows) for _ in range(2)]
        np.testing.assert_array_equal(greedy[0], greedy[1])
        with torch.no_grad():
            np.testing.assert_allclose(greedy[0], policy.model(torch.from_numpy(rows), noise=False).numpy(), rtol=1e-5, atol=1e-5)
    actions = [policy.compute_actions(obs, explore=False)[0] for _ in range(3)]
    assert all(np.array_equal(a, actions[0]) for a in actions)
    # The noise buffers are not part of the weights: checkpoints and weight syncs carry only mu and sigma.
    assert not any(k.endswith(("eps_in", "eps_out")) for k in policy.get_weights())


def test_the_learner_draws_new_noise_for_every_gradient_step():
    config = {"noisy": True, "hiddens": [16], "model": {"fcnet_hiddens": [8]}, "rollout_fragment_length": 8,
              "train_batch_size": 8, "learning_starts": 0, "min_sample_timesteps_per_iteration": 8,
              "training_intensity": 4, "seed": 0}
    with DQN(config=config, env="CartPole-v1") as trainer:
        model = trainer.get_policy().model
        draws = []
        original = NoisyLinear.resample_

        def spy(layer):
            original(layer)
            if layer is model.advantage_head:
                draws.append(layer.eps_out.clone())

        NoisyLinear.resample_ = spy
        try:
            trainer.train()  # 8 sampled steps x 4 / 8 = 4 gradient steps
        finally:
            NoisyLinear.resample_ = original
        assert len(draws) == 4
        assert all(not torch.equal(a, b) for a, b in zip(draws, draws[1:]))
        target = trainer.get_learner().target_model.advantage_head.eps_out
        assert not torch.equal(target, draws[-1])  # the target network has noise of its own
        assert trainer.get_policy().model.advantage_head.weight_sigma.abs().sum() > 0
