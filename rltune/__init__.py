"""rltune: hyperparameter tuning and curriculum orchestration for reinforcement learning.

Importing :mod:`rltune` is cheap; the trainers (and torch) load on first use,
and ``rltune.tune`` (``from rltune import tune``) on first access. It also
makes RLlib's and Ray's import paths importable under rltune
(``rltune.algorithms.ppo``, ``rltune.train``, ...: rltune/_compat_paths.py).
"""

from rltune import _compat_paths

__version__ = "0.1.0"

_compat_paths.install()

# Ray's own functions (ray.init -> rltune.init) and ray.rllib's top-level names, resolved on first use
__all__ = ["__version__", "tune", *sorted(_compat_paths.PATHS["rltune"])]


def __getattr__(name: str):  # lazy: `import rltune` stays cheap
    if name == "tune":
        import importlib

        return importlib.import_module("rltune.tune")
    if name in _compat_paths.PATHS["rltune"]:
        return _compat_paths.resolve("rltune", name)
    raise AttributeError(f"module 'rltune' has no attribute {name!r}")
