"""A multi-agent env with no ``multiagent`` block: every agent acts with one shared ``default_policy``, as in RLlib.

The policy's spaces are the agents' spaces, which must then be the same for
every agent (else a :class:`ConfigError` naming two agents that differ).
"""

from __future__ import annotations

from typing import Any

from rltune.trainers.policies._policy import DEFAULT_POLICY_ID
from rltune.trainers.policies._policy_spec import PolicySpec

_CONFIGURE = (
    "configure 'multiagent' to give them policies of their own (policies: {id: PolicySpec(...)}, "
    "policy_mapping_fn: fn(agent_id, episode, worker, **kwargs) -> id)"
)


def runs_multi_agent(env: Any, configured: bool) -> bool:
    """Whether ``env`` runs as multi-agent: a ``multiagent`` block is ``configured``, or ``env`` is a MultiAgentEnv."""
    from rltune.env._multi_agent import is_multi_agent

    return configured or (env is not None and is_multi_agent(env))


def default_policy_specs() -> dict[str, PolicySpec]:
    """The policy set of a multi-agent env without a ``multiagent`` block: ``default_policy`` alone, spaces from the env."""
    return {DEFAULT_POLICY_ID: PolicySpec()}


def shared_spaces_problem(env: Any, env_name: str) -> str | None:
    """Why the agents of multi-agent ``env`` cannot share one ``default_policy`` (their spaces differ); None if they can.

    Agents whose spaces the env does not declare are left to the policy's
    spaces (see :func:`rltune.trainers.policies._policy_spec.policy_spaces_from_env`).
    """
    from rltune.trainers.policies._space_fit import agent_spaces

    ma_env = env if hasattr(env, "get_agent_ids") else env.unwrapped
    seen: list[tuple[Any, tuple[Any, Any]]] = []
    for agent in sorted(ma_env.get_agent_ids(), key=str):
        spaces = agent_spaces(ma_env, agent, env_name)
        if spaces is None:
            continue
        if seen and spaces != seen[0][1]:
            (first, (first_obs, first_act)) = seen[0]
            return (
                f"env {env_name!r} is a MultiAgentEnv and the config has no 'multiagent' block, so every agent acts "
                f"with one shared {DEFAULT_POLICY_ID!r}, but the agents' spaces differ: agent {first!r} observes "
                f"{first_obs} and acts in {first_act}, agent {agent!r} observes {spaces[0]} and acts in {spaces[1]}: "
                + _CONFIGURE
            )
        seen.append((agent, spaces))
    return None
