"""PPO (Schulman et al. 2017): GAE advantages, clipped surrogate, minibatch SGD epochs.

The loss of one minibatch, as in the paper plus RLlib's optional terms::

    ratio      = exp(logp(a|s) - logp_old(a|s))
    surrogate  = min(ratio * A, clip(ratio, 1 - clip_param, 1 + clip_param) * A)
    vf_loss    = min((V(s) - value_target)^2, vf_clip_param)
    total_loss = -surrogate + vf_loss_coeff * vf_loss - entropy_coeff * entropy + kl_coeff * kl

averaged over the minibatch, with A normalised per minibatch
(``normalize_advantages``). ``kl_coeff`` adapts towards ``kl_target`` after
each iteration, as in RLlib.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, ClassVar, Optional, Union

import numpy as np
import torch
from pydantic import Field, field_validator

from rltune.errors import ConfigError
from rltune.trainers._config import TrainerSettings, _check_schedule, schedule_value
from rltune.trainers.policies._exploration import (
    DISTRIBUTION_TYPES,
    RandomConfig,
    StochasticSamplingConfig,
    parse_exploration,
    random_phase,
    type_keys,
    uniform_actions,
)
from rltune.trainers.policies._action_dists import ActionDist, ProductDistribution, action_dist_for
from rltune.trainers.policies._distributions import Categorical, DiagGaussian, log_softmax, sample_categorical, sample_diag_gaussian
from rltune.trainers.algorithms._algorithm import OnPolicyAlgorithm
from rltune.trainers.learning._learner import Learner
from rltune.trainers.policies._models import ActorCriticModel
from rltune.trainers.policies._policy import Policy
from rltune.trainers.learning._postprocessing import compute_gae
from rltune.trainers.learning._sequences import SEQ_STARTS, chop_into_sequences
from rltune.trainers.algorithms._ppo_recurrent import recurrent_step, recurrent_values, update_by_sequences
from rltune.trainers.sampling._sample_batch import (
    ACTION_LOGP,
    ACTIONS,
    ADVANTAGES,
    NEW_OBS,
    OBS,
    REWARDS,
    TERMINATEDS,
    TRUNCATEDS,
    VALUE_TARGETS,
    VF_PREDS,
    SampleBatch,
    batch_size,
    flatten_time_major,
)
from rltune.trainers._trainer import Trainer

logger = logging.getLogger(__name__)


class PPOSettings(TrainerSettings):
    """PPO's keys (RLlib's classic names and defaults)."""

    # Where RLlib's new API stack (Ray 2.10+) defaults differently: a config that switches it on gets these
    # for the keys it leaves unset (see rltune.trainers.rllib._rllib_names). "auto": one round fills the train batch.
    NEW_STACK_DEFAULTS: ClassVar[dict[str, Any]] = {"rollout_fragment_length": "auto"}

    lr: float = Field(5e-5, gt=0.0, description="Learning rate (start value when lr_schedule is set).")
    rollout_fragment_length: int = Field(200, ge=1, description="Steps per env in one sample() call of a worker.")
    train_batch_size: int = Field(4000, ge=1, description="Samples per training iteration (one PPO update).")
    lambda_: float = Field(1.0, alias="lambda", ge=0.0, le=1.0, description="GAE lambda.")
    use_gae: bool = Field(True, description="Use GAE; False means lambda = 1 (discounted returns minus values).")
    use_critic: bool = Field(True, description="Learn a value function (needed for GAE).")
    clip_param: float = Field(0.3, gt=0.0, description="PPO clip range of the probability ratio.")
    clip_param_schedule: Optional[list[tuple[int, float]]] = Field(
        None, description="Piecewise-linear [[timestep, clip_param], ...]; overrides clip_param."
    )
    vf_clip_param: Optional[float] = Field(
        10.0, gt=0.0, description="Clip of the squared value error (RLlib); None for no clipping."
    )
    vf_loss_coeff: float = Field(1.0, ge=0.0, description="Weight of the value loss.")
    entropy_coeff: float = Field(0.0, ge=0.0, description="Weight of the entropy bonus.")
    entropy_coeff_schedule: Optional[list[tuple[int, float]]] = Field(
        None, description="Piecewise-linear [[timestep, entropy_coeff], ...]; overrides entropy_coeff."
    )
    kl_coeff: float = Field(0.2, ge=0.0, description="Initial weight of the KL penalty (0 turns it off).")
    kl_target: float = Field(0.01, gt=0.0, description="KL the adaptive kl_coeff aims for.")
    sgd_minibatch_size: int = Field(128, ge=1, description="Minibatch size of each SGD step.")
    num_sgd_iter: int = Field(30, ge=1, description="Epochs over the train batch per iteration.")
    shuffle_sequences: bool = Field(True, description="Shuffle the batch before each epoch.")
    normalize_advantages: bool = Field(True, description="Normalise advantages per minibatch.")
    grad_clip: Optional[float] = Field(None, gt=0.0, description="Max global gradient norm; None for no clipping.")
    exploration_config: Union[StochasticSamplingConfig, RandomConfig] = Field(
        default_factory=StochasticSamplingConfig,
        description="Exploration while sampling: {type: ..., keys}; a block without type is StochasticSampling. "
        f"Types and their keys' defaults: {type_keys(DISTRIBUTION_TYPES)}.",
    )

    @field_validator("exploration_config", mode="before")
    @classmethod
    def _exploration_type(cls, value: Any) -> Any:
        return parse_exploration(value, algorithm="PPO", accepted=DISTRIBUTION_TYPES, default="StochasticSampling")

    @field_validator("clip_param_schedule", "entropy_coeff_schedule")
    @classmethod
    def _sorted(cls, points: Optional[list[tuple[int, float]]]) -> Optional[list[tuple[int, float]]]:
        return _check_schedule(points)


class PPOPolicy(Policy):
    """Actor-critic policy: samples actions with their log-probs and values; postprocesses with GAE."""

    config: PPOSettings
    config_class = PPOSettings

    def make_model(self) -> ActorCriticModel:
        dist = self.action_dist if self.action_dist is not None else action_dist_for(self.action_space, "PPO")  # raises
        pre = self.preprocessor
        return ActorCriticModel(pre.size, dist.num_inputs, self.config.model, free_log_std=dist.num_log_std,
                                obs_kind=pre.kind, obs_shape=pre.shape)

    def distribution(self, dist_inputs: torch.Tensor) -> Categorical | DiagGaussian | ProductDistribution:
        """The action distribution over the model's outputs (the catalog's product distribution for structured spaces)."""
        if self.is_structured:
            return self.action_dist.torch_dist(dist_inputs)  # type: ignore[union-attr]
        return DiagGaussian(dist_inputs) if self.is_continuous else Categorical(dist_inputs)

    def compute_actions(self, obs: np.ndarray, explore: bool = True) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        if self.is_structured:
            return self._compute_structured(obs, explore)
        outputs = self.numpy_inference(obs)
        if outputs is not None:
            dist_inputs, values = outputs
            if not self.is_continuous:
                dist_inputs = log_softmax(dist_inputs)
        else:
            with torch.inference_mode():
                dist_inputs, values = self.inference_forward(self.obs_tensor(obs))
                if not self.is_continuous:
                    dist_inputs = torch.log_softmax(dist_inputs, dim=-1)
                dist_inputs, values = dist_inputs.cpu().numpy(), values.cpu().numpy()
        return self.sample_actions(dist_inputs, values, explore)

    def sample_actions(self, dist_inputs: np.ndarray, values: np.ndarray, explore: bool) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Actions drawn from the model's outputs (a Discrete space's as log-probabilities) and the extra columns."""
        if self.is_continuous:
            actions, logp = sample_diag_gaussian(dist_inputs, self.rng, deterministic=not explore)
            actions = actions.reshape((-1,) + self.action_shape)
        else:
            actions, logp = sample_categorical(dist_inputs, self.rng, deterministic=not explore)
        if explore:
            if random_phase(self.config.exploration_config, self.global_timestep):
                # Uniform actions, with their probability under that behaviour policy (the ratio's denominator).
                actions, logp = uniform_actions(self.action_space, self.rng, len(actions))
            self.global_timestep += len(actions)
        return actions, {ACTION_LOGP: logp, VF_PREDS: values}

    def compute_actions_with_state(
        self, obs: np.ndarray, state: list[np.ndarray], explore: bool = True
    ) -> tuple[np.ndarray, list[np.ndarray], dict[str, np.ndarray]]:
        """A recurrent model's step (see ``docs/recurrent.md``); a stateless policy's :meth:`compute_actions`."""
        if not state:
            return super().compute_actions_with_state(obs, state, explore)
        dist_inputs, values, state_out = recurrent_step(self, obs, state)
        if self.is_structured:
            actions, extras = self._sample_structured(dist_inputs, values, explore)
        else:
            actions, extras = self.sample_actions(log_softmax(dist_inputs) if not self.is_continuous else dist_inputs, values, explore)
        return actions, state_out, extras

    def _compute_structured(self, obs: np.ndarray, explore: bool) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """:meth:`compute_actions` for a space other than Discrete or Box: the catalog's distribution samples flat rows."""
        outputs = self.numpy_inference(obs)
        if outputs is None:
            with torch.inference_mode():
                outputs = tuple(x.cpu().numpy() for x in self.inference_forward(self.obs_tensor(obs)))
        dist_inputs, values = outputs
        return self._sample_structured(dist_inputs, values, explore)

    def _sample_structured(self, dist_inputs: np.ndarray, values: np.ndarray, explore: bool) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        dist: ActionDist = self.action_dist  # type: ignore[assignment]  # set for every structured space
        actions, logp = dist.sample(dist_inputs, self.rng, deterministic=not explore)
        if explore:
            if random_phase(self.config.exploration_config, self.global_timestep):
                actions, logp = dist.uniform(self.rng, len(actions))
            self.global_timestep += len(actions)
        return actions, {ACTION_LOGP: logp, VF_PREDS: values}

    def values(self, obs: np.ndarray) -> np.ndarray:
        """V(s) for a batch of preprocessed observations."""
        with torch.inference_mode():
            value = getattr(self.model, "value", None)  # optional: a model's forward gives the values too
            values = value(self.obs_tensor(obs)) if value is not None else self.model(self.obs_tensor(obs))[1]
            return values.cpu().numpy()

    def acting_columns(self, batch: SampleBatch) -> SampleBatch:
        """``batch`` with the value predictions and action log-probs a source did not record, from this policy."""
        obs, actions = batch[OBS], batch[ACTIONS]
        shape = obs.shape[:2]
        flat_obs = self.obs_tensor(obs.reshape((-1,) + obs.shape[2:]))
        with torch.inference_mode():
            dist_inputs, values = self.model(flat_obs)
            logp = self.distribution(dist_inputs).logp(torch.as_tensor(actions.reshape((-1,) + actions.shape[2:])))
        extra = {VF_PREDS: values.cpu().numpy().reshape(shape), ACTION_LOGP: logp.cpu().numpy().reshape(shape)}
        return {**{k: v for k, v in extra.items() if k not in batch}, **batch}

    def postprocess_trajectory(self, batch: SampleBatch) -> SampleBatch:
        recurrent = self.is_recurrent()
        if VF_PREDS not in batch or ACTION_LOGP not in batch:
            if recurrent:
                raise ConfigError("a recurrent policy's fragments must carry the acting policy's vf_preds and action_logp "
                                 "(and its state_in_* / state_out_* columns): they cannot be recomputed without the states")
            batch = self.acting_columns(batch)
        values = batch[VF_PREDS]
        terminateds, truncateds = batch[TERMINATEDS], batch[TRUNCATEDS]
        next_values = np.zeros_like(values)
        next_values[:-1] = values[1:]
        # Bootstrap from V(final obs) where an episode was cut, and from V(next obs) at the fragment end.
        needs_value = truncateds.copy()
        needs_value[-1] = True
        needs_value &= ~terminateds
        if needs_value.any():
            if recurrent:  # V(s') with the state after the step
                next_values[needs_value] = recurrent_values(self, batch, needs_value)
            else:
                next_values[needs_value] = self.values(batch[NEW_OBS][needs_value])
        if not self.config.use_critic:
            values = np.zeros_like(values)
            next_values = np.zeros_like(next_values)
        lambda_ = self.config.lambda_ if self.config.use_gae else 1.0
        advantages, targets = compute_gae(
            batch[REWARDS], values, next_values, terminateds, truncateds, self.config.gamma, lambda_
        )
        batch = dict(batch, **{ADVANTAGES: advantages, VALUE_TARGETS: targets})
        del batch[NEW_OBS]  # not needed for learning; saves copying it back to the learner
        if recurrent:
            return chop_into_sequences(batch, self.config.model.max_seq_len)
        return flatten_time_major(batch)


