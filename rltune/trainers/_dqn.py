"""DQN (Mnih et al. 2015) with double Q (van Hasselt et al. 2016), dueling heads and n-step returns.

One training iteration repeats, until ``min_sample_timesteps_per_iteration``
env steps were sampled: sample one round, add it to the replay buffer, and
once ``learning_starts`` steps exist, sync the target network when due and
take gradient steps on minibatches of ``train_batch_size`` transitions::

    y    = r^(n) + gamma^n * (1 - terminated) * Q_target(s', argmax_a Q(s', a))   (double_q)
    y    = r^(n) + gamma^n * (1 - terminated) * max_a Q_target(s', a)             (otherwise)
    loss = huber(Q(s, a) - y)   (or squared error)

``training_intensity`` sets gradient steps per sampled step as in RLlib:
``grad_steps = training_intensity * sampled_steps / train_batch_size``.
"""

from __future__ import annotations

import copy
import logging
from typing import Any, Callable, Literal, Optional

import gymnasium as gym
import numpy as np
import torch
from pydantic import Field
from torch.nn import functional as F

from rltune.trainers._config import TrainerConfig, _Strict, schedule_value
from rltune.trainers._flat_params import FlatParameters
from rltune.trainers._models import QModel, make_adam
from rltune.trainers._policy import DEFAULT_POLICY_ID, Policy
from rltune.trainers._postprocessing import compute_n_step
from rltune.trainers._replay_buffer import ReplayBuffer
from rltune.trainers._sgd_step import make_sgd_step
from rltune.trainers._sample_batch import (
    ACTIONS,
    NEW_OBS,
    OBS,
    REWARDS,
    TERMINATEDS,
    TRUNCATEDS,
    SampleBatch,
    flatten_time_major,
)
from rltune.trainers._spaces import check_action_space
from rltune.trainers._trainer import StepOutcome, Trainer

logger = logging.getLogger(__name__)

DISCOUNTS = "discounts"


class ReplayBufferConfig(_Strict):
    """The replay buffer (RLlib's ``replay_buffer_config``)."""

    type: Literal["ReplayBuffer", "MultiAgentReplayBuffer"] = Field("ReplayBuffer", description="Uniform replay.")
    capacity: int = Field(50_000, ge=1, description="Transitions kept; the oldest are overwritten.")


class EpsilonGreedyConfig(_Strict):
    """Epsilon-greedy exploration, linearly annealed (RLlib's ``exploration_config``)."""

    type: Literal["EpsilonGreedy"] = Field("EpsilonGreedy", description="The only exploration DQN has.")
    initial_epsilon: float = Field(1.0, ge=0.0, le=1.0, description="Epsilon at timestep 0.")
    final_epsilon: float = Field(0.02, ge=0.0, le=1.0, description="Epsilon after epsilon_timesteps.")
    epsilon_timesteps: int = Field(10_000, ge=0, description="Timesteps over which epsilon anneals linearly.")


class DQNConfig(TrainerConfig):
    """DQN's keys (RLlib's classic names and defaults)."""

    lr: float = Field(5e-4, gt=0.0, description="Learning rate (start value when lr_schedule is set).")
    rollout_fragment_length: int = Field(4, ge=1, description="Steps per env in one sample() call of a worker.")
    train_batch_size: int = Field(32, ge=1, description="Transitions per gradient step (replay minibatch).")
    learning_starts: int = Field(1000, ge=0, description="Sampled timesteps before learning starts.")
    target_network_update_freq: int = Field(500, ge=1, description="Sampled timesteps between target network syncs.")
    double_q: bool = Field(True, description="Double Q-learning targets.")
    dueling: bool = Field(True, description="Dueling head (value + advantages).")
    n_step: int = Field(1, ge=1, description="n-step returns.")
    replay_buffer_config: ReplayBufferConfig = Field(default_factory=ReplayBufferConfig, description="Replay buffer.")
    exploration_config: EpsilonGreedyConfig = Field(default_factory=EpsilonGreedyConfig, description="Exploration.")
    training_intensity: Optional[float] = Field(
        None, gt=0.0, description="Trained / sampled steps ratio (x train_batch_size); None: one gradient step per round."
    )
    min_sample_timesteps_per_iteration: int = Field(1000, ge=0, description="Sampled timesteps per train() call at least.")
    grad_clip: Optional[float] = Field(40.0, gt=0.0, description="Max global gradient norm; None for no clipping.")
    td_error_loss_fn: Literal["huber", "mse"] = Field("huber", description="Loss on the TD error.")
    store_buffer_in_checkpoints: bool = Field(False, description="Save the replay buffer with each checkpoint.")


