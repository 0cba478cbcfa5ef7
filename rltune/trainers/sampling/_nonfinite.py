"""Non-finite numbers (NaN, inf) never train silently: screening of samples, ``nan_policy``, checks of saved weights.

Samplers screen every reward and observation where it enters a batch.
Rewards: a single-agent sampler screens a fragment's rewards once, as the
float32 batch holds them, before its postprocessing; a multi-agent one each
env's step rewards as they come (a Python sum), before they are summed into
transitions. A reward is non-finite when float32 cannot hold it: NaN, inf,
or beyond float32's range. Observations: each step's, as preprocessed
float32 rows, by one numpy sum (:func:`finite`) before an observation
filter or the policy's forward pass sees them: without a filter the array
the next forward pass takes (the envs' next observations and the new
episodes' first ones; the episodes' final observations once per fragment,
before its postprocessing), with a filter the step's rows before the filter
(and each new episode's first observation). Observation spaces without
floating-point numbers are not screened. Only when a sum is not finite are
the values looked at one by one.

What is done with a non-finite value is ``nan_policy`` (:class:`NanPolicy`):
``raise`` (default) raises an :class:`~rltune.errors.EnvError` naming the
env, worker, env index, agent and step and what was not finite;
``drop_episode`` ends the episode there (at the fragment's end for a
single-agent reward), drops the steps of it that were not handed over yet
(none of them enters a batch, a filter's statistics or a replay buffer),
resets the env and counts the episode
(``num_dropped_episodes_nonfinite`` in results, with a warning per
iteration). With ``batch_mode: truncate_episodes`` the earlier fragments of
a long episode, finite, were handed over before the bad step came.

Learners skip a gradient step whose loss or gradient norm is not finite
(``_sgd_step.py``); checkpoints refuse non-finite tensors on save and on
load (:func:`check_finite_tensors`).
"""

from __future__ import annotations

import logging
from math import isfinite
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from rltune.errors import CheckpointError, EnvError

logger = logging.getLogger(__name__)

NAN_POLICIES = ("raise", "drop_episode")
FLOAT32_MAX = float(np.finfo(np.float32).max)
_NO_AGENT = object()
_sum = np.add.reduce


def has_floats(space: gym.Space) -> bool:
    """Whether observations of ``space`` can hold non-finite numbers (a floating-point Box is part of it)."""
    if isinstance(space, gym.spaces.Box):
        return bool(np.issubdtype(space.dtype, np.floating))
    if isinstance(space, gym.spaces.Tuple):
        return any(map(has_floats, space.spaces))
    if isinstance(space, gym.spaces.Dict):
        return any(map(has_floats, space.spaces.values()))
    return False


def finite(rows: np.ndarray) -> bool:
    """Whether every entry of a float32 array is finite.

    One sum: NaN or inf in the rows make it non-finite. Only when it is not
    (also when finite entries overflow float32 in the sum) are the entries
    looked at one by one. On a step's few rows this costs a third of
    ``np.isfinite(rows).all()``, the price of one numpy call.
    """
    return isfinite(_sum(rows, None)) or bool(np.isfinite(rows).all())


def bad_reward(reward: Any) -> bool:
    """Whether a reward (a number, or the sum of a step's rewards) is NaN, inf or beyond float32's range."""
    return not -FLOAT32_MAX <= reward <= FLOAT32_MAX


def describe_reward(reward: Any) -> str:
    """What is wrong with a reward that :func:`bad_reward` refused (or that float32 holds as inf: perhaps one beyond its range)."""
    value = float(reward)
    if isinstance(reward, np.float32) and abs(value) == float("inf"):
        return f"reward {value!r} (in float32: the env's may be larger than float32's range)"
    return f"reward {value!r}" + (" (beyond float32's range)" if value == value and abs(value) != float("inf") else "")


def describe_obs(vec: np.ndarray) -> str:
    """Which entries of a flat float32 observation are not finite, and their values."""
    bad = np.flatnonzero(~np.isfinite(vec))
    shown = ", ".join(f"[{i}] = {vec[i]}" for i in bad[:5])
    more = f" and {len(bad) - 5} more" if len(bad) > 5 else ""
    return f"observation (flattened) entries {shown}{more}"