def explained_variance(targets: np.ndarray, predictions: np.ndarray) -> float:
    """1 - Var(targets - predictions) / Var(targets); NaN when the targets do not vary."""
    var = float(np.var(targets))
    return float("nan") if var == 0 else 1.0 - float(np.var(targets - predictions)) / var


class PPOLearner(Learner):
    """PPO's learner: the clipped-surrogate loss, minibatch SGD epochs and the adaptive ``kl_coeff``."""

    adam_eps = 1e-5
    cfg: PPOSettings
    policy: PPOPolicy

    def __init__(self, policy: Policy, cfg: TrainerSettings, rng: np.random.Generator) -> None:
        self.kl_coeff = cfg.kl_coeff  # type: ignore[attr-defined]
        super().__init__(policy, cfg, rng)

    def trace_key(self) -> Callable[[], Any]:
        return lambda: (self._learn_entropy, self._learn_kl)  # the loss's terms

    def loss(  # type: ignore[override]
        self,
        model_fn: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]],
        obs: torch.Tensor,
        actions: torch.Tensor,
        old_logp: torch.Tensor,
        adv: torch.Tensor,
        targets: torch.Tensor,
        clip: float | torch.Tensor,
        entropy_coeff: float | torch.Tensor,
        kl_coeff: float | torch.Tensor,
        *,
        with_stats: bool,
    ) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
        """The minibatch loss of the module docstring, and its stats when asked.

        Stats: total loss, policy loss, vf loss, entropy, KL, clip fraction.
        Terms whose coefficient is 0 stay out of the graph (computed for the stats only).
        """
        cfg = self.cfg
        dist_inputs, values = model_fn(obs)
        dist = self.policy.distribution(dist_inputs)
        log_ratio = dist.logp(actions) - old_logp
        ratio = log_ratio.exp()
        surrogate = torch.min(ratio * adv, ratio.clamp(1.0 - clip, 1.0 + clip) * adv).mean()
        vf_err = (values - targets).pow(2)
        vf_loss = (vf_err.clamp(max=cfg.vf_clip_param) if cfg.vf_clip_param is not None else vf_err).mean()
        loss = -surrogate
        if cfg.use_critic:
            loss = loss + cfg.vf_loss_coeff * vf_loss
        entropy = kl = None
        if self._learn_entropy:
            entropy = dist.entropy().mean()
            loss = loss - entropy_coeff * entropy
        if self._learn_kl:
            kl = ((ratio - 1.0) - log_ratio).mean()  # k3 estimator of KL(old || new), always >= 0
            loss = loss + kl_coeff * kl
        if not with_stats:
            return loss, None
        with torch.no_grad():
            if entropy is None:
                entropy = dist.entropy().mean()
            if kl is None:
                kl = ((ratio - 1.0) - log_ratio).mean()
            clip_fraction = ((ratio - 1.0).abs() > clip).float().mean()
            return loss, torch.stack([loss, -surrogate, vf_loss, entropy, kl, clip_fraction]).detach()

    @property
    def _learn_entropy(self) -> bool:
        return self.cfg.entropy_coeff > 0 or self.cfg.entropy_coeff_schedule is not None

    @property
    def _learn_kl(self) -> bool:
        return self.kl_coeff > 0  # adapts by factors of 1.5 and 0.5: never reaches 0 once above it

    def update(self, batch: SampleBatch, *, timestep: int = 0) -> dict[str, float]:
        """``num_sgd_iter`` epochs of minibatch steps over ``batch``; stats of the last epoch.

        A recurrent policy's batch (sequences, ``seq_starts``) trains by whole sequences, eagerly (``_ppo_recurrent.py``).
        """
        cfg = self.cfg
        lr = self.apply_lr(timestep)
        clip = schedule_value(cfg.clip_param_schedule, cfg.clip_param, timestep)
        entropy_coeff = schedule_value(cfg.entropy_coeff_schedule, cfg.entropy_coeff, timestep)
        if SEQ_STARTS in batch:
            means, steps = update_by_sequences(self, batch, clip, entropy_coeff)
            return self._stats(means, batch, lr, clip, entropy_coeff, steps)
        device = self.policy.device
        columns = [torch.from_numpy(batch[k]).to(device) for k in (OBS, ACTIONS, ACTION_LOGP, ADVANTAGES, VALUE_TARGETS)]
        columns[0] = columns[0].float()  # a uint8 image's rows become float on the device (float32 ones stay as they are)
        n = batch_size(batch)
        mb = min(cfg.sgd_minibatch_size, n)
        full_batch = mb == n
        if full_batch and cfg.normalize_advantages and n > 1:
            adv = columns[3]
            columns[3] = (adv - adv.mean()) / (adv.std() + 1e-8)  # the same for every epoch
        coeffs = self.step_scalars(clip, entropy_coeff, self.kl_coeff)
        stat_sums = torch.zeros(7, device=device)
        steps = stat_steps = 0
        for epoch in range(cfg.num_sgd_iter):
            # Learner stats are means over the minibatches of the last epoch: they describe the
            # updated policy (the KL that adapts kl_coeff included) and cost nothing in earlier epochs.
            last_epoch = epoch == cfg.num_sgd_iter - 1
            # A full-batch minibatch needs no shuffling: its mean loss does not depend on the order.
            order = None if full_batch or not cfg.shuffle_sequences else torch.from_numpy(self.rng.permutation(n)).to(device)
            for start in range(0, n - mb + 1, mb):
                if full_batch:
                    obs, actions, old_logp, adv, targets = columns
                else:
                    idx = order[start : start + mb] if order is not None else slice(start, start + mb)
                    obs, actions, old_logp, adv, targets = (c[idx] for c in columns)
                    if cfg.normalize_advantages and mb > 1:
                        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
                stats, grad_norm = self.sgd_step(obs, actions, old_logp, adv, targets, *coeffs, with_stats=last_epoch)
                steps += 1
                if last_epoch:
                    stat_sums[:6] += stats
                    stat_sums[6] += grad_norm
                    stat_steps += 1
        return self._stats(stat_sums.cpu().numpy() / max(stat_steps, 1), batch, lr, clip, entropy_coeff, steps)

    def _stats(
        self, means: np.ndarray, batch: SampleBatch, lr: float, clip: float, entropy_coeff: float, steps: int
    ) -> dict[str, float]:
        """The learner stats of one update from the last epoch's mean stats; adapts ``kl_coeff`` to its KL."""
        total_loss, policy_loss, vf_loss_v, entropy_v, kl_v, clip_frac, gnorm = means
        if self.kl_coeff > 0:
            if kl_v > 2.0 * self.cfg.kl_target:
                self.kl_coeff *= 1.5
            elif kl_v < 0.5 * self.cfg.kl_target:
                self.kl_coeff *= 0.5
        return {
            "cur_lr": lr,
            "cur_clip_param": clip,
            "entropy_coeff": entropy_coeff,
            "cur_kl_coeff": self.kl_coeff,
            "total_loss": float(total_loss),
            "policy_loss": float(policy_loss),
            "vf_loss": float(vf_loss_v),
            "entropy": float(entropy_v),
            "kl": float(kl_v),
            "clip_fraction": float(clip_frac),
            "grad_gnorm": float(gnorm),
            "vf_explained_var": explained_variance(batch[VALUE_TARGETS], batch[VF_PREDS]),
            "num_sgd_steps": steps,
        }

    def get_extra_state(self) -> tuple[dict[str, Any], dict[str, Any]]:
        return {"kl_coeff": self.kl_coeff}, {}

    def set_extra_state(self, values: dict[str, Any], tensors: dict[str, Any]) -> None:
        self.kl_coeff = float(values.get("kl_coeff", self.cfg.kl_coeff))


