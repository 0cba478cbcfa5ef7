"""Policy: one policy id's model, batched action computation, trajectory postprocessing, weights.

A Policy acts: it lives in every process that samples (the trainer's local
worker and each rollout worker process). It never updates itself: its
:class:`~rltune.trainers.learning._learner.Learner` owns the optimizer and
the update step, and the algorithm (``algorithms/``) owns the learners of
the policies it trains and runs the learning-side postprocessing on them.
Each algorithm subclasses Policy for its action computation and
postprocessing (GAE for PPO, n-step for DQN).
"""

from __future__ import annotations

import inspect
import os
import weakref
from typing import Any, ClassVar, Optional

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rltune._metrics import DEFAULT_POLICY_ID  # re-exported: trainers import it from here
from rltune.trainers._config import TrainerSettings
from rltune.trainers.policies._numpy_mlp import MAX_NUMPY_ROWS
from rltune.trainers.sampling._sample_batch import SampleBatch, flatten_time_major
from rltune.errors import SpaceError
from rltune.trainers.policies._action_dists import ActionDist, action_dist_for
from rltune.trainers.policies._preprocessors import get_preprocessor


class Policy:
    """Base class of the per-algorithm policies.

    Invariants: ``compute_actions`` takes preprocessed observations ``[B, obs_size]``
    (the preprocessor catalog's rows, ``_preprocessors.py``) and returns actions
    ``[B, *action_shape]`` plus extra columns of length B (an action of a space
    other than Discrete or Box is one flat row that the distribution catalog,
    ``_action_dists.py``, decodes in ``to_env_actions``);
    ``get_weights`` returns CPU numpy arrays that ``set_weights`` of the same
    policy class in any process accepts; ``weights_version`` grows whenever the
    model's weights change (a learner update, ``set_weights``, any
    ``model.load_state_dict`` such as a restore), and the model's optional
    fast paths are re-copied lazily when it has grown since they were built.

    A model must implement ``forward`` alone (what the algorithm's loss
    calls). It may opt in to faster rollouts with ``forward_inference``
    (torch, same outputs) and ``numpy_forward`` (numpy rows), whose caches of
    the weights ``invalidate_fused`` drops (see ``_models.py``).

    ``config_class`` is the settings model of the algorithm the policy
    belongs to: a trainer whose config is not one of these (a PPO trainer
    hosting a ``DQNPolicy``) acts with the policy but builds it with a
    config of that class, never trains it (see
    :func:`~rltune.trainers.policies._policy_spec.policy_config`).
    """

    config_class: ClassVar[type[TrainerSettings]] = TrainerSettings

    def __init__(
        self,
        observation_space: gym.Space,
        action_space: gym.Space,
        config: TrainerSettings,
        *,
        device: torch.device | str = "cpu",
        seed: int | None = None,
    ) -> None:
        self.observation_space = observation_space
        self.action_space = action_space
        self.config = config
        self.device = torch.device(device)
        self.preprocessor = get_preprocessor(observation_space)
        self.is_continuous = isinstance(action_space, gym.spaces.Box)
        # The catalog's distribution of the action space (None for a space it has none for: policies that only act).
        self.action_dist: ActionDist | None = _optional_action_dist(action_space)
        # Any other than a Discrete or Box space: batches hold its actions as flat rows, decoded by the action_dist.
        self.is_structured = self.action_dist is not None and not isinstance(action_space, (gym.spaces.Discrete, gym.spaces.Box))
        if self.is_continuous:
            self.action_shape: tuple[int, ...] = tuple(action_space.shape)
            self.action_dtype: type = np.float32
        elif self.is_structured:
            self.action_shape, self.action_dtype = self.action_dist.action_shape, self.action_dist.action_dtype
        else:
            self.action_shape = ()
            self.action_dtype = np.int64
        # compute_actions gives a Discrete space's action indices 0..n-1; the env takes start..start+n-1.
        self.action_start = int(getattr(action_space, "start", 0)) if isinstance(action_space, gym.spaces.Discrete) else 0
        # Exploration noise (action sampling, epsilon) comes from this generator; checkpoints save its state.
        self.rng = np.random.default_rng(seed)
        self.global_timestep = 0
        self.weights_version = 0
        self._fast_paths_version = 0  # the weights_version the model's fast-path caches were built from
        self.model = self.make_model().to(self.device)
        self.model.register_load_state_dict_post_hook(_BumpOnLoad(self))

    @classmethod
    def from_checkpoint(cls, checkpoint: str | os.PathLike[str], policy_ids: Any = None) -> Any:
        """RLlib's: the policy of an exported policy directory, or a dict of a trainer checkpoint's policies by id.

        ``policy_ids`` picks some of a checkpoint's policies (default: those its
        algorithm trains); each is built on the CPU in eval mode, with no trainer.
        """
        from rltune.trainers.checkpoints._policy_export import policies_from_checkpoint

        return policies_from_checkpoint(checkpoint, policy_ids)

    # -- to implement -------------------------------------------------------------
    def make_model(self) -> nn.Module:
        """Build the torch model for this policy's spaces and ``config.model`` (default: none, for policies that only act)."""
        return nn.Module()

    def compute_actions(self, obs: np.ndarray, explore: bool = True) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Actions for a batch of preprocessed observations, and extra columns to store.

        A ``Discrete`` action is the index ``0 .. n - 1`` (what the model and
        the batches hold); :meth:`to_env_actions` adds the space's ``start``.
        """
        raise NotImplementedError

    def postprocess_trajectory(self, batch: SampleBatch) -> SampleBatch:
        """Turn a time-major ``[T, N]`` batch into a flat training batch (default: just flatten).

        Runs where the learner is (the algorithm's postprocessing of the
        fragments a sample source handed over), on the learner's policy.
        """
        return flatten_time_major(batch)

    def get_initial_state(self) -> list[np.ndarray]:
        """The recurrent state of one env at an episode's start, one array per state tensor (no batch dimension).

        Default: the model's ``get_initial_state()`` (tensors or arrays) when
        it has one, else ``[]``: the policy is stateless.
        """
        initial = getattr(self.model, "get_initial_state", None)
        if initial is None:
            return []
        return [np.array(s.detach().cpu().numpy() if isinstance(s, torch.Tensor) else s, dtype=np.float32) for s in initial()]

    def is_recurrent(self) -> bool:
        """Whether the policy carries a recurrent state (its :meth:`get_initial_state` is not empty)."""
        return bool(self.get_initial_state())

    def compute_actions_with_state(
        self, obs: np.ndarray, state: list[np.ndarray], explore: bool = True
    ) -> tuple[np.ndarray, list[np.ndarray], dict[str, np.ndarray]]:
        """Actions for a batch of observations ``[B, ...]`` and states (one ``[B, ...]`` array per state tensor).

        Returns the actions, the states after the step (``state_out``, as
        ``state`` is laid out) and the extra columns. A recurrent policy
        overrides it; the default, for stateless policies, is
        :meth:`compute_actions` with an empty ``state_out``.
        """
        actions, extras = self.compute_actions(obs, explore=explore)
        return actions, [], extras

    def on_fragment(self, batch: SampleBatch) -> None:
        """The acting side's look at each raw ``[T, N]`` fragment it collected, before it is handed over (default: nothing).

        Runs where the policy acted (a rollout worker), e.g. to adapt exploration noise.
        """

    # -- shared ----------------------------------------------------------------------
    def obs_tensor(self, obs: np.ndarray) -> torch.Tensor:
        """Preprocessed observations as a float tensor on the policy's device."""
        return torch.from_numpy(np.ascontiguousarray(obs, dtype=np.float32)).to(self.device)

    def numpy_inference(self, obs: np.ndarray) -> Any:
        """The model's ``numpy_forward`` of these rows, or None where torch runs them instead.

        Numpy serves a rollout step's few rows on the CPU, for models that
        have a ``numpy_forward`` (the built-in ones; see ``_numpy_mlp.py``).
        """
        forward = getattr(self.model, "numpy_forward", None)
        if forward is None or self.device.type != "cpu" or len(obs) > MAX_NUMPY_ROWS:
            return None
        self._sync_fast_paths()
        return forward(np.ascontiguousarray(obs, dtype=np.float32))

    def inference_forward(self, obs: torch.Tensor) -> Any:
        """The model's outputs for sampling: its ``forward_inference`` where it has one, else ``forward``.

        Call under ``torch.inference_mode``.
        """
        forward = getattr(self.model, "forward_inference", None)
        if forward is None:
            return self.model(obs)
        self._sync_fast_paths()
        return forward(obs)

    def weights_changed(self) -> None:
        """Note that the model's weights changed in place (bumps ``weights_version``).

        Learner updates, ``set_weights`` and ``load_state_dict`` do this
        themselves; call it only after editing parameters by hand.
        """
        self.weights_version += 1

    def _sync_fast_paths(self) -> None:
        """Drop the model's fast-path caches if the weights changed since they were built."""
        if self._fast_paths_version != self.weights_version:
            invalidate = getattr(self.model, "invalidate_fused", None)
            if invalidate is not None:
                invalidate()
            self._fast_paths_version = self.weights_version

    def compute_single_action(self, obs: Any, state: Optional[list[np.ndarray]] = None, explore: bool = False) -> Any:
        """The env action for one raw observation (deterministic unless ``explore``).

        With ``state`` (one env's state, e.g. :meth:`get_initial_state` at an
        episode's start), a recurrent policy's step: returns ``(action,
        state_out, extras)`` with that env's next state and extra columns.
        """
        return self.single_action_of_row(self.preprocessor(obs)[None], state, explore)

    def single_action_of_row(self, row: np.ndarray, state: Optional[list[np.ndarray]] = None, explore: bool = False) -> Any:
        """:meth:`compute_single_action` of one preprocessed (and filtered) observation, as a ``[1, size]`` row."""
        if state is None:
            actions, _ = self.compute_actions(row, explore=explore)
            return self.to_env_actions(actions)[0]
        batched = [np.asarray(s, dtype=np.float32)[None] for s in state]
        actions, state_out, extras = self.compute_actions_with_state(row, batched, explore=explore)
        return self.to_env_actions(actions)[0], [s[0] for s in state_out], {k: v[0] for k, v in extras.items()}

    def to_env_actions(self, actions: np.ndarray) -> list[Any]:
        """Per-env actions as ``env.step`` takes them: ints (index plus the space's ``start``), float arrays clipped to
        the bounds, or the structured actions of other spaces (tuples, dicts, arrays; see ``_action_dists.py``)."""
        if not self.is_continuous:
            if self.is_structured:
                return self.action_dist.to_env(actions, clip=self.config.clip_actions)  # type: ignore[union-attr]
            return (actions + self.action_start).tolist() if self.action_start else actions.tolist()
        if self.config.clip_actions:
            actions = np.clip(actions, self.action_space.low, self.action_space.high)
        return list(actions.astype(self.action_space.dtype, copy=False))

    def get_weights(self) -> dict[str, np.ndarray]:
        """The model's parameters and buffers as CPU numpy arrays."""
        return {k: v.detach().cpu().numpy().copy() for k, v in self.model.state_dict().items()}

    def set_weights(self, weights: dict[str, np.ndarray]) -> None:
        """Load weights from :meth:`get_weights` (of any process)."""
        self.model.load_state_dict({k: torch.as_tensor(v) for k, v in weights.items()})  # bumps weights_version

    def set_global_timestep(self, timestep: int) -> None:
        """The trainer's total sampled timesteps (drives exploration schedules)."""
        self.global_timestep = timestep


