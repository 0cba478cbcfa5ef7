"""Learners with named optimizers: any torch.optim class, per-optimizer lr, schedule and clipping, polyak targets.

The learner below is a DDPG-like actor and critic on a contextual bandit
(reward ``-(a - y)^2`` for the action ``a`` in context ``x``, ``y`` linear
in ``x``), written as a small subclass of the off-policy learner: the base
steps both optimizers, applies their schedules and clipping, checkpoints
them and moves the target network.
"""

from __future__ import annotations

import copy
import shutil
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from rltune.errors import ConfigError
from rltune.trainers import DQN, PPO
from rltune.trainers._config import TrainerSettings
from rltune.trainers.algorithms._algorithm import OffPolicyLearner
from rltune.trainers.learning._optimizers import OptimizerSpec
from rltune.trainers.learning._sgd_step import SGDStep
from rltune.trainers.policies._policy import Policy

from .reinforce import REINFORCELearner, REINFORCEPolicy

TAU = 0.25
CRITIC_CLIP = 0.05
ACTOR_SCHEDULE = [(0, 0.05), (100, 0.01)]
W_TRUE = np.array([0.5, -1.0, 2.0], np.float32)


class ActorCritic(nn.Module):
    """``forward(x, a=None) -> (actor(x), Q(x, a))``; without ``a`` the critic values the actor's action."""

    def __init__(self) -> None:
        super().__init__()
        self.actor = nn.Linear(3, 1)
        self.critic = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1))

    def forward(self, x: torch.Tensor, a: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        pi = self.actor(x)
        q = self.critic(torch.cat([x, pi if a is None else a], dim=-1)).squeeze(-1)
        return pi, q


class BanditPolicy(Policy):
    def make_model(self) -> nn.Module:
        return ActorCritic()


def actor_critic_losses(model, x, a, r):
    """Actor: maximise Q(x, actor(x)) (reads the critic); critic: regress Q(x, a) on r."""
    _, q_pi = model(x)
    _, q_data = model(x, a)
    return {"actor": -q_pi.mean(), "critic": F.mse_loss(q_data, r)}


class ActorCriticLearner(OffPolicyLearner):
    """Two optimizers of different classes and lrs (the actor's scheduled, the critic's clipped), a polyak target."""

    def optimizer_specs(self):
        model = self.policy.model
        return {
            "actor": OptimizerSpec(params=list(model.actor.parameters()), optimizer_class=torch.optim.SGD, lr=0.05,
                                   lr_schedule=ACTOR_SCHEDULE, options={"momentum": 0.9}),
            "critic": OptimizerSpec(params=list(model.critic.parameters()), optimizer_class=torch.optim.Adam, lr=1e-2,
                                    grad_clip=CRITIC_CLIP),
        }

    def frozen_modules(self):
        return None  # a bandit: no bootstrapped target

    def loss(self, model_fn, x, a, r, *, with_stats):
        losses = actor_critic_losses(model_fn, x, a, r)
        return losses, (torch.stack(list(losses.values())).detach() if with_stats else None)

    def update(self, batch, *, timestep=0):
        lrs = self.learning_rates(timestep)
        self.apply_lr(timestep)
        stats, grad_norm = self.sgd_step(*(torch.from_numpy(batch[k]) for k in ("obs", "actions", "rewards")))
        self.sync_target(TAU)
        actor_loss, critic_loss = stats.tolist()
        return {"actor_loss": actor_loss, "critic_loss": critic_loss, "cur_lr_actor": lrs["actor"],
                "cur_lr_critic": lrs["critic"], "grad_gnorm": float(grad_norm)}


def _learner(seed: int = 0) -> ActorCriticLearner:
    torch.manual_seed(seed)
    policy = BanditPolicy(gym.spaces.Box(-1.0, 1.0, (3,), np.float32), gym.spaces.Box(-3.0, 3.0, (1,), np.float32),
                          TrainerSettings(), seed=seed)
    return ActorCriticLearner(policy, policy.config, np.random.default_rng(seed))


def _batch(seed: int, rows: int = 64) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (rows, 3)).astype(np.float32)
    a = rng.uniform(-3, 3, (rows, 1)).astype(np.float32)
    return {"obs": x, "actions": a, "rewards": -((a[:, 0] - x @ W_TRUE) ** 2).astype(np.float32)}


