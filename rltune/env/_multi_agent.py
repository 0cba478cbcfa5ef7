"""MultiAgentEnv: the env contract for several agents, and ``make_multi_agent`` (N copies of a single-agent env).

Every dict an env returns is keyed by agent id:

- ``reset(*, seed, options) -> (obs, infos)``;
- ``step(action_dict) -> (obs, rewards, terminateds, truncateds, infos)``,
  with ``"__all__"`` in ``terminateds`` and ``truncateds`` (the episode ends
  when either is True).

Only agents that must act next appear in ``obs`` (a turn-based game gives
one agent at a time; simultaneous moves give all), and only they are sent an
action in the next ``action_dict``. A reward may be given to any agent at any
step: a reward to an agent that is not acting is added to its last action's
reward, so it counts when the agent next acts or the episode ends; one given
before the agent's first observation is added to its first action's reward,
and one of an agent that never observes counts in the episode's reward only.
Agents may appear mid-episode and leave early (``terminateds[agent] = True``);
an agent that is done may not observe (act) again in the same episode.
See docs/multi-agent.md.

Spaces: ``observation_space`` / ``action_space`` are either a
``gymnasium.spaces.Dict`` keyed by agent id (one space per agent), or one
space that every agent shares; ``observation_spaces`` / ``action_spaces``
(dicts, as in PettingZoo and newer RLlib) work too.
"""

from __future__ import annotations

from typing import Any, Callable, Hashable

import gymnasium as gym

AgentID = Hashable
ALL = "__all__"


class MultiAgentEnv(gym.Env):
    """Base class of multi-agent envs (RLlib's classic API; see the module docstring).

    Subclasses set ``observation_space`` and ``action_space`` (per agent as
    a ``Dict``, or shared) and, when agents are not all known from a
    ``Dict`` space, ``possible_agents``: every agent id that may appear.
    """

    possible_agents: list[AgentID] = []
    observation_spaces: dict[AgentID, gym.Space] | None = None
    action_spaces: dict[AgentID, gym.Space] | None = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        """Start an episode: observations and infos of the agents that act first.

        Subclasses return ``(obs, infos)``. This base only seeds
        ``self.np_random`` when given a seed (as RLlib's does), so a
        subclass may start with ``super().reset(seed=seed, options=options)``.
        """
        super().reset(seed=seed, options=options)
        return None  # type: ignore[return-value]  # the subclass returns the episode's first dicts

    def step(self, action_dict: dict[AgentID, Any]) -> tuple[dict, dict, dict, dict, dict]:
        """Apply the acting agents' actions: ``(obs, rewards, terminateds, truncateds, infos)``."""
        raise NotImplementedError

    def get_agent_ids(self) -> set[AgentID]:
        """Every agent id that may appear (``possible_agents``, else the keys of a ``Dict`` space)."""
        if self.possible_agents:
            return set(self.possible_agents)
        for spaces in (self.observation_spaces, _dict_space(getattr(self, "observation_space", None))):
            if spaces:
                return set(spaces)
        return set(getattr(self, "_agent_ids", ()) or ())

    def get_observation_space(self, agent_id: AgentID) -> gym.Space:
        """The observation space of one agent."""
        return _agent_space(self, "observation", agent_id)

    def get_action_space(self, agent_id: AgentID) -> gym.Space:
        """The action space of one agent."""
        return _agent_space(self, "action", agent_id)

    def with_agent_groups(
        self,
        groups: dict[str, list[AgentID]],
        obs_space: gym.Space | None = None,
        act_space: gym.Space | None = None,
    ) -> "MultiAgentEnv":
        """This env with each group of agents acting as one agent (``Tuple`` spaces, summed rewards).

        See :func:`rltune.env.with_agent_groups`.
        """
        from rltune.env._groups import GroupAgentsWrapper

        return GroupAgentsWrapper(self, groups, obs_space, act_space)


def declares_spaces(env: Any, kind: str) -> bool:
    """Whether multi-agent ``env`` declares its agents' ``kind`` ("observation" or "action") spaces at all.

    An env that declares none takes them from its policies' ``PolicySpec`` s.
    """
    if getattr(env, f"{kind}_spaces", None) is not None or getattr(env, f"{kind}_space", None) is not None:
        return True
    method = getattr(type(env), f"get_{kind}_space", None)
    return method is not None and method is not getattr(MultiAgentEnv, f"get_{kind}_space")  # overridden


