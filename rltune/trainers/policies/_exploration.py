"""``exploration_config``: RLlib's exploration types by name, their keys and defaults, and which algorithm takes which.

A config names its type with ``type`` (RLlib's class names; a key block
without ``type`` is the algorithm's default type), and the remaining keys are
that type's. What each type does while sampling with ``explore=True``:

- ``EpsilonGreedy`` (DQN's default): the greedy action, or a uniformly
  random one with probability epsilon; epsilon stays at ``initial_epsilon``
  for ``warmup_timesteps``, then anneals linearly to ``final_epsilon`` over
  ``epsilon_timesteps``.
- ``SoftQ``: actions sampled from softmax(Q / ``temperature``).
- ``ParameterNoise`` (Plappert et al. 2018): actions of a copy of the Q-net
  whose weights carry Gaussian noise (resampled when an episode ended, its
  stddev adapted after every fragment), through an epsilon-greedy
  sub-exploration that acts at random for the first ``random_timesteps``.
- ``StochasticSampling`` (PPO's default): actions sampled from the policy's
  action distribution (DQN: softmax(Q)); uniformly random ones for the first
  ``random_timesteps``.
- ``Random``: uniformly random actions.

Without exploration (``explore=False``: evaluation, ``compute_single_action``)
every type acts greedily (the distribution's mode). The runtime of the
Q-learning types is in ``_q_exploration.py``.
"""

from __future__ import annotations

import difflib
import logging
from typing import Any, Literal, Optional, Union

import gymnasium as gym
import numpy as np
from pydantic import BaseModel, Field, ValidationError

from rltune.trainers._config import _Strict

logger = logging.getLogger(__name__)


class EpsilonGreedyConfig(_Strict):
    """Epsilon-greedy: the greedy action, or a uniformly random one with probability epsilon."""

    type: Literal["EpsilonGreedy"] = Field("EpsilonGreedy", description="Epsilon-greedy over the Q-values.")
    initial_epsilon: float = Field(1.0, ge=0.0, le=1.0, description="Epsilon until warmup_timesteps.")
    final_epsilon: float = Field(0.02, ge=0.0, le=1.0, description="Epsilon after warmup_timesteps + epsilon_timesteps.")
    epsilon_timesteps: int = Field(10_000, ge=0, description="Timesteps over which epsilon anneals linearly.")
    warmup_timesteps: int = Field(0, ge=0, description="Timesteps at initial_epsilon before the annealing starts.")

    def epsilon(self, timestep: int) -> float:
        """Epsilon at ``timestep`` (RLlib's piecewise-linear schedule)."""
        t = timestep - self.warmup_timesteps
        if t <= 0:
            return self.initial_epsilon
        if t >= self.epsilon_timesteps:
            return self.final_epsilon
        return self.initial_epsilon + t / self.epsilon_timesteps * (self.final_epsilon - self.initial_epsilon)


class SoftQConfig(_Strict):
    """Boltzmann exploration: actions sampled from softmax(Q / temperature)."""

    type: Literal["SoftQ"] = Field("SoftQ", description="Samples softmax(Q / temperature).")
    temperature: float = Field(1.0, gt=0.0, description="Divides the Q-values before the softmax (higher: more uniform).")


class ParameterNoiseConfig(_Strict):
    """Parameter-space noise: act with a perturbed copy of the Q-net; the learner trains the unperturbed one."""

    type: Literal["ParameterNoise"] = Field("ParameterNoise", description="Gaussian noise on the Q-net's weights.")
    initial_stddev: float = Field(1.0, gt=0.0, description="Stddev of the weight noise at the start (then adapted).")
    random_timesteps: int = Field(10_000, ge=0, description="Timesteps of uniformly random actions at the start.")
    sub_exploration: Optional[EpsilonGreedyConfig] = Field(
        None,
        description="Epsilon-greedy on the perturbed net's Q-values; None: epsilon 1.0 for random_timesteps, then 0.01.",
    )

    def sub(self) -> EpsilonGreedyConfig:
        """The sub-exploration, RLlib's step schedule when unset."""
        if self.sub_exploration is not None:
            return self.sub_exploration
        return EpsilonGreedyConfig(initial_epsilon=1.0, final_epsilon=0.01, warmup_timesteps=self.random_timesteps,
                                   epsilon_timesteps=1)


class StochasticSamplingConfig(_Strict):
    """Sampling from the policy's action distribution (DQN: softmax over the Q-values)."""

    type: Literal["StochasticSampling"] = Field("StochasticSampling", description="Samples the action distribution.")
    random_timesteps: int = Field(0, ge=0, description="Timesteps of uniformly random actions at the start.")


