"""``multiagent.observation_fn``: rewriting the agents' observations of each env step before their policies see them.

RLlib's ``observation_fn(agent_obs, worker, base_env, policies, episode,
**kwargs) -> agent_obs``, called by the multi-agent sampler once per env
step (and once at each reset) with the dict of the observations of that
step's agents, by agent id; ``base_env`` is the env that returned them,
``policies`` the worker's policies by id, ``episode`` the running
:class:`~rltune.callbacks.MultiAgentEpisode`. Its result replaces the
step's observations everywhere (actions, training batches, observation
filters); it must hold the same agents, each observation fitting the
observation space of the agent's policy. The second way (after a policy's
``postprocess_trajectory`` with ``other_agent_batches``) to build a
centralized critic: an agent's observation can carry the other agents'.

A policy whose agents get rewritten observations declares the space of
what the function returns (its ``PolicySpec``'s ``observation_space``),
which may differ from the env's agent spaces; without one it takes the
agent's space, which the results must then fit.
"""

from __future__ import annotations

from typing import Any, Callable

import gymnasium as gym
import numpy as np

from rltune._imports import import_object
from rltune.errors import ConfigError, EnvError

KEY = "multiagent.observation_fn"


class ObservationFn:
    """The configured ``observation_fn``, called with RLlib's keywords, its results checked (:meth:`__call__`)."""

    def __init__(self, fn: Any, policies: dict[str, Any], worker: Any) -> None:
        if isinstance(fn, str):
            fn = import_object(fn, KEY)
        if not callable(fn):
            raise ConfigError(f"{KEY}: must be a function fn(agent_obs, worker, base_env, policies, episode, **kwargs) "
                              f"-> agent_obs, or its import string, but got {fn!r:.100}")
        self.fn: Callable[..., Any] = fn
        self.policies = policies  # the worker's policy map (the same dict: added policies are seen)
        self.worker = worker
        self._name = getattr(fn, "__qualname__", repr(fn))

    def __call__(
        self, agent_obs: dict[Any, Any], env: gym.Env, episode: Any, policy_of: Callable[[Any], str], place: str
    ) -> dict[Any, Any]:
        """The function's observations for this step's ``agent_obs``; EnvError naming the function and the agent if they do not fit.

        ``policy_of(agent)``: the policy the agent is mapped to (mapping it
        if it is new in the episode); ``place``: the env, for errors.
        """
        try:
            new = self.fn(agent_obs=agent_obs, worker=self.worker, base_env=env, policies=self.policies, episode=episode)
        except Exception as exc:
            raise EnvError(f"{place}: {KEY} {self._name} raised: {type(exc).__name__}: {exc}") from exc
        if not isinstance(new, dict):
            raise EnvError(f"{place}: {KEY} {self._name} must return a dict of observations by agent id, "
                           f"but returned {type(new).__name__}")
        if new.keys() != agent_obs.keys():
            missing, extra = [a for a in agent_obs if a not in new], [a for a in new if a not in agent_obs]
            raise EnvError(
                f"{place}: {KEY} {self._name} must return an observation for each agent of the step, and only for "
                f"them (the step's agents: {list(agent_obs)}; missing: {missing}; not in the step: {extra})"
            )
        for agent, obs in new.items():
            pid = policy_of(agent)
            space = self.policies[pid].observation_space
            if not fits(space, obs):
                raise EnvError(
                    f"{place}: {KEY} {self._name} returned for agent {agent!r} an observation that does not fit the "
                    f"observation space {space} of its policy {pid!r} (got {_describe(obs)}; declare the space the "
                    "function returns as the policy's observation_space in its PolicySpec)"
                )
        return new


def fits(space: gym.Space, obs: Any) -> bool:
    """Whether ``obs`` has the structure of ``space``: a Box's shape (any number type), a Tuple's or Dict's parts, else ``contains``."""
    if isinstance(space, gym.spaces.Box):
        return np.shape(obs) == space.shape
    if isinstance(space, gym.spaces.Tuple):
        return isinstance(obs, (tuple, list)) and len(obs) == len(space.spaces) and all(map(fits, space.spaces, obs))
    if isinstance(space, gym.spaces.Dict):
        return isinstance(obs, dict) and obs.keys() == space.spaces.keys() and all(fits(s, obs[k]) for k, s in space.spaces.items())
    try:
        return bool(space.contains(obs))
    except Exception:  # a value of another kind altogether
        return False


def _describe(obs: Any) -> str:
    shape = np.shape(obs) if isinstance(obs, (np.ndarray, list, tuple, int, float)) else None
    return f"{type(obs).__name__} of shape {shape}" if shape is not None else f"{obs!r:.60}"
