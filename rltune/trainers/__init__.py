"""RL trainers: rollout workers, policies and models, algorithms, checkpoints.

Public names::

    PPO, DQN, Trainer, get_trainer_class
    get_trainable_cls                       Ray Tune's name of get_trainer_class (RLlib 2.x scripts)
    PPOConfig, DQNConfig, AlgorithmConfig   config builders (RLlib's AlgorithmConfig API)
    PPOTrainer, DQNTrainer                  old RLlib names of PPO and DQN
    pretty_print                            a result dict as YAML-like text (RLlib's)
    register_env, registered_envs, EnvContext (defined in rltune.env)
    Policy, RandomPolicy, DEFAULT_POLICY_ID
    PPOPolicy, DQNPolicy                    the algorithms' policies, to subclass (a custom model or postprocessing)
    PolicySpec                              one policy of a multi-agent config
    PolicySet                               the policies an algorithm owns: by id, with specs, spaces, observation
                                            filters, agent mapping and policies_to_train (trainer.algorithm.policy_set)
    MultiAgentEnv (defined in rltune.env)
    SampleSource, SampleResult, Fragment, EpisodeMetrics
                                            a sample source's contract: raw episode fragments in, weights out
                                            (plug one in with Trainer.make_sample_source; docs/sample_sources.md)
    Learner, OptimizerSpec                  a policy's update step and its named torch.optim optimizers (a new
                                            algorithm's learner subclasses Learner; docs/development.md)
    register_encoder                        a model encoder (e.g. a CNN) for an observation kind ("image", ...)
"""

from __future__ import annotations

import difflib
import importlib
from typing import TYPE_CHECKING

from rltune._imports import import_object
from rltune._pretty_print import pretty_print
from rltune.env import EnvContext, register_env, registered_envs
from rltune.errors import ConfigError
from rltune.env import MultiAgentEnv
from rltune.trainers.policies._policy import DEFAULT_POLICY_ID, Policy, RandomPolicy
from rltune.trainers.rllib._config_builder import AlgorithmConfig, DQNConfig, PPOConfig
from rltune.trainers.policies._policy_spec import PolicySpec
from rltune.trainers._trainer import Trainer
from rltune.trainers.sampling._fragment import Fragment
from rltune.trainers.sampling._sample_batch import EpisodeMetrics, SampleResult
from rltune.trainers.sampling._sample_source import SampleSource
from rltune.trainers.learning._learner import Learner
from rltune.trainers.policies._policy_set import PolicySet
from rltune.trainers.learning._optimizers import OptimizerSpec
from rltune.trainers.policies._encoders import register_encoder

if TYPE_CHECKING:  # the lazy names below, for type checkers and the API reference (docs/api/trainers.md)
    from rltune.trainers.algorithms._dqn import DQN, DQNPolicy
    from rltune.trainers.algorithms._ppo import PPO, PPOPolicy

_TRAINERS = {
    "PPO": "rltune.trainers.algorithms._ppo:PPO",
    "DQN": "rltune.trainers.algorithms._dqn:DQN",
}
_POLICIES = {name: f"{_TRAINERS[name].partition(':')[0]}:{name}Policy" for name in _TRAINERS}  # PPOPolicy, DQNPolicy


def get_trainer_class(name: str) -> type[Trainer]:
    """The trainer class for an algorithm name (case-insensitive, e.g. ``"ppo"``) or an import string."""
    if isinstance(name, type) and issubclass(name, Trainer):
        return name
    key = str(name).upper()
    if key in _TRAINERS:
        module, _, attr = _TRAINERS[key].partition(":")
        return getattr(importlib.import_module(module), attr)
    if ":" in str(name):
        cls = import_object(str(name), "run")
        if isinstance(cls, type) and issubclass(cls, Trainer):
            return cls
        raise ConfigError(f"run {name!r} is not a rltune Trainer subclass")
    close = difflib.get_close_matches(key, list(_TRAINERS), n=1, cutoff=0.4)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise ConfigError(f"unknown algorithm {name!r}{hint} (available: {', '.join(sorted(_TRAINERS))})")


def get_trainable_cls(name: str) -> type[Trainer]:
    """Ray Tune's name of :func:`get_trainer_class` (``get_trainable_cls("PPO").get_default_config()``)."""
    return get_trainer_class(name)


_OLD_NAMES = {"PPOTrainer": "PPO", "DQNTrainer": "DQN"}  # RLlib's names before 2.0: the same classes


def __getattr__(name: str):  # lazy PPO / DQN (and their policies), so that importing the package stays cheap
    if name in _TRAINERS or name in _OLD_NAMES:
        return get_trainer_class(_OLD_NAMES.get(name, name))
    if name.endswith("Policy") and name[: -len("Policy")] in _POLICIES:
        module, _, attr = _POLICIES[name[: -len("Policy")]].partition(":")
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'rltune.trainers' has no attribute {name!r}")


__all__ = [
    "AlgorithmConfig",
    "DEFAULT_POLICY_ID",
    "DQN",
    "DQNConfig",
    "DQNPolicy",
    "DQNTrainer",
    "EnvContext",
    "EpisodeMetrics",
    "Fragment",
    "Learner",
    "MultiAgentEnv",
    "OptimizerSpec",
    "PPO",
    "PPOConfig",
    "PPOPolicy",
    "PPOTrainer",
    "Policy",
    "PolicySet",
    "PolicySpec",
    "RandomPolicy",
    "SampleResult",
    "SampleSource",
    "Trainer",
    "get_trainable_cls",
    "get_trainer_class",
    "pretty_print",
    "register_encoder",
    "register_env",
    "registered_envs",
]
