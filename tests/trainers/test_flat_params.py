"""FlatParameters: one flat tensor behind a model's parameters trains exactly like the parameters themselves."""

from __future__ import annotations

import copy

import pytest
import torch

from rltune.trainers._config import ModelConfig
from rltune.trainers.learning._flat_params import FlatParameters
from rltune.trainers.policies._models import ActorCriticModel, make_adam


def _model() -> ActorCriticModel:
    torch.manual_seed(0)
    return ActorCriticModel(4, 2, ModelConfig(fcnet_hiddens=[16, 16]))


def _loss(model: ActorCriticModel, obs: torch.Tensor) -> torch.Tensor:
    dist_inputs, values = model(obs)
    return dist_inputs.pow(2).mean() + (values - 1.0).pow(2).mean()


def _steps(model, optimizer, zero_grad, clip, batches) -> None:
    for obs in batches:
        zero_grad()
        _loss(model, obs).backward()
        clip()
        optimizer.step()


def test_training_through_the_flat_tensor_matches_per_parameter_adam_and_clipping():
    batches = [torch.randn(32, 4, generator=torch.Generator().manual_seed(i)) for i in range(5)]
    plain = _model()
    flat_model = copy.deepcopy(plain)
    plain_opt = make_adam(plain.parameters(), lr=1e-2)
    _steps(plain, plain_opt, lambda: plain_opt.zero_grad(set_to_none=True),
           lambda: torch.nn.utils.clip_grad_norm_(plain.parameters(), 0.5), batches)
    flat = FlatParameters(flat_model)
    flat_opt = make_adam([flat.param], lr=1e-2)
    _steps(flat_model, flat_opt, flat.zero_grad, lambda: flat.clip_grad_norm_(0.5), batches)
    for (name, a), b in zip(plain.named_parameters(), flat_model.parameters()):
        torch.testing.assert_close(a, b, msg=name)
    # The model's parameters are still the flat tensor's views after training.
    flat.param.data.zero_()
    assert all((p == 0).all() for p in flat_model.parameters())


def test_loading_weights_writes_into_the_flat_tensor():
    model = _model()
    flat = FlatParameters(model)
    other = _model()
    with torch.no_grad():
        for p in other.parameters():
            p.add_(1.0)
    model.load_state_dict(other.state_dict())
    expected = torch.cat([p.detach().reshape(-1) for p in other.parameters()])
    torch.testing.assert_close(flat.param.detach(), expected)


def test_gradients_land_in_the_flat_gradient_and_zero_grad_clears_them():
    model = _model()
    flat = FlatParameters(model)
    _loss(model, torch.randn(8, 4)).backward()
    assert flat.param.grad.abs().sum() > 0
    torch.testing.assert_close(flat.param.grad, torch.cat([p.grad.reshape(-1) for p in model.parameters()]))
    flat.zero_grad()
    assert all(p.grad is not None and (p.grad == 0).all() for p in model.parameters())


def test_an_optimizer_state_of_per_parameter_tensors_converts_and_continues_the_same():
    """Checkpoints written before the flat tensor hold Adam's moments per parameter."""
    batches = [torch.randn(32, 4, generator=torch.Generator().manual_seed(i)) for i in range(4)]
    plain = _model()
    plain_opt = make_adam(plain.parameters(), lr=1e-2)
    _steps(plain, plain_opt, lambda: plain_opt.zero_grad(set_to_none=True), lambda: None, batches[:2])
    saved_weights, saved_opt = copy.deepcopy(plain.state_dict()), copy.deepcopy(plain_opt.state_dict())

    restored = _model()
    restored.load_state_dict(saved_weights)
    flat = FlatParameters(restored)
    flat_opt = make_adam([flat.param], lr=1e-2)
    flat_opt.load_state_dict(flat.optimizer_state_from_per_parameter(saved_opt))
    _steps(plain, plain_opt, lambda: plain_opt.zero_grad(set_to_none=True), lambda: None, batches[2:])
    _steps(restored, flat_opt, flat.zero_grad, lambda: None, batches[2:])
    for a, b in zip(plain.parameters(), restored.parameters()):
        torch.testing.assert_close(a, b)


def test_a_flat_optimizer_state_is_kept_as_it_is():
    model = _model()
    flat = FlatParameters(model)
    opt = make_adam([flat.param], lr=1e-2)
    _steps(model, opt, flat.zero_grad, lambda: None, [torch.randn(8, 4)])
    state = opt.state_dict()
    assert flat.optimizer_state_from_per_parameter(state) is state