class PPOAlgorithm(OnPolicyAlgorithm):
    """PPO over policies by id: GAE postprocessing (:class:`PPOPolicy`), one :class:`PPOLearner` update per batch."""

    policy_class = PPOPolicy
    learner_class = PPOLearner


class PPO(Trainer):
    """Proximal Policy Optimization for Discrete, MultiDiscrete, MultiBinary, Box, Tuple and Dict action spaces."""

    name = "PPO"
    config_class = PPOSettings
    algorithm_class = PPOAlgorithm
    cfg: PPOSettings

    @classmethod
    def check_config(cls, cfg: TrainerSettings) -> list[str]:
        problems = super().check_config(cfg)
        assert isinstance(cfg, PPOSettings)
        if cfg.sgd_minibatch_size > cfg.train_batch_size:
            problems.append(
                f"sgd_minibatch_size ({cfg.sgd_minibatch_size}) must be <= train_batch_size ({cfg.train_batch_size})"
            )
        if cfg.use_gae and not cfg.use_critic:
            problems.append("use_gae: True needs use_critic: True (GAE bootstraps from the value function)")
        return problems

    def setup(self) -> None:
        round_steps = self.workers.steps_per_round()
        if self.cfg.train_batch_size % round_steps:
            rounds = -(-self.cfg.train_batch_size // round_steps)
            logger.warning(
                "train_batch_size=%d is not a multiple of num_workers x num_envs_per_worker x "
                "rollout_fragment_length = %d: each iteration trains on %d x %d = %d samples",
                self.cfg.train_batch_size, round_steps, rounds, round_steps, rounds * round_steps,
            )
