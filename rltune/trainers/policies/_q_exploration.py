"""The exploration of Q-learning policies while sampling: Q-values in, actions out (``exploration_config``'s types).

Each class runs one type of ``_exploration.py`` for a policy with a
``q_values(obs, noise=...)`` method (:class:`~rltune.trainers.algorithms._dqn.DQNPolicy`).
Random draws come from the policy's generator, which checkpoints save.
Without exploration every type acts greedily on the unperturbed Q-values.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
import torch
from pydantic import BaseModel

from rltune.errors import ConfigError
from rltune.trainers.policies._exploration import (
    EpsilonGreedyConfig,
    ParameterNoiseConfig,
    RandomConfig,
    SoftQConfig,
    StochasticSamplingConfig,
)
from rltune.trainers.sampling._sample_batch import OBS, TERMINATEDS, TRUNCATEDS, SampleBatch


class QExploration:
    """Greedy actions when not exploring; subclasses choose the exploring ones (:meth:`explore`)."""

    def __init__(self, cfg: Any, policy: Any) -> None:
        self.cfg = cfg
        self.num_actions = int(policy.action_space.n)
        self.rng: np.random.Generator = policy.rng

    def q_values(self, policy: Any, obs: np.ndarray, explore: bool) -> np.ndarray:
        """The Q-values actions are chosen from (noisy layers' noise on while exploring)."""
        return policy.q_values(obs, noise=explore)

    def actions(self, q: np.ndarray, timestep: int, explore: bool) -> np.ndarray:
        """Actions ``[B]`` for Q-values ``[B, num_actions]`` at the policy's ``timestep``."""
        greedy = q.argmax(axis=1)
        return self.explore(q, greedy, timestep) if explore else greedy

    def explore(self, q: np.ndarray, greedy: np.ndarray, timestep: int) -> np.ndarray:
        """The exploring actions."""
        raise NotImplementedError

    def postprocess(self, policy: Any, batch: SampleBatch) -> None:
        """Called with every sampled fragment before the algorithm's postprocessing (default: nothing)."""

    def stats(self, timestep: int) -> dict[str, float]:
        """Exploration stats reported with the learner's (``cur_epsilon``, ...)."""
        return {}

    def _random(self, n: int) -> np.ndarray:
        return self.rng.integers(0, self.num_actions, n)


class EpsilonGreedy(QExploration):
    """The greedy action, or a uniformly random one with probability epsilon (annealed by timestep)."""

    cfg: EpsilonGreedyConfig

    def explore(self, q: np.ndarray, greedy: np.ndarray, timestep: int) -> np.ndarray:
        n = len(greedy)
        rolls = self.rng.random(n)
        return np.where(rolls < self.cfg.epsilon(timestep), self._random(n), greedy)

    def stats(self, timestep: int) -> dict[str, float]:
        return {"cur_epsilon": self.cfg.epsilon(timestep)}


class SoftQ(QExploration):
    """Actions sampled from softmax(Q / temperature); StochasticSampling is temperature 1 after its random phase."""

    def __init__(self, cfg: Any, policy: Any) -> None:
        super().__init__(cfg, policy)
        self.temperature = cfg.temperature if isinstance(cfg, SoftQConfig) else 1.0
        self.random_timesteps = cfg.random_timesteps if isinstance(cfg, StochasticSamplingConfig) else 0

    def explore(self, q: np.ndarray, greedy: np.ndarray, timestep: int) -> np.ndarray:
        n = len(greedy)
        if timestep < self.random_timesteps:
            return self._random(n)
        return sample_softmax(q / self.temperature, self.rng)

    def stats(self, timestep: int) -> dict[str, float]:
        return {"cur_temperature": self.temperature}


def sample_softmax(logits: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One action per row sampled from softmax(``logits``) (inverse CDF of one uniform draw per row)."""
    z = logits - logits.max(axis=1, keepdims=True)
    probs = np.exp(z)
    cdf = np.cumsum(probs, axis=1)
    u = rng.random(len(logits))[:, None] * cdf[:, -1:]
    return np.minimum((u >= cdf).sum(axis=1), logits.shape[1] - 1)


class RandomExploration(QExploration):
    """Uniformly random actions while exploring."""

    def explore(self, q: np.ndarray, greedy: np.ndarray, timestep: int) -> np.ndarray:
        return self._random(len(greedy))

    def stats(self, timestep: int) -> dict[str, float]:
        return {"cur_epsilon": 1.0}


class ParameterNoise(QExploration):
    """Acts with a copy of the Q-net whose weights carry Gaussian noise; the model's own weights never do.

    The noise (a normal draw of the current ``stddev`` per perturbed weight)
    is added to the current weights when actions are computed, so the
    learner trains the unperturbed net and a weight update keeps the
    episode's perturbation. After every sampled fragment the stddev adapts as
    in RLlib (Plappert et al. 2018): the KL divergence of softmax(Q) of the
    perturbed net from the unperturbed one's, over the fragment's
    observations, is compared with ``-log(1 - eps + eps / num_actions)`` of the
    sub-exploration's epsilon: stddev x 1.01 when below, / 1.01 otherwise.
    New noise (of the adapted stddev) is drawn when an episode ended in the fragment. Actions are
    the sub-exploration's (epsilon-greedy) on the perturbed Q-values.
    """

    cfg: ParameterNoiseConfig

    def __init__(self, cfg: ParameterNoiseConfig, policy: Any) -> None:
        super().__init__(cfg, policy)
        model = policy.model
        if not hasattr(model, "perturbable_names"):
            raise ConfigError("exploration_config: ParameterNoise perturbs the built-in Q model's layers; "
                              f"this policy's model is a {type(model).__name__}")
        self.sub = EpsilonGreedy(cfg.sub(), policy)
        self.stddev = cfg.initial_stddev
        self.names = model.perturbable_names()
        self.noise: dict[str, np.ndarray] = {}
        self._resample(model)
        self._cache: Optional[tuple[int, Any]] = None

    def _resample(self, model: torch.nn.Module) -> None:
        params = dict(model.named_parameters())
        self.noise = {name: (self.stddev * self.rng.standard_normal(tuple(params[name].shape))).astype(np.float32)
                      for name in self.names}
        self._cache = None

    def perturbed_q(self, policy: Any, obs: np.ndarray) -> np.ndarray:
        """Q-values of the perturbed copy of the policy's current weights."""
        if self._cache is None or self._cache[0] != policy.weights_version:
            params = {k: v.detach().cpu().numpy() for k, v in policy.model.state_dict().items()}
            for name in self.names:
                params[name] = params[name] + self.noise[name]
            self._cache = (policy.weights_version, policy.model.numpy_net(params))
        return self._cache[1](np.ascontiguousarray(obs, dtype=np.float32))

    def q_values(self, policy: Any, obs: np.ndarray, explore: bool) -> np.ndarray:
        return self.perturbed_q(policy, obs) if explore else policy.q_values(obs)

    def explore(self, q: np.ndarray, greedy: np.ndarray, timestep: int) -> np.ndarray:
        return self.sub.explore(q, greedy, timestep)

    def postprocess(self, policy: Any, batch: SampleBatch) -> None:
        obs = batch[OBS].reshape(-1, batch[OBS].shape[-1])
        clean = _softmax(policy.q_values(obs))
        noisy = _softmax(self.perturbed_q(policy, obs))
        kl = float(np.mean(np.sum(clean * np.log(clean / (noisy + 1e-10) + 1e-10), axis=1)))
        eps = self.sub.cfg.epsilon(policy.global_timestep)
        delta = -np.log(1 - eps + eps / self.num_actions)
        self.stddev = self.stddev * 1.01 if kl <= delta else self.stddev / 1.01
        if np.any(batch[TERMINATEDS]) or np.any(batch[TRUNCATEDS]):
            self._resample(policy.model)

    def stats(self, timestep: int) -> dict[str, float]:
        return {**self.sub.stats(timestep), "cur_stddev": self.stddev}


def _softmax(q: np.ndarray) -> np.ndarray:
    z = np.exp(q - q.max(axis=1, keepdims=True))
    return z / z.sum(axis=1, keepdims=True)


def make_q_exploration(cfg: BaseModel, policy: Any) -> QExploration:
    """The runtime of an ``exploration_config`` for a Q-learning policy."""
    if isinstance(cfg, EpsilonGreedyConfig):
        return EpsilonGreedy(cfg, policy)
    if isinstance(cfg, (SoftQConfig, StochasticSamplingConfig)):
        return SoftQ(cfg, policy)
    if isinstance(cfg, ParameterNoiseConfig):
        return ParameterNoise(cfg, policy)
    if isinstance(cfg, RandomConfig):
        return RandomExploration(cfg, policy)
    raise TypeError(f"no Q-learning exploration for {type(cfg).__name__}")