def _weights(module: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def _reference_steps(model: nn.Module, batches, timesteps) -> None:
    """The same updates by hand: each loss's gradients for its own parameters, the critic's clipped, torch's optimizers."""
    actor = torch.optim.SGD(model.actor.parameters(), lr=0.05, momentum=0.9)
    critic = torch.optim.Adam(model.critic.parameters(), lr=1e-2)
    for batch, t in zip(batches, timesteps):
        actor.param_groups[0]["lr"] = float(np.interp(t, *zip(*ACTOR_SCHEDULE)))
        losses = actor_critic_losses(model, *(torch.from_numpy(batch[k]) for k in ("obs", "actions", "rewards")))
        actor_grads = torch.autograd.grad(losses["actor"], list(model.actor.parameters()), retain_graph=True)
        critic_grads = torch.autograd.grad(losses["critic"], list(model.critic.parameters()))
        for p, g in zip([*model.actor.parameters(), *model.critic.parameters()], [*actor_grads, *critic_grads]):
            p.grad = g
        torch.nn.utils.clip_grad_norm_(model.critic.parameters(), CRITIC_CLIP)
        actor.step()
        critic.step()


def test_two_optimizers_step_with_their_own_class_lr_schedule_and_clipping():
    learner = _learner()
    model = learner.policy.model
    reference = copy.deepcopy(model)
    batches, timesteps = [_batch(i) for i in range(3)], [0, 50, 100]
    initial = _weights(model)
    for batch, t in zip(batches, timesteps):
        stats = learner.update(batch, timestep=t)
    assert set(learner.optimizers) == {"actor", "critic"}
    assert isinstance(learner.optimizers["actor"], torch.optim.SGD) and isinstance(learner.optimizers["critic"], torch.optim.Adam)
    # The schedule applies to the actor's optimizer only.
    assert learner.optimizers["actor"].param_groups[0]["lr"] == pytest.approx(0.01) == stats["cur_lr_actor"]
    assert learner.optimizers["critic"].param_groups[0]["lr"] == 1e-2 == stats["cur_lr_critic"]
    assert stats["num_nonfinite_updates"] == 0
    # Both stepped: the actor's momentum buffers and the critic's Adam step count exist.
    actor_state = learner.optimizers["actor"].state_dict()["state"]
    assert all(s["momentum_buffer"] is not None for s in actor_state.values()) and len(actor_state) == 2
    assert {s["step"].item() for s in learner.optimizers["critic"].state_dict()["state"].values()} == {3.0}
    for name in ("actor", "critic"):
        assert any(not torch.equal(v, initial[k]) for k, v in _weights(model).items() if k.startswith(name))
    # Clipping is the critic's: its gradient was cut to CRITIC_CLIP, the actor's left as it was.
    norms = learner.sgd_step.last_grad_norms
    assert norms["critic"] > CRITIC_CLIP and norms["actor"] > CRITIC_CLIP
    assert torch.nn.utils.get_total_norm([p.grad for p in model.critic.parameters()]).item() == pytest.approx(CRITIC_CLIP, rel=1e-4)
    assert torch.nn.utils.get_total_norm([p.grad for p in model.actor.parameters()]).item() == pytest.approx(norms["actor"].item(), rel=1e-5)
    # Exactly these updates: the actor's loss, which reads the critic, put no gradient into the critic's optimizer.
    _reference_steps(reference, batches, timesteps)
    for key, value in _weights(reference).items():
        torch.testing.assert_close(_weights(model)[key], value, msg=lambda m, key=key: f"{key}: {m}")


def test_the_polyak_target_moves_by_exactly_tau_toward_the_online_weights():
    learner = _learner()
    with torch.no_grad():
        for p in learner.target_model.parameters():
            p.zero_()  # far from the online net, so that the move shows
    for i in range(3):
        target_before = _weights(learner.target_model)
        learner.update(_batch(i), timestep=i)
        online = _weights(learner.policy.model)
        for key, value in _weights(learner.target_model).items():
            torch.testing.assert_close(value, target_before[key] + TAU * (online[key] - target_before[key]))
    learner.sync_target()  # tau 1: a hard copy
    for key, value in _weights(learner.target_model).items():
        torch.testing.assert_close(value, _weights(learner.policy.model)[key], rtol=0, atol=0)


def test_an_optimizer_whose_loss_is_not_finite_skips_its_step_and_the_others_step():
    learner = _learner()
    batch = _batch(0)
    batch["rewards"][3] = np.nan  # the critic's loss only
    initial = _weights(learner.policy.model)
    stats = learner.update(batch)
    assert stats["num_nonfinite_updates"] == 1 and np.isnan(stats["critic_loss"]) and np.isfinite(stats["actor_loss"])
    after = _weights(learner.policy.model)
    assert all(torch.equal(after[k], v) for k, v in initial.items() if k.startswith("critic"))
    assert any(not torch.equal(after[k], v) for k, v in initial.items() if k.startswith("actor"))
    assert not learner.optimizers["critic"].state  # Adam never stepped: no moments, no step count


def test_a_checkpoint_round_trip_restores_both_optimizers_and_the_target():
    learner = _learner(seed=0)
    for i in range(2):
        learner.update(_batch(i), timestep=10 * i)
    values, tensors = learner.get_state()
    assert set(tensors["optimizers"]) == {"actor", "critic"}
    restored = _learner(seed=1)  # other weights and fresh optimizers
    restored.policy.model.load_state_dict(learner.policy.model.state_dict())  # weights are the trainer's to restore
    restored.set_state(copy.deepcopy(values), copy.deepcopy(tensors))
    for name, optimizer in learner.optimizers.items():
        saved, loaded = optimizer.state_dict(), restored.optimizers[name].state_dict()
        assert saved["param_groups"] == loaded["param_groups"]
        for pid, state in saved["state"].items():
            for key, value in state.items():
                torch.testing.assert_close(loaded["state"][pid][key], value)
    # Both go on alike: momentum, Adam's moments and step count, the target, all restored.
    for each in (learner, restored):
        each.update(_batch(7), timestep=30)
    for original, copied in [(learner.policy.model, restored.policy.model), (learner.target_model, restored.target_model)]:
        for key, value in _weights(original).items():
            torch.testing.assert_close(_weights(copied)[key], value, rtol=0, atol=0, msg=lambda m, key=key: f"{key}: {m}")


def test_a_checkpoint_of_other_optimizers_is_refused_naming_them():
    learner = _learner()
    _, tensors = learner.get_state()
    with pytest.raises(ValueError, match=r"optimizers \['default'\] this learner does not have"):
        learner.set_state({}, {"optimizers": {"default": tensors["optimizers"]["actor"]}})
    with pytest.raises(ValueError, match="the checkpoint holds one optimizer"):
        learner.set_state({}, {"optimizer": tensors["optimizers"]["actor"]})


def test_bad_optimizer_specs_are_one_config_error_naming_each():
    class Bad(ActorCriticLearner):
        def optimizer_specs(self):
            model = self.policy.model
            return {
                "actor": OptimizerSpec(params=list(model.actor.parameters()), lr=-1.0),
                "critic": OptimizerSpec(params=[*model.critic.parameters(), model.actor.weight], lr=1e-3, grad_clip=0),
                "alpha": OptimizerSpec(params=[torch.zeros(1, requires_grad=True)], lr=1e-3, optimizer_class=dict),
            }

    policy = _learner().policy
    with pytest.raises(ConfigError) as info:
        Bad(policy, policy.config, np.random.default_rng(0))
    message = str(info.value)
    assert "Bad.optimizer_specs()" in message
    for problem in ("optimizers.actor.lr: must be a finite number > 0", "optimizers.critic.grad_clip",
                    "optimizers.alpha.optimizer_class: must be a torch.optim.Optimizer subclass"):
        assert problem in message


def test_unknown_optimizer_options_are_a_config_error_naming_the_optimizer():
    class Typo(ActorCriticLearner):
        def optimizer_specs(self):
            return {**super().optimizer_specs(),
                    "critic": OptimizerSpec(params=list(self.policy.model.critic.parameters()), lr=1e-3, options={"betta": 0.9})}

    policy = _learner().policy
    with pytest.raises(ConfigError, match="optimizers.critic: Adam"):
        Typo(policy, policy.config, np.random.default_rng(0))


class RMSpropREINFORCELearner(REINFORCELearner):
    """One optimizer over the whole model, of another class: the flat step, eager."""

    def optimizer_specs(self):
        return {"rmsprop": OptimizerSpec(lr=1e-2, optimizer_class=torch.optim.RMSprop, grad_clip=1.0)}


def _reinforce_batch(policy) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return policy.postprocess_trajectory({
        "obs": rng.normal(size=(20, 1, 4)).astype(np.float32), "actions": rng.integers(0, 2, (20, 1)),
        "rewards": rng.normal(size=(20, 1)).astype(np.float32), "terminateds": np.zeros((20, 1), bool),
        "truncateds": np.zeros((20, 1), bool),
    })


@pytest.mark.parametrize("compile_setting", ["auto", False])
def test_one_optimizer_of_another_class_over_the_model_runs_on_the_flat_step_eagerly(compile_setting):
    cfg = TrainerSettings(torch_compile_learner=compile_setting, model={"fcnet_hiddens": [8]})
    policy = REINFORCEPolicy(gym.spaces.Box(-1.0, 1.0, (4,), np.float32), gym.spaces.Discrete(2), cfg, seed=0)
    learner = RMSpropREINFORCELearner(policy, cfg, np.random.default_rng(0))
    assert isinstance(learner.sgd_step, SGDStep) and learner.flat_params is not None and not learner.sgd_step.compiled
    assert isinstance(learner.optimizer, torch.optim.RMSprop) and learner.optimizer is learner.optimizers["rmsprop"]
    before = learner.flat_params.param.detach().clone()
    stats = learner.update(_reinforce_batch(policy))
    assert stats["cur_lr"] == 1e-2 and not torch.equal(before, learner.flat_params.param.detach())
    assert learner.get_state()[1]["optimizers"]["rmsprop"]["state"][0]["square_avg"].shape == before.shape


def test_compiling_an_optimizer_the_compiled_step_cannot_run_is_a_config_error_naming_the_key():
    cfg = TrainerSettings(torch_compile_learner=True, model={"fcnet_hiddens": [8]})
    policy = REINFORCEPolicy(gym.spaces.Box(-1.0, 1.0, (4,), np.float32), gym.spaces.Discrete(2), cfg, seed=0)
    with pytest.raises(ConfigError, match="torch_compile_learner: a compiled learner step runs plain Adam, this learner's optimizer is RMSprop"):
        RMSpropREINFORCELearner(policy, cfg, np.random.default_rng(0))


@pytest.mark.parametrize("trainer_cls, config", [
    (PPO, {"train_batch_size": 64, "sgd_minibatch_size": 32, "num_sgd_iter": 1, "lr_schedule": [[0, 1e-3], [128, 0.0]]}),
    (DQN, {"train_batch_size": 8, "learning_starts": 0, "min_sample_timesteps_per_iteration": 8, "lr": 1e-3}),
], ids=["PPO", "DQN"])
def test_ppo_and_dqn_have_one_default_optimizer_on_the_flat_step_checkpointed_by_name(trainer_cls, config, tmp_path):
    config = {**config, "model": {"fcnet_hiddens": [16]}, "seed": 0, "grad_clip": 0.5}
    with trainer_cls(config, env="CartPole-v1") as trainer:
        learner = trainer.get_learner()
        assert list(learner.optimizers) == ["default"] and isinstance(learner.optimizer, torch.optim.Adam)
        assert isinstance(learner.sgd_step, SGDStep) and learner.sgd_step.grad_clip == 0.5
        assert learner.optimizer.param_groups[0]["params"] == [learner.flat_params.param]
        trainer.train()
        path = trainer.save(tmp_path / "ck")
        saved = {k: v.clone() for k, v in learner.optimizer.state_dict()["state"][0].items()}
        lr = learner.optimizer.param_groups[0]["lr"]
    assert list(torch.load(Path(path) / "state.pt", weights_only=False)["algorithm"]["optimizers"]) == ["default"]
    with trainer_cls.from_checkpoint(path) as restored:
        state = restored.get_learner().optimizers["default"].state_dict()
        assert state["param_groups"][0]["lr"] == lr
        for key, value in state["state"][0].items():
            torch.testing.assert_close(value, saved[key])


DATA = Path(__file__).with_name("data")


@pytest.mark.parametrize("name, trainer_cls", [("ppo_format2", PPO), ("dqn_format2", DQN)])
def test_a_checkpoint_written_before_named_optimizers_restores_the_default_one(name, trainer_cls, tmp_path):
    """``data/*_format2`` hold one ``optimizer`` entry: it becomes the ``default`` optimizer's state, saved by name again."""
    path = shutil.copytree(DATA / name, tmp_path / "old")
    saved = torch.load(path / "state.pt", weights_only=False)["algorithm"]["optimizer"]["state"][0]
    with trainer_cls.from_checkpoint(path) as trainer:
        for key, value in trainer.get_learner().optimizers["default"].state_dict()["state"][0].items():
            torch.testing.assert_close(value, saved[key])
        again = trainer.save(tmp_path / "new")
    tensors = torch.load(Path(again) / "state.pt", weights_only=False)["algorithm"]
    assert "optimizer" not in tensors
    torch.testing.assert_close(tensors["optimizers"]["default"]["state"][0]["exp_avg"], saved["exp_avg"])
