"""DQN (Mnih et al. 2015) with double Q (van Hasselt et al. 2016), dueling heads, noisy nets and n-step returns.

The Q-network is RLlib's (``_q_model.py``): the model catalog's encoder
for the observations (``_encoders.py``; the ``model`` block's fcnet layers
by default), then ``hiddens`` ReLU layers per stream (advantages; with
``dueling`` a value stream too), noisy layers with ``noisy``. Actions while
sampling come from ``exploration_config`` (``_exploration.py``).

One training iteration repeats, until ``min_sample_timesteps_per_iteration``
env steps were sampled: sample one round, add it to the replay buffer, and
once ``learning_starts`` steps exist, sync the target network every
``target_network_update_freq`` steps (``target = tau * online + (1 - tau) *
target``; ``tau`` 1.0, the default, copies) and take gradient steps on
minibatches of ``train_batch_size`` transitions::

    y    = r^(n) + gamma^n * (1 - terminated) * Q_target(s', argmax_a Q(s', a))   (double_q)
    y    = r^(n) + gamma^n * (1 - terminated) * max_a Q_target(s', a)             (otherwise)
    loss = huber(Q(s, a) - y)   (or squared error)

``training_intensity`` sets gradient steps per sampled step as in RLlib:
``grad_steps = training_intensity * sampled_steps / train_batch_size``.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Literal, Optional

import gymnasium as gym
import numpy as np
import torch
from pydantic import Field, ValidationInfo, field_validator, model_validator
from torch.nn import functional as F

from rltune.trainers.algorithms._algorithm import OffPolicyAlgorithm, OffPolicyLearner, ReplaySettings
from rltune.trainers._config import TrainerSettings, _Strict
from rltune.trainers.policies._exploration import (
    Q_TYPES,
    EpsilonGreedyConfig,
    ExplorationConfig,
    ParameterNoiseConfig,
    map_old_exploration_keys,
    parse_exploration,
    type_keys,
)
from rltune.trainers.policies._numpy_mlp import MAX_NUMPY_ROWS
from rltune.trainers.policies._policy import Policy
from rltune.trainers.policies._q_exploration import QExploration, make_q_exploration
from rltune.trainers.policies._q_model import QModel, scaled_noise
from rltune.trainers.learning._postprocessing import compute_n_step
from rltune.trainers.learning._sgd_step import LossFn
from rltune.trainers.sampling._sample_batch import (
    ACTIONS,
    NEW_OBS,
    OBS,
    REWARDS,
    TERMINATEDS,
    TRUNCATEDS,
    SampleBatch,
    batch_size,
    flatten_time_major,
)
from rltune.trainers.policies._spaces import check_action_space
from rltune.trainers._trainer import Trainer

logger = logging.getLogger(__name__)

DISCOUNTS = "discounts"


class ReplayBufferConfig(_Strict):
    """The replay buffer (RLlib's ``replay_buffer_config``)."""

    type: Literal["ReplayBuffer"] = Field("ReplayBuffer", description="Uniform replay, one buffer per policy id.")
    capacity: int = Field(50_000, ge=1, description="Transitions kept; the oldest are overwritten.")

    @field_validator("type", mode="before")
    @classmethod
    def _multi_agent_is_the_same_buffer(cls, value: Any) -> Any:
        # RLlib's DQN default, and older rltune configs, checkpoints and study specs carry it: it
        # meant nothing more than the one buffer per policy id every rltune replay keeps, so accept it.
        if value == "MultiAgentReplayBuffer":
            logger.warning("replay_buffer_config.type: 'MultiAgentReplayBuffer' is the same as 'ReplayBuffer' in "
                           "rltune (one buffer per policy id); it is ignored, write 'ReplayBuffer'")
            return "ReplayBuffer"
        return value


class DQNSettings(TrainerSettings):
    """DQN's keys (RLlib's classic names and defaults)."""

    lr: float = Field(5e-4, gt=0.0, description="Learning rate (start value when lr_schedule is set).")
    rollout_fragment_length: int = Field(4, ge=1, description="Steps per env in one sample() call of a worker.")
    train_batch_size: int = Field(32, ge=1, description="Transitions per gradient step (replay minibatch).")
    learning_starts: int = Field(1000, ge=0, description="Sampled timesteps before learning starts.")
    target_network_update_freq: int = Field(500, ge=1, description="Sampled timesteps between target network syncs.")
    tau: float = Field(
        1.0, gt=0.0, le=1.0,
        description="Target network sync: target = tau * online + (1 - tau) * target, every target_network_update_freq "
        "sampled timesteps; 1.0 copies the online network (a hard update), below 1 a polyak (soft) update.",
    )
    double_q: bool = Field(True, description="Double Q-learning targets.")
    dueling: bool = Field(True, description="Dueling head: a value and an advantage stream, each with its hiddens.")
    hiddens: list[int] = Field(
        [256], description="Q-head layers (ReLU) after the model's fcnet layers, per stream (RLlib's); [] for none."
    )
    noisy: bool = Field(False, description="Noisy head layers (factorised Gaussian noise): on while exploring and learning.")
    sigma0: float = Field(0.5, gt=0.0, description="Initial noise scale of the noisy layers (sigma0 / sqrt(fan_in)).")
    num_atoms: int = Field(1, ge=1, description="Atoms of distributional DQN (C51); only 1 (not distributional) is built.")
    v_min: float = Field(-10.0, description="Lowest atom of distributional DQN (num_atoms > 1, not built).")
    v_max: float = Field(10.0, description="Highest atom of distributional DQN (num_atoms > 1, not built).")
    n_step: int = Field(1, ge=1, description="n-step returns.")
    replay_buffer_config: ReplayBufferConfig = Field(default_factory=ReplayBufferConfig, description="Replay buffer.")
    exploration_config: ExplorationConfig = Field(
        default_factory=EpsilonGreedyConfig,
        description="Exploration while sampling: {type: ..., keys}; a block without type is EpsilonGreedy. "
        f"Types and their keys' defaults: {type_keys(Q_TYPES)}.",
    )
    training_intensity: Optional[float] = Field(
        None, gt=0.0, description="Trained / sampled steps ratio (x train_batch_size); None: one gradient step per round."
    )
    min_sample_timesteps_per_iteration: int = Field(1000, ge=0, description="Sampled timesteps per train() call at least.")
    grad_clip: Optional[float] = Field(40.0, gt=0.0, description="Max global gradient norm; None for no clipping.")
    td_error_loss_fn: Literal["huber", "mse"] = Field("huber", description="Loss on the TD error.")
    store_buffer_in_checkpoints: bool = Field(False, description="Save the replay buffer with each checkpoint.")

    @model_validator(mode="before")
    @classmethod
    def _old_exploration_keys(cls, data: Any) -> Any:
        return map_old_exploration_keys(data)

    @field_validator("exploration_config", mode="before")
    @classmethod
    def _exploration_type(cls, value: Any, info: ValidationInfo) -> Any:
        parsed = parse_exploration(value, algorithm="DQN", accepted=Q_TYPES, default="EpsilonGreedy")
        if info.data.get("noisy") and isinstance(parsed, ParameterNoiseConfig):
            raise ValueError("type ParameterNoise and noisy: true both perturb the Q-net; use one of them")
        return parsed

    @field_validator("hiddens")
    @classmethod
    def _positive_sizes(cls, sizes: list[int]) -> list[int]:
        if any(s <= 0 for s in sizes):
            raise ValueError(f"layer sizes must be positive, but got {sizes}")
        return sizes

    @field_validator("num_atoms")
    @classmethod
    def _not_distributional(cls, atoms: int) -> int:
        if atoms > 1:
            raise ValueError(
                "distributional DQN (C51, num_atoms > 1) is not built in rltune yet; set num_atoms: 1"
            )
        return atoms


class DQNPolicy(Policy):
    """Q-network policy: actions from its ``exploration_config`` while exploring, greedy otherwise; n-step postprocessing."""

    config: DQNSettings
    config_class = DQNSettings

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.exploration: QExploration = make_q_exploration(self.config.exploration_config, self)

    def make_model(self) -> QModel:
        check_action_space(self.action_space, "DQN", (gym.spaces.Discrete,), hint="Q-values score the actions of one "
                           "Discrete space; PPO takes MultiDiscrete, MultiBinary, Box, Tuple and Dict actions")
        cfg, pre = self.config, self.preprocessor
        return QModel(
            pre.size, int(self.action_space.n), cfg.model, dueling=cfg.dueling, hiddens=cfg.hiddens,
            noisy=cfg.noisy, sigma0=cfg.sigma0, layer_norm=isinstance(cfg.exploration_config, ParameterNoiseConfig),
            obs_kind=pre.kind, obs_shape=pre.shape,
        )

    @property
    def epsilon(self) -> float:
        """Current exploration epsilon (EpsilonGreedy's, ParameterNoise's sub-exploration's; 1.0 for Random, else 0.0)."""
        return self.exploration.stats(self.global_timestep).get("cur_epsilon", 0.0)

    def q_values(self, obs: np.ndarray, *, noise: bool = False) -> np.ndarray:
        """Q-values ``[B, num_actions]`` of preprocessed observations; ``noise``: noisy layers sample their noise."""
        noise = noise and self.config.noisy and isinstance(self.model, QModel)
        if isinstance(self.model, QModel) and self.device.type == "cpu" and len(obs) <= MAX_NUMPY_ROWS and self.model.fusable:
            self._sync_fast_paths()
            return self.model.numpy_forward(np.ascontiguousarray(obs, dtype=np.float32), self.rng if noise else None)
        if not isinstance(self.model, QModel):
            q_values = self.numpy_inference(obs)
            if q_values is not None:
                return q_values
            with torch.inference_mode():
                return self.inference_forward(self.obs_tensor(obs)).cpu().numpy()
        if noise:
            self._draw_noise()
        with torch.inference_mode():
            return self.model(self.obs_tensor(obs), noise=noise).cpu().numpy()

    def _draw_noise(self) -> None:
        """New noise in the noisy layers' buffers, from the policy's generator: one draw, split as the numpy path splits it."""
        buffers = [b for name, b in self.model.named_buffers() if name.endswith(("eps_in", "eps_out"))]
        draw = scaled_noise(self.rng.standard_normal(sum(b.shape[0] for b in buffers)).astype(np.float32))
        with torch.no_grad():
            for buffer, values in zip(buffers, np.split(draw, np.cumsum([b.shape[0] for b in buffers])[:-1])):
                buffer.copy_(torch.from_numpy(values))

    def compute_actions(self, obs: np.ndarray, explore: bool = True) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        q_values = self.exploration.q_values(self, obs, explore)
        actions = self.exploration.actions(q_values, self.global_timestep, explore)
        if explore:
            self.global_timestep += len(actions)
        return actions, {}

    def on_fragment(self, batch: SampleBatch) -> None:
        self.exploration.postprocess(self, batch)

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


class DQNLearner(OffPolicyLearner):
    """DQN's learner: TD loss against the target network, one gradient step per ``train_batch_size`` rows."""

    cfg: DQNSettings

    def loss_function(self) -> LossFn:
        return self._double_q_loss if self.cfg.double_q else self.loss

    def frozen_modules(self) -> Optional[dict[str, Any]]:
        return super().frozen_modules() if self.cfg.double_q else None  # without double Q the targets come precomputed

    def update(self, batch: SampleBatch, *, timestep: int = 0) -> dict[str, float]:
        """One gradient step per ``train_batch_size`` rows of ``batch`` (a replay draw); stats of the last one.

        Without double Q the TD targets of all the steps come from one forward
        pass of the target network (fixed between syncs).
        """
        lr = self.apply_lr(timestep)
        device = self.policy.device
        size = self.cfg.train_batch_size
        num_steps = batch_size(batch) // size
        obs = torch.from_numpy(batch[OBS]).to(device).float()  # a uint8 image's rows become float here
        actions = torch.from_numpy(batch[ACTIONS]).to(device).unsqueeze(1)
        rewards = torch.from_numpy(batch[REWARDS]).to(device)
        new_obs = torch.from_numpy(batch[NEW_OBS]).to(device).float()  # a uint8 image's rows become float here
        not_terminated = torch.from_numpy(~batch[TERMINATEDS]).to(device).float()
        discounts = torch.from_numpy(batch[DISCOUNTS]).to(device)
        if self.cfg.double_q:
            columns = (obs, actions, rewards, discounts, not_terminated, new_obs)
        else:
            if self.cfg.noisy:
                self._resample_noise()
            with torch.no_grad():
                targets = rewards + discounts * not_terminated * self.target_model(new_obs).max(dim=1).values
            columns = (obs, actions, targets)
        last_stats = torch.full((3,), float("nan"))
        for i in range(num_steps):
            if self.cfg.noisy and (i or self.cfg.double_q):  # fixed targets drew their noise above
                self._resample_noise()
            rows = slice(i * size, (i + 1) * size)
            stats, _ = self.sgd_step(*(c[rows] for c in columns), with_stats=i == num_steps - 1)
            if stats is not None:
                last_stats = stats
        total_loss, mean_q, mean_td_error = last_stats.tolist()  # one device sync per draw, for the last step's stats
        return {"total_loss": total_loss, "mean_q": mean_q, "mean_td_error": mean_td_error, "cur_lr": lr}

    def _resample_noise(self) -> None:
        """New noise for the noisy layers of the online and target networks (one draw per gradient step)."""
        for model in (self.policy.model, self.target_model):
            resample = getattr(model, "resample_noise_", None)
            if resample is not None:
                resample()

    def loss(  # type: ignore[override]
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


class DQNAlgorithm(OffPolicyAlgorithm):
    """DQN over policies by id: n-step postprocessing (:class:`DQNPolicy`), replay, target sync, :class:`DQNLearner`."""

    policy_class = DQNPolicy
    learner_class = DQNLearner
    cfg: DQNSettings

    def replay_settings(self) -> ReplaySettings:
        cfg = self.cfg
        return ReplaySettings(
            capacity=cfg.replay_buffer_config.capacity,
            learning_starts=cfg.learning_starts,
            target_update_freq=cfg.target_network_update_freq,
            tau=cfg.tau,
            min_steps_per_iteration=cfg.min_sample_timesteps_per_iteration,
            training_intensity=cfg.training_intensity,
            store_buffer_in_checkpoints=cfg.store_buffer_in_checkpoints,
        )

    def round_stats(self, policy_id: str) -> dict[str, float]:
        policy = self.policies[policy_id]
        return {**policy.exploration.stats(policy.global_timestep), **super().round_stats(policy_id)}  # type: ignore[attr-defined]

    def buffer_columns(self, policy_id: str) -> dict[str, tuple[int, ...]]:
        policy = self.policies[policy_id]
        size = (policy.preprocessor.size,)
        return {OBS: size, NEW_OBS: size, ACTIONS: policy.action_shape, REWARDS: (), TERMINATEDS: (), DISCOUNTS: ()}


class DQN(Trainer):
    """Deep Q-Network for Discrete action spaces, with RLlib's Q head (``hiddens``, ``dueling``, ``noisy``)."""

    name = "DQN"
    config_class = DQNSettings
    algorithm_class = DQNAlgorithm
    cfg: DQNSettings

    @classmethod
    def saved_config(cls, config: dict[str, Any]) -> dict[str, Any]:
        """Checkpoints written before the Q head existed (no ``hiddens`` key) hold the head-less net: ``hiddens: []``."""
        return config if "hiddens" in config else {**config, "hiddens": []}


def _half_mse(q: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return 0.5 * F.mse_loss(q, target)
