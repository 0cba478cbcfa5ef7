"""The small objects of RLlib's utility modules that ported scripts import, written for rltune.

What RLlib example code imports besides algorithms and configs: the
``try_import_*`` helpers, the API-annotation decorators, ``SampleBatch``'s
column names, and base classes used in type hints. Each is rltune's own
equivalent; :mod:`rltune._compat_paths` puts it where RLlib's import path
renamed to ``rltune.`` looks for it. Nothing here imports torch until called.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, TypeVar

F = TypeVar("F")


def try_import_torch(error: bool = False) -> tuple[Any, Any]:
    """RLlib's ``try_import_torch()``: ``(torch, torch.nn)`` (torch is rltune's framework, always installed)."""
    import torch

    return torch, torch.nn


def try_import_tf(error: bool = False) -> tuple[Any, Any, Any]:
    """RLlib's ``try_import_tf()``: ``(None, None, None)``; rltune runs PyTorch only (``framework: tf`` runs on torch).

    ``error=True`` raises ImportError, as RLlib does when TensorFlow is missing.
    """
    if error:
        raise ImportError("rltune runs PyTorch only: TensorFlow is not used (framework 'tf' configs run on torch)")
    return None, None, None


def override(parent: Any) -> Callable[[F], F]:
    """RLlib's ``@override(ParentClass)``: marks a method as overriding ``parent``'s; returns it unchanged."""
    def mark(method: F) -> F:
        return method

    return mark


def api_marker(obj: Any = None, **_: Any) -> Any:
    """RLlib's ``@PublicAPI`` / ``@DeveloperAPI`` / ``@ExperimentalAPI`` (with or without arguments): no change."""
    if obj is not None and callable(obj):
        return obj
    return lambda target: target


TaskType = Any  # RLlib's TaskSettableEnv task type: whatever an env's set_task takes

# RLlib's type aliases (ray.rllib.utils.typing), for type hints: each is what rltune hands over
AgentID = PolicyID = EnvType = EnvID = TensorType = TensorStructType = SampleBatchType = Any
EnvConfigDict = MultiAgentDict = ModelConfigDict = ModelWeights = AlgorithmConfigDict = dict
PartialAlgorithmConfigDict = ResultDict = dict


def Deprecated(old: Any = None, new: Any = None, help: Any = None, error: bool = True) -> Callable[[F], F]:  # noqa: N802
    """RLlib's ``@Deprecated(old=..., new=..., error=...)``: calling the marked object logs (or raises) its note."""
    import functools

    def mark(obj: F) -> F:
        @functools.wraps(obj)  # type: ignore[arg-type]
        def call(*args: Any, **kwargs: Any) -> Any:
            deprecation_warning(str(old or getattr(obj, "__name__", obj)), new, error=error)
            return obj(*args, **kwargs)  # type: ignore[operator]

        return call  # type: ignore[return-value]

    return mark


def deprecation_warning(old: str, new: Optional[str] = None, *, help: Any = None, error: bool = False) -> None:
    """RLlib's ``deprecation_warning(old, new)``: a warning (or a ValueError with ``error=True``)."""
    import logging

    note = f"{old} is deprecated" + (f"; use {new}" if new else "")
    if error:
        raise ValueError(note)
    logging.getLogger(__name__).warning("%s", note)


class SampleBatch(dict):
    """RLlib's ``SampleBatch`` as rltune's batches are: a dict of columns, with RLlib's column names as constants.

    rltune hands hooks plain dicts keyed by these names (``batch[SampleBatch.REWARDS]``).
    """

    OBS = "obs"
    NEXT_OBS = "new_obs"
    ACTIONS = "actions"
    REWARDS = "rewards"
    TERMINATEDS = "terminateds"
    TRUNCATEDS = "truncateds"
    INFOS = "infos"
    ACTION_LOGP = "action_logp"
    ACTION_DIST_INPUTS = "action_dist_inputs"
    VF_PREDS = "vf_preds"
    SEQ_LENS = "seq_lens"

    def __len__(self) -> int:  # RLlib's len(batch) is its number of rows
        rewards: Optional[Any] = self.get(self.REWARDS)
        return len(rewards) if rewards is not None else super().__len__()


class BaseEnv:
    """RLlib's ``BaseEnv``, for type hints: rltune's episode hooks get the env itself as ``base_env``."""


class VectorEnv:
    """RLlib's old ``VectorEnv`` base (``vector_reset`` / ``vector_step``), so modules that subclass it import.

    rltune steps gymnasium vector envs instead (``gymnasium.vector.VectorEnv``;
    see docs/training.md, "Vector envs"); an instance of this class given as
    ``env`` is refused as an env of neither kind.
    """

    def __init__(self, observation_space: Any = None, action_space: Any = None, num_envs: int = 1) -> None:
        """RLlib's constructor: the spaces of one sub-env and the number of sub-envs."""
        self.observation_space, self.action_space, self.num_envs = observation_space, action_space, num_envs