class _BumpOnLoad:
    """``load_state_dict`` post-hook of a policy's model: bumps the policy's ``weights_version``.

    It holds the policy weakly (no reference cycle) and checks the module is
    still the policy's model. A deep copy of the model alone (a target
    network) gets a hook of no policy; a deep copy or a pickle of the whole
    policy, a hook of the copy.
    """

    def __init__(self, policy: Policy | None) -> None:
        self.policy = weakref.ref(policy) if policy is not None else _no_policy

    def __call__(self, module: nn.Module, incompatible_keys: Any) -> None:
        policy = self.policy()
        if policy is not None and policy.model is module:
            policy.weights_changed()

    def __deepcopy__(self, memo: dict[int, Any]) -> _BumpOnLoad:
        policy = self.policy()
        return _BumpOnLoad(memo.get(id(policy)) if policy is not None else None)

    def __reduce__(self) -> tuple[Any, ...]:
        return _BumpOnLoad, (self.policy(),)


def _no_policy() -> None:
    return None


def _optional_action_dist(space: gym.Space) -> ActionDist | None:
    """The catalog's distribution of ``space``, or None if it has none (an algorithm that needs one says so)."""
    try:
        return action_dist_for(space)
    except SpaceError:
        return None


class RandomPolicy(Policy):
    """Acts uniformly at random in its action space and never learns (an opponent or a baseline in multi-agent envs)."""

    def compute_actions(self, obs: np.ndarray, explore: bool = True) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        n = len(obs)
        if self.is_structured:
            return self.action_dist.uniform(self.rng, n)[0], {}  # type: ignore[union-attr]
        if self.is_continuous:
            low, high = self.action_space.low, self.action_space.high
            actions = self.rng.uniform(low, high, size=(n,) + self.action_shape).astype(np.float32)
        else:
            actions = self.rng.integers(0, self.action_space.n, size=n)  # indices: to_env_actions adds start
        return actions, {}


def wants_other_agent_batches(policy: Policy) -> bool:
    """Whether a policy's ``postprocess_trajectory`` takes ``other_agent_batches`` (centralized critics)."""
    cached = type(policy).__dict__.get("_rltune_wants_others")  # not inherited: a subclass may differ
    if cached is None:
        try:
            cached = "other_agent_batches" in inspect.signature(type(policy).postprocess_trajectory).parameters
        except (TypeError, ValueError):
            cached = False
        type(policy)._rltune_wants_others = cached  # type: ignore[attr-defined]
    return cached
