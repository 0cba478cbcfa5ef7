"""torch_compile_learner: auto (the default) compiles the learner step only where the compile pays.

The compiles here use the 'eager' backend (it runs the traced graph as it
is): what is checked is when auto switches and that training goes on
exactly, not inductor.
"""

from __future__ import annotations

import pytest
import torch

from rltune.errors import ConfigError
from rltune.trainers import PPO
from rltune.trainers.learning import _compile_auto
from rltune.trainers.learning._flat_params import FlatParameters
from rltune.trainers.policies._models import make_adam
from rltune.trainers.learning._sgd_step import SGDStep

CONFIG = {
    "num_envs_per_worker": 2,
    "rollout_fragment_length": 16,
    "train_batch_size": 32,
    "sgd_minibatch_size": 16,
    "num_sgd_iter": 3,  # 6 SGD steps per iteration
    "lr": 3e-3,
    "model": {"fcnet_hiddens": [16]},
    "seed": 0,
}


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """A fresh, empty inductor cache: every compile is cold."""
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    return tmp_path / "inductor"


def test_auto_is_the_default_and_a_short_run_stays_eager(cache_dir):
    trainer = PPO(config=CONFIG, env="CartPole-v1")
    try:
        step = trainer.get_learner().sgd_step
        assert trainer.config["torch_compile_learner"] == "auto"
        assert step.compile_backend == "inductor" and not step.compiled
        trainer.train()
        trainer.train()
        assert not step.compiled and step._compiled_steps == {}
        assert step._auto.steps == 12 and step._auto.threshold == _compile_auto.COLD_STEPS
    finally:
        trainer.stop()


def test_auto_without_the_cxx_compiler_is_eager_for_the_whole_run(cache_dir, monkeypatch):
    monkeypatch.setenv("CXX", "rltune-test-no-such-compiler")
    monkeypatch.setattr(_compile_auto, "COLD_STEPS", 1)
    trainer = PPO(config={**CONFIG, "torch_compile_learner": "auto"}, env="CartPole-v1")
    try:
        step = trainer.get_learner().sgd_step
        assert step.compile_backend is None
        trainer.train()
        assert not step.compiled
    finally:
        trainer.stop()
    # True still means compile (and fail clearly without a compiler); a bad backend is refused whatever the machine.
    with pytest.raises(ConfigError, match="unknown backend 'inductr'"):
        PPO(config={**CONFIG, "torch_compile_learner_dynamo_backend": "inductr"}, env="CartPole-v1")


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_torch_compile_learner_is_true_false_or_auto(value):
    with pytest.raises(ConfigError, match=r"torch_compile_learner: must be true, false or 'auto'"):
        PPO(config={**CONFIG, "torch_compile_learner": value}, env="CartPole-v1")


def _weights(trainer):
    return {k: v.detach().clone() for k, v in trainer.get_policy().model.state_dict().items()}


def test_auto_switches_cold_then_warm_and_training_goes_on_exactly(cache_dir, monkeypatch):
    monkeypatch.setattr(_compile_auto, "COLD_STEPS", 4)
    monkeypatch.setattr(_compile_auto, "WARM_STEPS", 2)
    config = {**CONFIG, "torch_compile_learner_dynamo_backend": "eager", "entropy_coeff": 0.01}
    runs = {}
    for name, setting in (("eager", False), ("cold", "auto"), ("warm", "auto")):
        trainer = PPO(config={**config, "torch_compile_learner": setting}, env="CartPole-v1")
        try:
            step = trainer.get_learner().sgd_step
            trainer.train()  # cold: switches at the 4th step, the 5th and 6th take this update's floats eagerly
            if name != "eager":
                assert step.compiled and step._auto is None
            assert step._compiled_steps == {}
            trainer.train()  # compiled from here
            assert len(step._compiled_steps) == (0 if name == "eager" else 1)
            runs[name] = _weights(trainer)
        finally:
            trainer.stop()
        if name == "cold":
            assert list((cache_dir / "rltune_compiled_steps").iterdir())  # the compile is noted: warm next time
    for name in ("cold", "warm"):
        for key, value in runs["eager"].items():
            torch.testing.assert_close(runs[name][key], value, atol=1e-5, rtol=1e-4)


def test_the_warm_threshold_applies_to_a_step_compiled_before(cache_dir, monkeypatch):
    monkeypatch.setattr(_compile_auto, "COLD_STEPS", 5)
    monkeypatch.setattr(_compile_auto, "WARM_STEPS", 2)
    x, y = torch.randn(8, 3), torch.randn(8, 1)

    def build():
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
        flat = FlatParameters(model)

        def loss(model_fn, a, b, *, with_stats):
            value = (model_fn(a) - b).pow(2).mean()
            return value, value.detach().reshape(1)

        return SGDStep(model, flat, make_adam([flat.param], lr=1e-2), loss, grad_clip=None, compile_backend="eager", auto_compile=True)

    counts = []
    for _ in range(2):  # cold, then warm: the first compile noted the step in the cache
        step = build()
        calls = 0
        while not step.compiled:
            step(x, y)
            calls += 1
        counts.append(calls)
        step(x, y)
    assert counts == [5, 2]


def test_a_step_auto_cannot_compile_trains_on_eagerly(cache_dir, monkeypatch):
    monkeypatch.setattr(_compile_auto, "COLD_STEPS", 2)
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    flat = FlatParameters(model)

    def loss(model_fn, a, *, with_stats):  # reads the model directly: not compilable
        value = (model_fn(a) + model.weight.sum()).pow(2).mean()
        return value, value.detach().reshape(1)

    step = SGDStep(model, flat, make_adam([flat.param], lr=1e-2), loss, grad_clip=None, compile_backend="eager", auto_compile=True)
    x = torch.randn(4, 3)
    for _ in range(4):
        step(x)
    assert step.compile_backend is None and not step.compiled
    assert step.optimizer.state[flat.param]["step"].item() == 4  # every step was taken


def test_auto_leaves_an_optimizer_a_compiled_step_cannot_run_eager():
    model = torch.nn.Linear(3, 1)
    flat = FlatParameters(model)
    optimizer = torch.optim.Adam([flat.param], amsgrad=True)
    loss = lambda model_fn, a, *, with_stats: (model_fn(a).pow(2).mean(), None)  # noqa: E731
    assert SGDStep(model, flat, optimizer, loss, grad_clip=None, compile_backend="inductor", auto_compile=True).compile_backend is None
    with pytest.raises(ValueError, match="amsgrad"):
        SGDStep(model, flat, optimizer, loss, grad_clip=None, compile_backend="inductor")