def _dict_space(space: Any) -> dict[AgentID, gym.Space] | None:
    return dict(space.spaces) if isinstance(space, gym.spaces.Dict) else None


def _agent_space(env: Any, kind: str, agent_id: AgentID) -> gym.Space:
    """The ``kind`` ("observation" or "action") space of ``agent_id`` in a multi-agent env.

    Raises KeyError naming the agent when the env declares per-agent spaces
    without this one.
    """
    per_agent = getattr(env, f"{kind}_spaces", None)
    if per_agent:
        if agent_id not in per_agent:
            raise KeyError(f"agent {agent_id!r} has no {kind} space (the env's {kind}_spaces have {sorted(map(str, per_agent))})")
        return per_agent[agent_id]
    space = getattr(env, f"{kind}_space", None)
    if space is None:
        raise KeyError(f"the env declares no {kind}_space")
    spaces = _dict_space(space)
    if spaces is not None and _keyed_by_agents(env, spaces):
        if agent_id not in spaces:
            raise KeyError(f"agent {agent_id!r} has no {kind} space (the env's {kind}_space is a Dict of {sorted(map(str, spaces))})")
        return spaces[agent_id]
    return space


def _keyed_by_agents(env: Any, spaces: dict[AgentID, gym.Space]) -> bool:
    """Whether a ``Dict`` space is per agent (keys are the agents) rather than one agent's dict observation."""
    agents = set(getattr(env, "possible_agents", None) or ()) or set(getattr(env, "_agent_ids", None) or ())
    if not agents:
        return True  # nothing says otherwise: RLlib's convention
    return set(spaces) <= agents or agents <= set(spaces)


def is_multi_agent(env: Any) -> bool:
    """Whether ``env`` (or the env under its gymnasium wrappers) is a :class:`MultiAgentEnv`."""
    return isinstance(env, MultiAgentEnv) or isinstance(getattr(env, "unwrapped", None), MultiAgentEnv)


def make_multi_agent(env_name_or_creator: str | Callable[[Any], gym.Env]) -> type[MultiAgentEnv]:
    """A MultiAgentEnv class of ``num_agents`` independent copies of a single-agent env (RLlib's helper).

    ``env_config["num_agents"]`` (default 1) copies are built from a gymnasium
    id or a ``creator(env_config)``; agent ``i`` steps copy ``i``, agents leave
    when their copy's episode ends, and the episode ends when all have.
    """

    class MultiEnv(MultiAgentEnv):
        def __init__(self, config: Any = None) -> None:
            config = dict(config or {})
            num = int(config.pop("num_agents", 1))
            if isinstance(env_name_or_creator, str):
                self.envs = [gym.make(env_name_or_creator, disable_env_checker=True) for _ in range(num)]
            else:
                self.envs = [env_name_or_creator(config) for _ in range(num)]
            self.possible_agents = list(range(num))
            self.observation_space = self.envs[0].observation_space
            self.action_space = self.envs[0].action_space
            self._done: set[int] = set()

        def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
            self._done = set()
            obs, infos = {}, {}
            for i, env in enumerate(self.envs):
                obs[i], infos[i] = env.reset(seed=None if seed is None else seed + i, options=options)
            return obs, infos

        def step(self, action_dict: dict[AgentID, Any]) -> tuple[dict, dict, dict, dict, dict]:
            obs, rewards, terminateds, truncateds, infos = {}, {}, {}, {}, {}
            for i, action in action_dict.items():
                obs[i], rewards[i], terminateds[i], truncateds[i], infos[i] = self.envs[i].step(action)
                if terminateds[i] or truncateds[i]:
                    self._done.add(i)
            all_done = len(self._done) == len(self.envs)
            terminateds[ALL] = all_done and all(terminateds.get(i, True) for i in action_dict)
            truncateds[ALL] = all_done and not terminateds[ALL]
            return obs, rewards, terminateds, truncateds, infos

        def close(self) -> None:
            for env in self.envs:
                env.close()

    name = env_name_or_creator if isinstance(env_name_or_creator, str) else getattr(env_name_or_creator, "__name__", "env")
    MultiEnv.__name__ = MultiEnv.__qualname__ = f"MultiAgent({name})"
    return MultiEnv
