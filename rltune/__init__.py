"""rltune: hyperparameter tuning and curriculum orchestration for reinforcement learning.

Importing :mod:`rltune` is cheap; the trainers (and torch) load on first use,
and ``rltune.tune`` (``from rltune import tune``) on first access.
"""

__version__ = "0.1.0"

__all__ = ["__version__", "tune"]


def __getattr__(name: str):  # lazy: `import rltune` stays cheap
    if name == "tune":
        import importlib

        return importlib.import_module("rltune.tune")
    raise AttributeError(f"module 'rltune' has no attribute {name!r}")
