"""Agent groups: several agents of a MultiAgentEnv acting as one agent (RLlib's ``with_agent_groups``).

A group's observation is the tuple of its members' observations, its action
a tuple of their actions, its reward the sum of theirs (each kept in the
group's info as ``individual_rewards``, in member order). The group is done
when all its members are. Agents in no group pass through unchanged.

Members of a group act together: when one of them has an observation, every
member that is not done must have one. A member that is done before the
others keeps its final observation in the group's tuple, and its part of the
group's action is dropped.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from rltune.env._multi_agent import ALL, AgentID, MultiAgentEnv, _agent_space
from rltune.errors import ConfigError, EnvError

INDIVIDUAL_REWARDS = "individual_rewards"
INDIVIDUAL_INFOS = "individual_infos"


def with_agent_groups(
    env: MultiAgentEnv,
    groups: dict[str, list[AgentID]],
    obs_space: gym.Space | None = None,
    act_space: gym.Space | None = None,
) -> GroupAgentsWrapper:
    """``env`` with each group of agents acting as one agent; see :class:`GroupAgentsWrapper`."""
    return GroupAgentsWrapper(env, groups, obs_space, act_space)


class GroupAgentsWrapper(MultiAgentEnv):
    """A MultiAgentEnv whose agents are ``env``'s groups (``{"group_1": ["agent_1", "agent_2"], ...}``) and ungrouped agents.

    Spaces: ``observation_space`` and ``action_space`` are ``Dict`` spaces
    keyed by the new agent ids; a group's space is the ``Tuple`` of its
    members' spaces, unless ``obs_space`` / ``act_space`` is given: either a
    ``Dict`` keyed by the new agent ids (used as it is) or the one space of
    every group. ``possible_agents`` lists the groups, then the ungrouped agents.

    Raises :class:`ConfigError` for bad ``groups`` (an empty group, an agent
    in two groups or unknown to ``env``, a group named like an ungrouped agent).
    """

    def __init__(
        self,
        env: MultiAgentEnv,
        groups: dict[str, list[AgentID]],
        obs_space: gym.Space | None = None,
        act_space: gym.Space | None = None,
    ) -> None:
        self.env = env
        self.groups = {group: list(members) for group, members in dict(groups).items()}
        self.agent_id_to_group: dict[AgentID, str] = {}
        inner_ids = set(env.get_agent_ids())
        for group, members in self.groups.items():
            if not members:
                raise ConfigError(f"agent group {group!r} has no member")
            for agent in members:
                if agent in self.agent_id_to_group:
                    raise ConfigError(f"agent {agent!r} is in two groups: {self.agent_id_to_group[agent]!r} and {group!r}")
                if inner_ids and agent not in inner_ids:
                    raise ConfigError(f"agent group {group!r}: {agent!r} is not an agent of the env (its agents: {sorted(map(str, inner_ids))})")
                self.agent_id_to_group[agent] = group
        ungrouped = [a for a in _ordered(env, inner_ids) if a not in self.agent_id_to_group]
        for group in self.groups:
            if group in ungrouped:
                raise ConfigError(f"agent group {group!r} has the name of an agent of the env that is in no group")
        self.possible_agents = [*self.groups, *ungrouped]
        self.observation_space = self._spaces("observation", obs_space, ungrouped)
        self.action_space = self._spaces("action", act_space, ungrouped)
        self._ended: dict[AgentID, bool] = {}  # done agents: True if terminated, False if truncated
        self._last_obs: dict[AgentID, Any] = {}

    def _spaces(self, kind: str, given: gym.Space | None, ungrouped: list[AgentID]) -> gym.spaces.Dict:
        if isinstance(given, gym.spaces.Dict) and set(given.spaces) >= set(self.groups):
            return given
        spaces: dict[Any, gym.Space] = {}
        for group, members in self.groups.items():
            spaces[group] = given if given is not None else gym.spaces.Tuple([_agent_space(self.env, kind, m) for m in members])
        for agent in ungrouped:
            spaces[agent] = _agent_space(self.env, kind, agent)
        return gym.spaces.Dict(spaces)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        """Reset ``env``; the groups' observations are tuples of their members'."""
        obs, infos = self.env.reset(seed=seed, options=options)
        self._ended = {}
        self._last_obs = {}
        return self._group_obs(obs), self._group_infos(infos, {})

    def step(self, action_dict: dict[AgentID, Any]) -> tuple[dict, dict, dict, dict, dict]:
        """Step ``env`` with the groups' actions split among their members; group the results."""
        obs, rewards, terminateds, truncateds, infos = self.env.step(self._ungroup_actions(action_dict))
        for agent in terminateds.keys() | truncateds.keys():
            if agent != ALL and agent not in self._ended and (terminateds.get(agent) or truncateds.get(agent)):
                self._ended[agent] = bool(terminateds.get(agent))
        grouped_rewards: dict[AgentID, Any] = {}
        individual: dict[str, list] = {}
        for agent, reward in rewards.items():
            group = self.agent_id_to_group.get(agent)
            if group is None:
                grouped_rewards[agent] = reward
            elif group not in individual:
                individual[group] = [rewards.get(m, 0.0) for m in self.groups[group]]
                grouped_rewards[group] = sum(individual[group])
        return (
            self._group_obs(obs),
            grouped_rewards,
            self._group_done(terminateds, truncateds, terminated=True),
            self._group_done(terminateds, truncateds, terminated=False),
            self._group_infos(infos, individual),
        )

    def _ungroup_actions(self, action_dict: dict[AgentID, Any]) -> dict[AgentID, Any]:
        actions = {}
        for agent, action in action_dict.items():
            members = self.groups.get(agent)
            if members is None:
                actions[agent] = action
                continue
            if not isinstance(action, (tuple, list)) or len(action) != len(members):
                raise EnvError(
                    f"the action of agent group {agent!r} must be a tuple of {len(members)} actions "
                    f"(one per member {members}), not {type(action).__name__} {action!r}"
                )
            actions.update((m, a) for m, a in zip(members, action) if m not in self._ended)
        return actions

    def _group_obs(self, obs: dict[AgentID, Any]) -> dict[AgentID, Any]:
        out: dict[AgentID, Any] = {}
        for agent, ob in obs.items():
            self._last_obs[agent] = ob
            group = self.agent_id_to_group.get(agent)
            if group is None:
                out[agent] = ob
            elif group not in out:
                members = self.groups[group]
                missing = [m for m in members if m not in obs and (m not in self._ended or m not in self._last_obs)]
                if missing:
                    raise EnvError(
                        f"agent group {group!r}: members act together, but the env gave observations of "
                        f"{[m for m in members if m in obs]} and not of {missing}"
                    )
                out[group] = tuple(obs[m] if m in obs else self._last_obs[m] for m in members)
        return out

    def _group_done(self, terminateds: dict, truncateds: dict, *, terminated: bool) -> dict[AgentID, bool]:
        """A group is done when all its members are: terminated if they all terminated, else truncated."""
        flags = terminateds if terminated else truncateds
        out: dict[AgentID, bool] = {}
        for agent in flags:
            group = self.agent_id_to_group.get(agent)
            if group is None:
                out[agent] = bool(flags[agent])
            elif group not in out:
                ends = [self._ended.get(m) for m in self.groups[group]]
                all_done = None not in ends
                all_terminated = all_done and all(ends)
                out[group] = all_terminated if terminated else all_done and not all_terminated
        return out

    def _group_infos(self, infos: dict[AgentID, Any], individual: dict[str, list]) -> dict[AgentID, Any]:
        out: dict[AgentID, Any] = {}
        for agent, info in infos.items():
            group = self.agent_id_to_group.get(agent)
            if group is None:
                out[agent] = info
            elif group not in out:
                out[group] = {INDIVIDUAL_INFOS: [infos.get(m, {}) for m in self.groups[group]]}
        for group, rewards in individual.items():
            out.setdefault(group, {INDIVIDUAL_INFOS: [infos.get(m, {}) for m in self.groups[group]]})
            out[group][INDIVIDUAL_REWARDS] = rewards
        return out

    def render(self) -> Any:
        return self.env.render()

    def close(self) -> None:
        self.env.close()


def _ordered(env: MultiAgentEnv, ids: set[AgentID]) -> list[AgentID]:
    """``ids`` in the env's own order (``possible_agents``, else its Dict space's keys) when it has one."""
    order: list[AgentID] = list(getattr(env, "possible_agents", None) or ())
    if not order and isinstance(getattr(env, "observation_space", None), gym.spaces.Dict):
        order = list(env.observation_space.spaces)
    return [a for a in order if a in ids] + sorted((a for a in ids if a not in order), key=str)