class NanPolicy:
    """A sampler's ``nan_policy``: :meth:`found` raises (``raise``) or counts an episode to drop (``drop_episode``)."""

    def __init__(self, policy: str) -> None:
        if policy not in NAN_POLICIES:
            raise ValueError(f"nan_policy must be one of {NAN_POLICIES}, but got {policy!r}")
        self.drop = policy == "drop_episode"
        self.num_dropped = 0  # episodes dropped so far

    def found(self, place: str, what: str, step: int, agent: Any = _NO_AGENT) -> None:
        """A non-finite ``what`` of the env at ``place`` at ``step`` of its episode (0: reset): raise, or count its episode."""
        who = "" if agent is _NO_AGENT else f", agent {agent!r}"
        when = "reset()" if step == 0 else f"step {step} of the episode"
        message = f"{place}{who}, {when}: non-finite {what}"
        if not self.drop:
            raise EnvError(f"{message} (nan_policy 'raise'; set nan_policy: 'drop_episode' to drop such episodes and train on)")
        self.num_dropped += 1
        logger.debug("%s; the episode is dropped (nan_policy 'drop_episode')", message)


class NonFiniteWarnings:
    """Logs, once per result, the episodes dropped and learner steps skipped for non-finite numbers since the last one."""

    def __init__(self, trainer_name: str) -> None:
        self.trainer_name = trainer_name
        self._seen = {"num_dropped_episodes_nonfinite": 0, "num_nonfinite_updates": 0}

    def __call__(self, result: dict[str, Any]) -> None:
        """Warn about what grew in ``result`` (keys missing: nothing)."""
        for key, what in (
            ("num_dropped_episodes_nonfinite", "episodes dropped for a non-finite reward or observation (nan_policy 'drop_episode')"),
            ("num_nonfinite_updates", "learner steps skipped for a non-finite loss or gradient norm"),
        ):
            total = int(result.get(key, 0))
            if total > self._seen[key]:
                logger.warning("%s iteration %d: %d %s (%d in all)", self.trainer_name, result.get("training_iteration", 0),
                               total - self._seen[key], what, total)
            self._seen[key] = total


# -- checkpoints ------------------------------------------------------------------------------
def nonfinite_tensors(tree: Any, prefix: str = "") -> list[str]:
    """Dotted paths of the floating-point tensors (or arrays) in a nest of dicts and lists that hold NaN or inf."""
    if isinstance(tree, dict):
        return [p for key, value in tree.items() for p in nonfinite_tensors(value, f"{prefix}{key}.")]
    if isinstance(tree, (list, tuple)):
        return [p for i, value in enumerate(tree) for p in nonfinite_tensors(value, f"{prefix}{i}.")]
    if isinstance(tree, torch.Tensor) and tree.is_floating_point():
        return [] if bool(torch.isfinite(tree).all()) else [prefix[:-1]]
    if isinstance(tree, np.ndarray) and np.issubdtype(tree.dtype, np.floating):
        return [] if bool(np.isfinite(tree).all()) else [prefix[:-1]]
    return []


def _name(path: str) -> str:
    """A tensor's place in a checkpoint's state, in words: the policy and tensor where there is one."""
    part, _, rest = path.partition(".")
    pid, _, tensor = rest.partition(".")
    if part == "policies" and tensor:
        return f"policy {pid!r}, weight tensor {tensor!r}"
    if part == "observation_filters" and tensor:
        return f"the observation filter of policy {pid!r}, tensor {tensor!r}"
    return f"tensor {path!r}"


def check_finite_tensors(tensors: dict[str, Any], where: str) -> None:
    """Raise a :class:`CheckpointError` (``where: ...``) naming the policy and tensor if any tensor holds NaN or inf."""
    bad = nonfinite_tensors(tensors)
    if bad:
        more = f" (and {len(bad) - 1} more tensors)" if len(bad) > 1 else ""
        raise CheckpointError(
            f"{where}: {_name(bad[0])} holds NaN or inf{more}; a policy with non-finite weights cannot act "
            "(did training diverge? see num_nonfinite_updates and nan_policy)"
        )