class DQNPolicy(Policy):
    """Q-network policy: epsilon-greedy while exploring, greedy otherwise; n-step postprocessing."""

    config: DQNConfig

    def make_model(self) -> QModel:
        check_action_space(self.action_space, "DQN", (gym.spaces.Discrete,))
        return QModel(self.preprocessor.size, int(self.action_space.n), self.config.model, dueling=self.config.dueling)

    @property
    def epsilon(self) -> float:
        """Current exploration epsilon (linear in the global timestep)."""
        exp = self.config.exploration_config
        if exp.epsilon_timesteps == 0:
            return exp.final_epsilon
        frac = min(1.0, self.global_timestep / exp.epsilon_timesteps)
        return exp.initial_epsilon + frac * (exp.final_epsilon - exp.initial_epsilon)

    def compute_actions(self, obs: np.ndarray, explore: bool = True) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        q_values = self.numpy_inference(obs)
        if q_values is not None:
            actions = q_values.argmax(axis=1)
        else:
            with torch.inference_mode():
                actions = self.model(self.obs_tensor(obs)).argmax(dim=-1).cpu().numpy()
        if explore:
            n = len(actions)
            rolls = self.rng.random(n)
            random_actions = self.rng.integers(0, int(self.action_space.n), n)
            actions = np.where(rolls < self.epsilon, random_actions, actions)
            self.global_timestep += n
        return actions, {}

    def postprocess_trajectory(self, batch: SampleBatch) -> SampleBatch:
        gamma = self.config.gamma
        if self.config.n_step > 1:
            returns, offsets, discounts = compute_n_step(
                batch[REWARDS], batch[TERMINATEDS], batch[TRUNCATEDS], self.config.n_step, gamma
            )
            steps = np.arange(len(offsets))[:, None] + offsets
            envs = np.arange(offsets.shape[1])[None, :]
            batch = dict(
                batch,
                **{
                    REWARDS: returns,
                    NEW_OBS: batch[NEW_OBS][steps, envs],
                    TERMINATEDS: batch[TERMINATEDS][steps, envs],
                    DISCOUNTS: discounts,
                },
            )
        else:
            batch = dict(batch, **{DISCOUNTS: np.full(batch[REWARDS].shape, gamma, dtype=np.float32)})
        del batch[TRUNCATEDS]
        return flatten_time_major(batch)


MAX_STEPS_PER_DRAW = 32  # gradient steps whose minibatches are drawn (and targets computed) together


