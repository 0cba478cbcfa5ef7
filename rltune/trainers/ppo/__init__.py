"""PPO under the names RLlib users import it by.

``from ray.rllib.agents.ppo import PPOTrainer, DEFAULT_CONFIG`` (RLlib 1.x) and
``from ray.rllib.algorithms.ppo import PPO, PPOConfig`` (2.x) become
``from rltune.trainers.ppo import ...`` with the same names::

    PPO, PPOTrainer        the trainer (PPOTrainer is the same class)
    PPOConfig              its config builder
    DEFAULT_CONFIG         its full default config dict (copy it before changing it)
"""

from __future__ import annotations

from rltune.trainers.rllib._config_builder import PPOConfig
from rltune.trainers.algorithms._ppo import PPO

PPOTrainer = PPO
DEFAULT_CONFIG = PPO.get_default_config().to_dict()

__all__ = ["DEFAULT_CONFIG", "PPO", "PPOConfig", "PPOTrainer"]