class RandomConfig(_Strict):
    """Uniformly random actions while exploring."""

    type: Literal["Random"] = Field("Random", description="Uniformly random actions.")


ExplorationConfig = Union[EpsilonGreedyConfig, SoftQConfig, ParameterNoiseConfig, StochasticSamplingConfig, RandomConfig]
TYPES: dict[str, type[_Strict]] = {
    cls.model_fields["type"].default: cls
    for cls in (EpsilonGreedyConfig, SoftQConfig, ParameterNoiseConfig, StochasticSamplingConfig, RandomConfig)
}
Q_TYPES = ("EpsilonGreedy", "SoftQ", "ParameterNoise", "StochasticSampling", "Random")  # DQN
DISTRIBUTION_TYPES = ("StochasticSampling", "Random")  # algorithms that sample an action distribution (PPO)

_ACTION_NOISE = ("GaussianNoise", "OrnsteinUhlenbeckNoise", "PerWorkerGaussianNoise", "PerWorkerOrnsteinUhlenbeckNoise")
_NOT_YET = ("PerWorkerEpsilonGreedy", "Curiosity", "RE3", "RND", "NovelD", "ThompsonSampling", "UpperConfidenceBound",
            "SlateEpsilonGreedy", "SlateSoftQ")


def type_keys(accepted: tuple[str, ...]) -> str:
    """``Type(key=default, ...)`` for each accepted type: the keys ``--show-config`` documents."""
    parts = []
    for name in accepted:
        fields = {k: f.default for k, f in TYPES[name].model_fields.items() if k != "type"}
        parts.append(f"{name}({', '.join(f'{k}={v!r}' for k, v in fields.items())})")
    return "; ".join(parts)


def parse_exploration(value: Any, *, algorithm: str, accepted: tuple[str, ...], default: str) -> BaseModel:
    """An ``exploration_config`` value as its type's config; ValueError with one message naming the problem.

    A dict without ``type`` is of the ``default`` type. Types RLlib has that
    ``algorithm`` cannot use are refused with what to use instead.
    """
    if isinstance(value, BaseModel):
        value = value.model_dump()
    if value is None:
        value = {}
    if not isinstance(value, dict):
        raise ValueError(f"must be a mapping with a 'type' ({', '.join(accepted)}) and its keys, but got {value!r:.80}")
    name = value.get("type", default)
    if isinstance(name, str) and name.startswith("ray.rllib.") and "." in name:
        name = name.rsplit(".", 1)[1]  # RLlib also takes its classes' import paths
    if name not in accepted:
        raise ValueError(_refusal(name, algorithm, accepted))
    cls = TYPES[name]
    try:
        return cls.model_validate({**value, "type": name})
    except ValidationError as exc:
        raise ValueError("; ".join(_describe(name, cls, err) for err in exc.errors())) from None


def _refusal(name: Any, algorithm: str, accepted: tuple[str, ...]) -> str:
    takes = f"{algorithm} takes {', '.join(accepted)}"
    if name in _ACTION_NOISE:
        return (f"type {name!r} adds noise to the actions of a deterministic continuous-action policy (DDPG, TD3), "
                f"an algorithm rltune does not have yet; {takes}"
                + (" (PPO explores continuous actions by sampling its Gaussian: StochasticSampling)" if "SoftQ" not in accepted else ""))
    if name in TYPES:
        if name in ("EpsilonGreedy", "SoftQ", "ParameterNoise"):
            return f"type {name!r} acts on Q-values (DQN); {takes} ({accepted[0]} by default: samples its action distribution)"
        return f"type {name!r} is not available for {algorithm}; {takes}"
    if name in _NOT_YET:
        return f"type {name!r}: an RLlib exploration rltune does not support yet; {takes}"
    close = difflib.get_close_matches(str(name), list(accepted), n=1, cutoff=0.5)
    return f"unknown type {name!r}" + (f"; did you mean {close[0]!r}?" if close else "") + f" ({takes})"


def _describe(name: str, cls: type[_Strict], err: Any) -> str:
    path = ".".join(str(p) for p in err["loc"])
    if err["type"] == "extra_forbidden":
        keys = [k for k in cls.model_fields if k != "type"]
        close = difflib.get_close_matches(str(err["loc"][-1]), keys, n=1, cutoff=0.5)
        hint = f"did you mean {close[0]!r}? " if close else ""
        return f"{path}: not a key of {name} ({hint}{name} takes {', '.join(keys) or 'no keys'})"
    return f"{path}: {err['msg']} (got {err.get('input')!r:.40})"


