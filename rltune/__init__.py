"""rltune: hyperparameter tuning and curriculum orchestration for reinforcement learning.

Importing :mod:`rltune` is cheap; the trainers (and torch) load on first use.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
