"""The learner step: compiled (torch_compile_learner) and eager give the same updates and optimizer state.

Each compiled case costs one torch.compile (seconds with a warm inductor
cache, 10-20 s with a cold one), so the cases are few and each checks much.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rltune.errors import ConfigError
from rltune.trainers import DQN, PPO
from rltune.trainers.sampling._sample_batch import ACTIONS, NEW_OBS, OBS, REWARDS, TERMINATEDS
from rltune.trainers.algorithms._dqn import DISCOUNTS

PPO_CONFIG = {
    "num_envs_per_worker": 4,
    "rollout_fragment_length": 16,
    "train_batch_size": 64,
    "sgd_minibatch_size": 32,  # two minibatches per epoch: shuffling and per-minibatch normalisation
    "num_sgd_iter": 3,
    "lr": 3e-3,
    "entropy_coeff": 0.01,  # every optional term of the loss in the graph
    "kl_coeff": 0.2,
    "vf_clip_param": 5.0,
    "grad_clip": 0.5,
    "model": {"fcnet_hiddens": [32, 32]},
    "seed": 3,
}


def _weights(trainer):
    return {k: v.detach().clone() for k, v in trainer.get_policy().model.state_dict().items()}


def _adam_state(trainer):
    return {k: v.clone() for k, v in trainer.get_learner().optimizer.state_dict()["state"][0].items()}


def _assert_close(a: dict, b: dict, *, atol: float) -> None:
    assert a.keys() == b.keys()
    for key in a:
        torch.testing.assert_close(a[key], b[key], atol=atol, rtol=1e-4, msg=lambda m, key=key: f"{key}: {m}")


def _learn_twice(trainer_class, config, env, learn):
    """Run ``learn`` on an eager and a compiled trainer built alike; their weights, Adam states and stats."""
    out = []
    for compiled in (False, True):
        trainer = trainer_class(config={**config, "torch_compile_learner": compiled}, env=env)
        try:
            assert trainer.get_learner().sgd_step.compiled is compiled
            stats = learn(trainer)
            out.append((_weights(trainer), _adam_state(trainer), stats))
        finally:
            trainer.stop()
    return out


@pytest.mark.parametrize("env", ["CartPole-v1", "Pendulum-v1"], ids=["discrete", "box"])
def test_compiled_ppo_updates_as_the_eager_one(env):
    def learn(trainer):
        # Two iterations: the second starts from Adam state written by the first.
        trainer.train()
        return trainer.train()["info"]["learner"]["default_policy"]

    (w_eager, adam_eager, s_eager), (w_compiled, adam_compiled, s_compiled) = _learn_twice(PPO, PPO_CONFIG, env, learn)
    before = PPO(config={**PPO_CONFIG}, env=env)
    try:
        initial = _weights(before)
    finally:
        before.stop()
    assert any(not torch.equal(initial[k], w_eager[k]) for k in initial)  # training moved the weights
    _assert_close(w_eager, w_compiled, atol=1e-5)
    _assert_close(adam_eager, adam_compiled, atol=1e-6)
    assert adam_compiled["step"].item() == 2 * 3 * 2  # iterations x epochs x minibatches
    for key in ("total_loss", "policy_loss", "vf_loss", "entropy", "kl", "clip_fraction", "grad_gnorm"):
        assert s_compiled[key] == pytest.approx(s_eager[key], rel=1e-3, abs=1e-5), key
    assert s_compiled["num_sgd_steps"] == s_eager["num_sgd_steps"] == 6


@pytest.mark.parametrize("double_q", [False, True], ids=["fixed targets", "double q, noisy head"])
def test_compiled_dqn_updates_as_the_eager_one(double_q):
    # The double-Q case runs RLlib's noisy Q head: the noise buffers, resampled in place before
    # every step, are inputs of the compiled step (the same draws in both runs: one torch seed).
    config = {
        "num_envs_per_worker": 1,
        "rollout_fragment_length": 8,
        "train_batch_size": 16,
        "learning_starts": 0,
        "min_sample_timesteps_per_iteration": 1,
        "double_q": double_q,
        "dueling": True,
        "hiddens": [16] if double_q else [],
        "noisy": double_q,
        "lr": 1e-2,
        "model": {"fcnet_hiddens": [32]},
        "seed": 0,
    }
    rng = np.random.default_rng(0)
    rows = {
        OBS: rng.normal(size=(40, 4)).astype(np.float32),
        ACTIONS: rng.integers(0, 2, 40),
        REWARDS: rng.normal(size=40).astype(np.float32),
        NEW_OBS: rng.normal(size=(40, 4)).astype(np.float32),
        TERMINATEDS: rng.random(40) < 0.2,
        DISCOUNTS: np.full(40, 0.9, np.float32),
    }

    def learn(trainer):
        trainer.algorithm.buffers["default_policy"].set_state(rows)
        trainer.rng.bit_generator.state = np.random.default_rng(1).bit_generator.state  # the generator the learners share
        first = trainer.algorithm._updates(5)
        trainer.get_learner().target_model.load_state_dict(trainer.get_policy().model.state_dict())  # a target sync between rounds
        return first, trainer.algorithm._updates(5)

    (w_eager, adam_eager, s_eager), (w_compiled, adam_compiled, s_compiled) = _learn_twice(DQN, config, "CartPole-v1", learn)
    _assert_close(w_eager, w_compiled, atol=1e-5)
    _assert_close(adam_eager, adam_compiled, atol=1e-6)
    assert adam_compiled["step"].item() == 10
    for eager_round, compiled_round in zip(s_eager, s_compiled):
        for key in ("total_loss", "mean_q", "mean_td_error"):
            assert compiled_round[key] == pytest.approx(eager_round[key], rel=1e-3, abs=1e-6), key


def test_the_public_torch_compile_path_updates_as_the_eager_one(monkeypatch):
    # The tests above run the adapter's trace (_torch_compat.py) on the torch release it was written
    # for; this is the path any other release takes: torch.compile with inductor, PPO's and DQN's losses.
    from rltune.trainers.learning._sgd_step import SGDStep

    monkeypatch.setattr(SGDStep, "private_trace", False)

    def learn_ppo(trainer):
        trainer.train()
        return trainer.train()["info"]["learner"]["default_policy"]

    (w_eager, adam_eager, s_eager), (w_compiled, adam_compiled, s_compiled) = _learn_twice(PPO, PPO_CONFIG, "CartPole-v1", learn_ppo)
    _assert_close(w_eager, w_compiled, atol=1e-5)
    _assert_close(adam_eager, adam_compiled, atol=1e-6)
    assert s_compiled["total_loss"] == pytest.approx(s_eager["total_loss"], rel=1e-3, abs=1e-5)

    dqn_config = {"rollout_fragment_length": 8, "train_batch_size": 16, "learning_starts": 0, "min_sample_timesteps_per_iteration": 16,
                  "lr": 1e-2, "model": {"fcnet_hiddens": [16]}, "hiddens": [16], "seed": 0}

    def learn_dqn(trainer):
        trainer.train()
        return trainer.train()["info"]["learner"]["default_policy"]

    (w_eager, adam_eager, s_eager), (w_compiled, adam_compiled, s_compiled) = _learn_twice(DQN, dqn_config, "CartPole-v1", learn_dqn)
    assert adam_compiled["step"].item() > 0
    _assert_close(w_eager, w_compiled, atol=1e-5)
    _assert_close(adam_eager, adam_compiled, atol=1e-6)


def test_a_compiled_trainers_checkpoint_continues_in_an_eager_trainer(tmp_path):
    compiled = PPO(config={**PPO_CONFIG, "torch_compile_learner": True}, env="CartPole-v1")
    try:
        compiled.train()
        path = compiled.save(tmp_path / "ckpt")
        saved_weights, saved_adam = _weights(compiled), _adam_state(compiled)
    finally:
        compiled.stop()
    eager = PPO(config={**PPO_CONFIG, "torch_compile_learner": False}, env="CartPole-v1")
    try:
        eager.restore(path)
        _assert_close(_weights(eager), saved_weights, atol=0.0)
        _assert_close(_adam_state(eager), saved_adam, atol=0.0)
        eager.train()
        assert _adam_state(eager)["step"].item() == 2 * 6  # Adam's step count goes on
        assert any(not torch.equal(saved_weights[k], w) for k, w in _weights(eager).items())
    finally:
        eager.stop()


def test_an_unknown_compile_backend_is_a_config_error_naming_the_closest():
    with pytest.raises(ConfigError, match=r"torch_compile_learner_dynamo_backend: unknown backend 'inductr'; did you mean 'inductor'\?"):
        PPO(config={**PPO_CONFIG, "torch_compile_learner": True, "torch_compile_learner_dynamo_backend": "inductr"}, env="CartPole-v1")


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({"torch_compile_learner_dynamo_mode": "max-autotun"}, r"unknown mode 'max-autotun'; did you mean 'max-autotune'\?"),
        (
            {"torch_compile_learner_dynamo_backend": "eager", "torch_compile_learner_dynamo_mode": "max-autotune"},
            r"modes are inductor's; backend 'eager' takes none",
        ),
    ],
)
def test_a_compile_mode_inductor_does_not_have_is_a_config_error(keys, message):
    with pytest.raises(ConfigError, match=rf"torch_compile_learner_dynamo_mode: {message}"):
        PPO(config={**PPO_CONFIG, "torch_compile_learner": True, **keys}, env="CartPole-v1")


def test_a_backend_that_fails_is_one_config_error_on_the_first_step():
    import torch._dynamo

    @torch._dynamo.register_backend(name="rltune_test_failing_backend")
    def failing(gm, example_inputs):  # noqa: ARG001 - the backend interface
        raise RuntimeError("no C++ compiler here")

    trainer = PPO(
        config={**PPO_CONFIG, "torch_compile_learner": True, "torch_compile_learner_dynamo_backend": "rltune_test_failing_backend"},
        env="CartPole-v1",
    )
    try:
        before = _weights(trainer)
        with pytest.raises(ConfigError, match=r"torch_compile_learner: compiling the learner step with backend 'rltune_test_failing_backend' failed.*no C\+\+ compiler here.*torch_compile_learner: False"):
            trainer.train()
        _assert_close(_weights(trainer), before, atol=0.0)  # nothing was half-applied
    finally:
        trainer.stop()


class _Holder:
    """A Python flag the loss below branches on, as PPO's loss does on its coefficients."""

    with_l2 = False