# -- RLlib's old DQN names (before exploration_config) ------------------------------------------
_OLD_EPSILON_KEYS = ("exploration_fraction", "exploration_final_eps", "exploration_initial_eps", "schedule_max_timesteps")
_OLD_KEYS = _OLD_EPSILON_KEYS + ("soft_q", "softmax_temp", "parameter_noise", "exploration")


def map_old_exploration_keys(data: Any) -> Any:
    """A DQN config dict with RLlib's old exploration keys mapped onto ``exploration_config`` (logged once).

    ``epsilon_timesteps = exploration_fraction * schedule_max_timesteps``
    (old defaults 0.1 and 100000), ``final_epsilon = exploration_final_eps``,
    ``initial_epsilon = exploration_initial_eps``; ``soft_q``/``softmax_temp``
    make SoftQ, ``parameter_noise`` ParameterNoise; ``exploration`` is taken
    as ``exploration_config``. Given with ``exploration_config`` they are an error.
    """
    if not isinstance(data, dict) or not any(k in data for k in _OLD_KEYS):
        return data
    data = dict(data)
    old = {k: data.pop(k) for k in _OLD_KEYS if k in data}
    if "exploration_config" in data:
        raise ValueError(f"exploration_config: given together with RLlib's old exploration keys {sorted(old)}; keep exploration_config alone")
    mapped: dict[str, Any]
    if isinstance(old.get("exploration"), dict):
        mapped = dict(old["exploration"])
    elif old.get("parameter_noise"):
        mapped = {"type": "ParameterNoise"}
    elif old.get("soft_q"):
        mapped = {"type": "SoftQ", "temperature": old.get("softmax_temp", 1.0)}
    else:
        mapped = {"type": "EpsilonGreedy"}
    if any(k in old for k in _OLD_EPSILON_KEYS):
        if mapped["type"] != "EpsilonGreedy":
            raise ValueError(f"{sorted(k for k in old if k in _OLD_EPSILON_KEYS)} set an epsilon schedule, but the old keys "
                             f"also ask for {mapped['type']}; keep one")
        fraction, horizon = old.get("exploration_fraction", 0.1), old.get("schedule_max_timesteps", 100_000)
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (fraction, horizon)):
            raise ValueError(f"exploration_fraction and schedule_max_timesteps must be numbers, but got {fraction!r} and {horizon!r}")
        mapped["epsilon_timesteps"] = int(fraction * horizon)
        for old_key, key in (("exploration_final_eps", "final_epsilon"), ("exploration_initial_eps", "initial_epsilon")):
            if old_key in old:
                mapped[key] = old[old_key]
    logger.warning("RLlib's old exploration keys %s are mapped onto exploration_config: %s (write that instead)", sorted(old), mapped)
    data["exploration_config"] = mapped
    return data


# -- random actions with their probabilities (the behaviour policy of StochasticSampling's random phase, Random) --
def uniform_actions(space: gym.Space, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` random actions of a Discrete or Box space and their log-probabilities under the sampling distribution.

    Discrete: uniform over the actions. Box: uniform between finite bounds,
    a standard normal along an unbounded dimension. The log-probabilities
    are those of this behaviour policy, so an importance ratio against it
    (PPO's) is the true one.
    """
    if isinstance(space, gym.spaces.Discrete):
        actions = rng.integers(0, int(space.n), size=n)  # action indices, as the policies' distributions give them
        return actions, np.full(n, -np.log(int(space.n)), dtype=np.float32)
    actions, logp = uniform_box(np.asarray(space.low, np.float64).reshape(-1), np.asarray(space.high, np.float64).reshape(-1), rng, n)
    return actions.reshape((n,) + tuple(space.shape)).astype(np.float32), logp.astype(np.float32)


def uniform_box(low: np.ndarray, high: np.ndarray, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` rows uniform within flat bounds (standard normal along an unbounded dimension) and their log-probabilities."""
    bounded = np.isfinite(low) & np.isfinite(high)
    uniform = rng.uniform(np.where(bounded, low, 0.0), np.where(bounded, high, 1.0), size=(n, low.size))
    normal = rng.standard_normal((n, low.size))
    actions = np.where(bounded, uniform, normal)
    logp = np.where(bounded, -np.log(np.where(bounded, high - low, 1.0)), -0.5 * normal**2 - 0.5 * np.log(2 * np.pi)).sum(axis=1)
    return actions, logp


def random_phase(cfg: BaseModel, timestep: int) -> bool:
    """Whether an algorithm that samples its distribution acts uniformly at random at ``timestep``."""
    if isinstance(cfg, RandomConfig):
        return True
    return isinstance(cfg, StochasticSamplingConfig) and timestep < cfg.random_timesteps