def test_frozen_parameters_stay_out_of_the_flat_tensor():
    model = _model()
    model.pi_head.requires_grad_(False)
    frozen = model.pi_head.weight.detach().clone()
    flat = FlatParameters(model)
    assert flat.param.numel() == sum(p.numel() for p in model.parameters()) - sum(p.numel() for p in model.pi_head.parameters())
    opt = make_adam([flat.param], lr=1e-2)
    _steps(model, opt, flat.zero_grad, lambda: None, [torch.randn(8, 4)])
    torch.testing.assert_close(model.pi_head.weight, frozen)


def test_a_model_without_trainable_parameters_is_refused():
    with pytest.raises(ValueError, match="no trainable parameters"):
        FlatParameters(torch.nn.Identity())


def test_an_old_state_where_some_parameters_never_had_a_gradient_converts_with_zero_moments():
    """With use_critic: False the value net never gets a gradient: older checkpoints hold no Adam state for it."""
    model = _model()
    opt = make_adam(model.parameters(), lr=1e-2)
    opt.zero_grad(set_to_none=True)
    dist_inputs, _ = model(torch.randn(8, 4))
    dist_inputs.pow(2).mean().backward()  # the value net's parameters keep grad None
    opt.step()
    saved = opt.state_dict()
    stepped = [i for i, p in enumerate(model.parameters()) if p.grad is not None]
    assert 0 < len(saved["state"]) == len(stepped) < len(list(model.parameters()))

    flat = FlatParameters(model)
    state = flat.optimizer_state_from_per_parameter(saved)
    moments = state["state"][0]["exp_avg"]
    assert moments.numel() == flat.param.numel()
    offset = 0
    for i, p in enumerate(model.parameters()):
        part = moments[offset : offset + p.numel()]
        if i in stepped:
            torch.testing.assert_close(part, saved["state"][i]["exp_avg"].reshape(-1))
        else:
            assert (part == 0).all()
        offset += p.numel()
    make_adam([flat.param], lr=1e-2).load_state_dict(state)


def test_zero_grad_refuses_gradients_detached_from_the_flat_tensor():
    model = _model()
    flat = FlatParameters(model)
    opt = make_adam([flat.param], lr=1e-2)
    opt.zero_grad()  # sets the flat gradient to None: the model's grads no longer reach the optimizer
    with pytest.raises(RuntimeError, match="no longer live in the flat tensor"):
        flat.zero_grad()


@pytest.mark.parametrize("max_norm", [0.05, 1e6])  # clipped, and left as it is
def test_clip_grad_norm_matches_torchs(max_norm):
    plain = _model()
    flat_model = copy.deepcopy(plain)
    flat = FlatParameters(flat_model)
    obs = torch.randn(32, 4, generator=torch.Generator().manual_seed(0))
    _loss(plain, obs).backward()
    flat.zero_grad()
    _loss(flat_model, obs).backward()
    expected_norm = torch.nn.utils.clip_grad_norm_(plain.parameters(), max_norm)
    norm = flat.clip_grad_norm_(max_norm)
    torch.testing.assert_close(norm, expected_norm)
    assert (norm > max_norm) == (max_norm == 0.05)
    for (name, a), b in zip(plain.named_parameters(), flat_model.parameters()):
        torch.testing.assert_close(a.grad, b.grad, msg=name)


def test_an_optimizer_state_of_another_shape_is_refused_before_loading():
    model = _model()
    flat = FlatParameters(model)
    opt = make_adam([flat.param], lr=1e-2)
    flat.zero_grad()
    _loss(model, torch.randn(8, 4)).backward()
    opt.step()
    saved = copy.deepcopy(opt.state_dict())  # state_dict() shares the optimizer's own state dicts
    before = {k: v.clone() for k, v in opt.state_dict()["state"][0].items()}
    saved["state"][0]["exp_avg"] = torch.zeros(3)
    with pytest.raises(ValueError, match="'exp_avg' has shape \\(3,\\)"):
        flat.load_optimizer_state(make_adam([flat.param], lr=1e-2), saved)
    fresh = make_adam([flat.param], lr=1e-2)
    flat.load_optimizer_state(fresh, opt.state_dict())  # the intact state loads
    for key, value in fresh.state_dict()["state"][0].items():
        torch.testing.assert_close(value, before[key])
