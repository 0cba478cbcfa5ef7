"""REINFORCE (Williams 1992) as a third algorithm, plugged into the roles with nothing outside this file."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from rltune.trainers import Trainer
from rltune.trainers.algorithms._algorithm import OnPolicyAlgorithm
from rltune.trainers.policies._distributions import Categorical, log_softmax, sample_categorical
from rltune.trainers.learning._learner import Learner
from rltune.trainers.policies._policy import Policy
from rltune.trainers.learning._postprocessing import compute_gae
from rltune.trainers.sampling._sample_batch import ACTIONS, ADVANTAGES, OBS, REWARDS, TERMINATEDS, TRUNCATEDS, flatten_time_major


class REINFORCEPolicy(Policy):
    """A softmax policy over an MLP; postprocessing: discounted returns to the episode's (or fragment's) end."""

    def make_model(self) -> nn.Module:
        hidden = self.config.model.fcnet_hiddens[0]
        return nn.Sequential(nn.Linear(self.preprocessor.size, hidden), nn.Tanh(), nn.Linear(hidden, int(self.action_space.n)))

    def compute_actions(self, obs: np.ndarray, explore: bool = True) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        with torch.inference_mode():
            logits = self.model(self.obs_tensor(obs)).numpy()
        actions, _ = sample_categorical(log_softmax(logits), self.rng, deterministic=not explore)
        return actions, {}

    def postprocess_trajectory(self, batch):
        zeros = np.zeros_like(batch[REWARDS])
        returns, _ = compute_gae(batch[REWARDS], zeros, zeros, batch[TERMINATEDS], batch[TRUNCATEDS], self.config.gamma, 1.0)
        return flatten_time_major(dict(batch, **{ADVANTAGES: returns}))


class REINFORCELearner(Learner):
    """Loss: -mean(log pi(a|s) * normalised return); one full-batch gradient step per update."""

    def loss(self, model_fn, obs, actions, returns, *, with_stats):
        loss = -(Categorical(model_fn(obs)).logp(actions) * returns).mean()
        return loss, (loss.detach()[None] if with_stats else None)

    def update(self, batch, *, timestep=0):
        lr = self.apply_lr(timestep)
        obs, actions, returns = (torch.from_numpy(batch[k]) for k in (OBS, ACTIONS, ADVANTAGES))
        returns = (returns - returns.mean()) / (returns.std() + 1e-8)
        stats, grad_norm = self.sgd_step(obs, actions, returns, with_stats=True)
        return {"cur_lr": lr, "total_loss": float(stats[0]), "grad_gnorm": float(grad_norm)}


class REINFORCEAlgorithm(OnPolicyAlgorithm):
    """Sample ``train_batch_size`` steps, one update per policy (the on-policy base's training step)."""

    policy_class = REINFORCEPolicy
    learner_class = REINFORCELearner


class REINFORCE(Trainer):
    """The trainer users see: its name and roles; loop, results, evaluation and checkpoints are the base's."""

    name = "REINFORCE"
    algorithm_class = REINFORCEAlgorithm