class DQN(Trainer):
    """Deep Q-Network for Discrete action spaces."""

    name = "DQN"
    config_class = DQNConfig
    policy_class = DQNPolicy
    cfg: DQNConfig

    def setup(self) -> None:
        policy = self.get_policy()
        self.target_model = copy.deepcopy(policy.model)
        self.target_model.requires_grad_(False)
        self.flat_params = FlatParameters(policy.model)
        self.optimizer = make_adam([self.flat_params.param], lr=self.cfg.lr)
        if self.cfg.double_q:
            self.sgd_step = make_sgd_step(
                self.cfg, policy.model, self.flat_params, self.optimizer, self._double_q_loss,
                frozen_modules={"target_fn": self.target_model},
            )
        else:
            self.sgd_step = make_sgd_step(self.cfg, policy.model, self.flat_params, self.optimizer, self._loss)
        self.buffer = ReplayBuffer(self.cfg.replay_buffer_config.capacity)
        self.last_target_update = 0
        self.num_target_updates = 0
        self.num_grad_steps = 0
        self._grad_step_debt = 0.0

    def training_step(self) -> StepOutcome:
        cfg = self.cfg
        outcome = StepOutcome()
        stats: dict[str, float] = {}
        while True:
            sample = self.workers.sample(1)
            outcome.env_steps += sample.env_steps
            outcome.episodes.extend(sample.episodes)
            self.buffer.add(sample.batches[DEFAULT_POLICY_ID])
            sampled = self.timesteps_total + outcome.env_steps
            if sampled >= cfg.learning_starts and len(self.buffer) > 0:
                if sampled - self.last_target_update >= cfg.target_network_update_freq:
                    self.target_model.load_state_dict(self.get_policy().model.state_dict())
                    self.last_target_update = sampled
                    self.num_target_updates += 1
                num_steps = self._grad_steps_for(sample.env_steps)
                if num_steps:
                    lr = schedule_value(cfg.lr_schedule, cfg.lr, sampled)
                    for group in self.optimizer.param_groups:
                        group["lr"] = lr
                    stats = dict(self._updates(num_steps), cur_lr=lr)
                    self.get_policy().weights_changed()
            self.workers.sync_weights({"timestep": sampled})
            if outcome.env_steps >= cfg.min_sample_timesteps_per_iteration:
                break
        stats.update(
            {
                "cur_epsilon": self.get_policy().epsilon,  # type: ignore[attr-defined]
                "num_grad_steps": self.num_grad_steps,
                "num_target_updates": self.num_target_updates,
                "replay_buffer_size": len(self.buffer),
            }
        )
        return StepOutcome(outcome.env_steps, outcome.episodes, {DEFAULT_POLICY_ID: stats})

    def _grad_steps_for(self, sampled_steps: int) -> int:
        if self.cfg.training_intensity is None:
            return 1
        # Carry the fractional part over, so the long-run ratio is exact.
        self._grad_step_debt += self.cfg.training_intensity * sampled_steps / self.cfg.train_batch_size
        steps = int(self._grad_step_debt)
        self._grad_step_debt -= steps
        return steps

    def _updates(self, num_steps: int) -> dict[str, float]:
        """``num_steps`` gradient steps, each on its own replay minibatch; stats of the last one.

        The target network is fixed between syncs, so the steps of one round
        share work that does not depend on the online network: their
        minibatches are drawn together (uniform, with replacement, as one at
        a time) and, without double Q, their TD targets come from one
        forward pass of the target network. At most
        :data:`MAX_STEPS_PER_DRAW` steps share a draw, which bounds the memory
        of large observations.
        """
        stats: dict[str, float] = {}
        for start in range(0, num_steps, MAX_STEPS_PER_DRAW):
            stats = self._update_draw(min(MAX_STEPS_PER_DRAW, num_steps - start))
        return stats

    def _update_draw(self, num_steps: int) -> dict[str, float]:
        cfg = self.cfg
        policy = self.get_policy()
        device = policy.device
        size = cfg.train_batch_size
        batch = self.buffer.sample(num_steps * size, self.rng)
        obs = torch.from_numpy(batch[OBS]).to(device)
        actions = torch.from_numpy(batch[ACTIONS]).to(device).unsqueeze(1)
        rewards = torch.from_numpy(batch[REWARDS]).to(device)
        new_obs = torch.from_numpy(batch[NEW_OBS]).to(device)
        not_terminated = torch.from_numpy(~batch[TERMINATEDS]).to(device).float()
        discounts = torch.from_numpy(batch[DISCOUNTS]).to(device)
        if cfg.double_q:
            columns = (obs, actions, rewards, discounts, not_terminated, new_obs)
        else:
            with torch.no_grad():
                targets = rewards + discounts * not_terminated * self.target_model(new_obs).max(dim=1).values
            columns = (obs, actions, targets)
        last_stats = torch.full((3,), float("nan"))
        for i in range(num_steps):
            rows = slice(i * size, (i + 1) * size)
            stats, _ = self.sgd_step(*(c[rows] for c in columns), with_stats=i == num_steps - 1)
            if stats is not None:
                last_stats = stats
            self.num_grad_steps += 1
        total_loss, mean_q, mean_td_error = last_stats.tolist()  # one device sync per round, for the last step's stats
        return {"total_loss": total_loss, "mean_q": mean_q, "mean_td_error": mean_td_error}

    def _loss(
        self,
        model_fn: Callable[[torch.Tensor], torch.Tensor],
        obs: torch.Tensor,
        actions: torch.Tensor,
        targets: torch.Tensor,
        *,
        with_stats: bool,
    ) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
        """TD loss against precomputed targets (without double Q they depend on the target network only)."""
        return self._td_loss(model_fn(obs).gather(1, actions).squeeze(1), targets, with_stats)

    def _double_q_loss(
        self,
        model_fn: Callable[[torch.Tensor], torch.Tensor],
        obs: torch.Tensor,
        actions: torch.Tensor,
        rewards: torch.Tensor,
        discounts: torch.Tensor,
        not_terminated: torch.Tensor,
        new_obs: torch.Tensor,
        *,
        with_stats: bool,
        target_fn: Callable[[torch.Tensor], torch.Tensor],
    ) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
        """TD loss against double-Q targets: the online network picks a', the target network values it."""
        q = model_fn(obs).gather(1, actions).squeeze(1)
        with torch.no_grad():
            next_actions = model_fn(new_obs).argmax(dim=1, keepdim=True)
            next_q = target_fn(new_obs).gather(1, next_actions).squeeze(1)
            targets = rewards + discounts * not_terminated * next_q
        return self._td_loss(q, targets, with_stats)

    def _td_loss(self, q: torch.Tensor, targets: torch.Tensor, with_stats: bool) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
        loss = (F.smooth_l1_loss if self.cfg.td_error_loss_fn == "huber" else _half_mse)(q, targets)
        if not with_stats:
            return loss, None
        with torch.no_grad():
            return loss, torch.stack([loss, q.mean(), (q - targets).abs().mean()]).detach()

    def get_algorithm_state(self) -> tuple[dict[str, Any], dict[str, Any]]:
        values = {
            "last_target_update": self.last_target_update,
            "num_target_updates": self.num_target_updates,
            "num_grad_steps": self.num_grad_steps,
            "grad_step_debt": self._grad_step_debt,
        }
        return values, {"optimizer": self.optimizer.state_dict(), "target_model": self.target_model.state_dict()}

    def set_algorithm_state(self, values: dict[str, Any], tensors: dict[str, Any]) -> None:
        self.last_target_update = int(values.get("last_target_update", 0))
        self.num_target_updates = int(values.get("num_target_updates", 0))
        self.num_grad_steps = int(values.get("num_grad_steps", 0))
        self._grad_step_debt = float(values.get("grad_step_debt", 0.0))
        if "optimizer" in tensors:
            self.flat_params.load_optimizer_state(self.optimizer, tensors["optimizer"])
        if "target_model" in tensors:
            self.target_model.load_state_dict(tensors["target_model"])

    def checkpoint_array_names(self) -> list[str]:
        return ["replay_buffer"] if self.cfg.store_buffer_in_checkpoints else []

    def get_checkpoint_arrays(self) -> dict[str, dict[str, np.ndarray]]:
        return {"replay_buffer": self.buffer.get_state()} if self.cfg.store_buffer_in_checkpoints else {}

    def set_checkpoint_arrays(self, arrays: dict[str, dict[str, np.ndarray] | None]) -> None:
        state = arrays.get("replay_buffer")
        if state is None:
            return
        self._check_buffer_state(state)
        buffer = ReplayBuffer(self.cfg.replay_buffer_config.capacity)
        buffer.set_state(state)
        self.buffer = buffer  # swapped in whole, after the checks: a failure leaves the old buffer

    def _check_buffer_state(self, state: dict[str, np.ndarray]) -> None:
        """ValueError naming the column when saved replay rows could not train this DQN."""
        if not state:
            return  # saved while empty
        policy = self.get_policy()
        row_shapes = {OBS: (policy.preprocessor.size,), NEW_OBS: (policy.preprocessor.size,),
                      ACTIONS: policy.action_shape, REWARDS: (), TERMINATEDS: (), DISCOUNTS: ()}
        missing = sorted(set(row_shapes) - set(state))
        if missing:
            raise ValueError(f"replay_buffer.npz lacks the columns {missing}")
        rows = {key: len(state[key]) for key in row_shapes}
        if len(set(rows.values())) > 1:
            raise ValueError(f"replay_buffer.npz columns have different numbers of rows: {rows}")
        for key, shape in row_shapes.items():
            if state[key].shape[1:] != shape:
                raise ValueError(f"replay_buffer.npz column {key!r} has rows of shape {state[key].shape[1:]}, not {shape}")


def _half_mse(q: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return 0.5 * F.mse_loss(q, target)
