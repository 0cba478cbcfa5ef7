"""DQN under the names RLlib users import it by.

``from ray.rllib.agents.dqn import DQNTrainer, DEFAULT_CONFIG`` (RLlib 1.x) and
``from ray.rllib.algorithms.dqn import DQN, DQNConfig`` (2.x) become
``from rltune.trainers.dqn import ...`` with the same names::

    DQN, DQNTrainer        the trainer (DQNTrainer is the same class)
    DQNConfig              its config builder
    DEFAULT_CONFIG         its full default config dict (copy it before changing it)
"""

from __future__ import annotations

from rltune.trainers.rllib._config_builder import DQNConfig
from rltune.trainers.algorithms._dqn import DQN

DQNTrainer = DQN
DEFAULT_CONFIG = DQN.get_default_config().to_dict()

__all__ = ["DEFAULT_CONFIG", "DQN", "DQNConfig", "DQNTrainer"]