class _Scale(torch.nn.Module):
    """Scales its input by a buffer (as an observation normaliser would)."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.register_buffer("scale", torch.ones(size))

    def forward(self, x):
        return x * self.scale


def _tiny_step(compile_backend, holder, frozen):
    from rltune.trainers.learning._flat_params import FlatParameters
    from rltune.trainers.policies._models import make_adam
    from rltune.trainers.learning._sgd_step import SGDStep

    torch.manual_seed(0)
    model = torch.nn.Sequential(_Scale(3), torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    flat = FlatParameters(model)
    optimizer = make_adam([flat.param], lr=1e-2)

    def loss_fn(model_fn, x, y, scale, *, with_stats, target_fn):
        err = model_fn(x) - y - target_fn(x).detach()
        loss = scale * err.pow(2).mean()
        if holder.with_l2:
            loss = loss + 0.5 * model_fn(x).pow(2).mean()
        return loss, loss.detach().reshape(1)

    step = SGDStep(
        model, flat, optimizer, loss_fn, grad_clip=1.0, frozen_modules={"target_fn": frozen},
        trace_key=lambda: holder.with_l2, compile_backend=compile_backend,
    )
    return model, step


def test_a_compiled_step_follows_its_trace_key_buffers_frozen_modules_and_strides():
    # The "eager" backend runs the traced aten graph as it is: what is checked here is the
    # tracing (what becomes an input, what a constant), not inductor.
    rng = torch.Generator().manual_seed(1)
    x, y = torch.randn(16, 3, generator=rng), torch.randn(16, 2, generator=rng)
    runs = []
    for backend in (None, "eager"):
        holder = _Holder()
        frozen = torch.nn.Linear(3, 2)
        torch.nn.init.zeros_(frozen.weight)
        torch.nn.init.zeros_(frozen.bias)
        model, step = _tiny_step(backend, holder, frozen)
        losses = []
        for i in range(6):
            if i == 2:
                holder.with_l2 = True  # a new term: the compiled step must be traced again
            if i == 3:
                model[0].scale.fill_(2.0)  # a buffer of the model: read on every call, not baked in
            if i == 4:
                with torch.no_grad():
                    frozen.weight.fill_(0.5)  # a target sync: read on the next call, not baked in
            # The last call's input has the same shape but other strides: traced again, not misread.
            inputs = x if i < 5 else x.t().contiguous().t()
            stats, grad_norm = step(inputs, y, torch.tensor(1.0 + i), with_stats=True)
            losses.append(stats.item())
        runs.append((losses, {k: v.detach().clone() for k, v in model.state_dict().items()}))
    (eager_losses, eager_weights), (compiled_losses, compiled_weights) = runs
    assert len(step._compiled_steps) == 3  # two values of the trace key, then new strides
    assert compiled_losses == pytest.approx(eager_losses, rel=1e-5)
    _assert_close(compiled_weights, eager_weights, atol=1e-6)


def test_a_loss_that_reads_a_module_directly_is_a_clear_error_when_compiled():
    model, step = _tiny_step("eager", _Holder(), torch.nn.Linear(3, 2))
    step.loss_fn = lambda model_fn, x, y, s, *, with_stats, target_fn: (model[1].weight.pow(2).sum(), None)
    with pytest.raises(ConfigError, match="reads a tensor that is not an input of the step"):
        step(torch.zeros(4, 3), torch.zeros(4, 2), torch.tensor(1.0))


def test_a_compiled_step_refuses_python_values_it_would_bake_in():
    _, step = _tiny_step("eager", _Holder(), torch.nn.Linear(3, 2))
    with pytest.raises(TypeError, match="takes tensors only.*'float'"):
        step(torch.zeros(4, 3), torch.zeros(4, 2), 1.0)
    with pytest.raises(TypeError, match="takes tensors only.*'ndarray'"):
        step(torch.zeros(4, 3), np.zeros((4, 2), np.float32), torch.tensor(1.0))
