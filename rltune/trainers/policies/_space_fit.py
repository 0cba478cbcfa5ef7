"""Whether a policy's spaces fit the agents mapped to it, checked both ways by one rule.

Space ``inner`` fits within space ``outer`` when every value of ``inner``
is a value of ``outer``:

- ``Discrete``: inner's values ``start .. start + n - 1`` are among outer's;
- ``Box``: the same shape, inner's bounds within outer's (element by
  element), and an integer ``outer`` needs an integer ``inner`` (a float
  could fall between its values);
- ``MultiDiscrete``: the same shape, each of inner's ranges within outer's;
- ``MultiBinary``: the same shape;
- ``Tuple``: the same length, each part fits; ``Dict``: the same keys, each
  part fits;
- any other space: equal.

An agent's observation space must fit within its policy's (the policy takes
every observation the agent gets; a policy may declare a wider Box), and a
policy's action space within its agent's (the agent takes every action the
policy sends; ``Discrete(5)`` for ``Discrete(2)`` agents does not fit, a
``Discrete(2)`` policy for ``Discrete(3)`` agents does).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from rltune.errors import ConfigError, EnvError


def fits_within(inner: gym.Space, outer: gym.Space) -> bool:
    """Whether every value of ``inner`` is a value of ``outer`` (the rule of the module docstring)."""
    spaces = gym.spaces
    if type(inner) is not type(outer):
        return inner == outer
    if isinstance(inner, spaces.Discrete):
        return int(outer.start) <= int(inner.start) and int(inner.start + inner.n) <= int(outer.start + outer.n)
    if isinstance(inner, spaces.Box):
        if inner.shape != outer.shape:
            return False
        if np.issubdtype(outer.dtype, np.integer) and not np.issubdtype(inner.dtype, np.integer):
            return False
        return bool(np.all(inner.low >= outer.low) and np.all(inner.high <= outer.high))
    if isinstance(inner, spaces.MultiDiscrete):
        return inner.shape == outer.shape and bool(
            np.all(inner.start >= outer.start) and np.all(inner.start + inner.nvec <= outer.start + outer.nvec)
        )
    if isinstance(inner, spaces.MultiBinary):
        return inner.shape == outer.shape
    if isinstance(inner, spaces.Tuple):
        return len(inner.spaces) == len(outer.spaces) and all(map(fits_within, inner.spaces, outer.spaces))
    if isinstance(inner, spaces.Dict):
        return inner.spaces.keys() == outer.spaces.keys() and all(fits_within(s, outer.spaces[k]) for k, s in inner.spaces.items())
    return inner == outer


def fit_problem(
    policy_id: str, agent: Any, policy_spaces: tuple[gym.Space, gym.Space], agent_spaces: tuple[gym.Space | None, gym.Space | None],
    env_name: str, *, observations: bool = True,
) -> str | None:
    """Why policy ``policy_id`` (its (observation, action) spaces) cannot serve ``agent``; None if it can.

    An agent space of None (the env declares none of that kind) is the
    policy's. ``observations`` False: the agent's observations are not the
    env's (a ``multiagent.observation_fn`` rewrites them and its results
    are checked instead), so only the action spaces must fit.
    """
    (policy_obs, policy_act), (agent_obs, agent_act) = policy_spaces, agent_spaces
    if observations and agent_obs is not None and not fits_within(agent_obs, policy_obs):
        return (
            f"multiagent.policies.{policy_id}: agent {agent!r} of env {env_name!r} is mapped to it, but its observation "
            f"space {agent_obs} does not fit the policy's {policy_obs} (the policy must take every observation of the "
            "agent: the same kind and shape, bounds within the policy's)"
        )
    if agent_act is not None and not fits_within(policy_act, agent_act):
        return (
            f"multiagent.policies.{policy_id}: agent {agent!r} of env {env_name!r} is mapped to it, but the policy's "
            f"action space {policy_act} does not fit the agent's {agent_act} (the agent must take every action of the "
            "policy: the same kind and shape, bounds within the agent's)"
        )
    return None


def agent_spaces(env: Any, agent: Any, env_name: str) -> tuple[gym.Space | None, gym.Space | None]:
    """The (observation, action) spaces of one agent of a multi-agent ``env`` (possibly wrapped).

    None for a kind of space the env declares for no agent (its policies'
    PolicySpecs give it); EnvError when the env declares that kind for
    other agents but not for this one.
    """
    from rltune.env._multi_agent import declares_spaces

    ma_env = env if hasattr(env, "get_agent_ids") else env.unwrapped
    obs_space, act_space = None, None
    try:
        if declares_spaces(ma_env, "observation"):
            obs_space = ma_env.get_observation_space(agent)
        if declares_spaces(ma_env, "action"):
            act_space = ma_env.get_action_space(agent)
    except KeyError as exc:
        raise EnvError(f"env {env_name!r}: {exc.args[0]}") from None
    return obs_space, act_space


def check_fit(
    env: Any, agent: Any, policy_id: str, policy_spaces: tuple[gym.Space, gym.Space], env_name: str, *, observations: bool = True
) -> None:
    """:class:`ConfigError` unless a policy of these (observation, action) spaces fits ``agent`` of ``env`` (:func:`fit_problem`)."""
    problem = fit_problem(policy_id, agent, policy_spaces, agent_spaces(env, agent, env_name), env_name, observations=observations)
    if problem:
        raise ConfigError(problem)
