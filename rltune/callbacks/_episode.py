"""Episode: what episode hooks see of one running episode."""

from __future__ import annotations

import random
from typing import Any


SINGLE_AGENT_ID = "agent0"  # the id RLlib gave the only agent of a single-agent env


class Episode:
    """One episode of one env, as the episode hooks see it.

    ``user_data`` is free for the hooks; ``custom_metrics`` (name -> number)
    set by ``on_episode_end`` are aggregated across workers into
    ``result["custom_metrics"]`` as ``<name>_mean``, ``_min`` and ``_max``;
    ``hist_data`` (name -> list of numbers) goes to ``result["hist_stats"]``.
    """

    __slots__ = (
        "episode_id",
        "env_index",
        "worker_index",
        "length",
        "total_reward",
        "user_data",
        "custom_metrics",
        "hist_data",
        "_last_obs",
        "_last_info",
        "_last_action",
    )

    def __init__(self, *, env_index: int, worker_index: int, observation: Any, info: dict[str, Any]) -> None:
        self.episode_id: int = random.getrandbits(63)
        self.env_index = env_index
        self.worker_index = worker_index
        self.length = 0
        self.total_reward = 0.0
        self.user_data: dict[str, Any] = {}
        self.custom_metrics: dict[str, float] = {}
        self.hist_data: dict[str, list[float]] = {}
        self._last_obs = observation
        self._last_info = info
        self._last_action: Any = None

    def add_step(self, action: Any, reward: float, observation: Any, info: dict[str, Any]) -> None:
        """Record one env step (called by the sampler before ``on_episode_step``)."""
        self.length += 1
        self.total_reward += float(reward)
        self._last_action = action
        self._last_obs = observation
        self._last_info = info

    def last_observation(self) -> Any:
        """The latest raw observation (as the env returned it)."""
        return self._last_obs

    def last_info(self) -> dict[str, Any]:
        """The latest info dict from ``reset`` or ``step``."""
        return self._last_info

    def last_action(self) -> Any:
        """The latest action sent to the env (None before the first step)."""
        return self._last_action

    # RLlib's per-agent names; a single-agent episode has one agent, so the id may be left out.
    def last_observation_for(self, agent_id: Any = None) -> Any:
        """:meth:`last_observation` (RLlib's name; ``agent_id`` may be omitted: the only agent)."""
        self._only_agent(agent_id, "last_observation_for")
        return self._last_obs

    def last_info_for(self, agent_id: Any = None) -> Any:
        """:meth:`last_info` (RLlib's name; ``agent_id`` may be omitted: the only agent)."""
        self._only_agent(agent_id, "last_info_for")
        return self._last_info

    def last_action_for(self, agent_id: Any = None) -> Any:
        """:meth:`last_action` (RLlib's name; ``agent_id`` may be omitted: the only agent)."""
        self._only_agent(agent_id, "last_action_for")
        return self._last_action

    def _only_agent(self, agent_id: Any, method: str) -> None:
        if agent_id not in (None, SINGLE_AGENT_ID):
            raise KeyError(f"episode.{method}({agent_id!r}): a single-agent episode has one agent; "
                           f"call {method}() without an agent id")

    def __repr__(self) -> str:
        return (
            f"Episode(id={self.episode_id}, worker={self.worker_index}, env={self.env_index}, "
            f"length={self.length}, total_reward={self.total_reward:g})"
        )


class MultiAgentEpisode(Episode):
    """One episode of a multi-agent env: the :class:`Episode` API plus each agent's view.

    ``length`` counts env steps and ``total_reward`` sums every agent's
    rewards; ``agent_rewards`` maps ``(agent_id, policy_id)`` to that agent's
    sum so far (policy id ``""`` for an agent that has not observed yet). ``last_observation()`` / ``last_info()`` / ``last_action()``
    are the latest dicts by agent id; ``*_for(agent_id)`` one agent's latest.
    """

    __slots__ = ("agent_rewards", "_policies", "_obs_for", "_info_for", "_action_for", "_reward_for")

    def __init__(self, *, env_index: int, worker_index: int, observation: dict[Any, Any], info: dict[Any, Any]) -> None:
        super().__init__(env_index=env_index, worker_index=worker_index, observation=observation, info=info)
        self.agent_rewards: dict[tuple[Any, str], float] = {}
        self._policies: dict[Any, str] = {}
        self._obs_for: dict[Any, Any] = dict(observation)
        self._info_for: dict[Any, Any] = dict(info)
        self._action_for: dict[Any, Any] = {}
        self._reward_for: dict[Any, float] = {}

    def set_policy(self, agent_id: Any, policy_id: str) -> None:
        """Record the policy an agent was mapped to (called by the sampler once per agent and episode).

        Rewards the agent got before (it is mapped when it first observes) move to its policy's entry.
        """
        self._policies[agent_id] = policy_id
        held = self.agent_rewards.pop((agent_id, ""), None)
        if held is not None:
            self.agent_rewards[(agent_id, policy_id)] = self.agent_rewards.get((agent_id, policy_id), 0.0) + held

    def add_multi_agent_step(
        self, actions: dict[Any, Any], rewards: dict[Any, float], observations: dict[Any, Any], infos: dict[Any, Any]
    ) -> None:
        """Record one env step (called by the sampler before ``on_episode_step``)."""
        self.length += 1
        self._last_action = actions
        self._last_obs = observations
        self._last_info = infos
        self._action_for.update(actions)
        self._obs_for.update(observations)
        self._info_for.update({a: i for a, i in infos.items() if a != "__common__"})
        for agent_id, reward in rewards.items():
            reward = float(reward)
            self.total_reward += reward
            self._reward_for[agent_id] = reward
            key = (agent_id, self._policies.get(agent_id, ""))
            self.agent_rewards[key] = self.agent_rewards.get(key, 0.0) + reward

    def get_agents(self) -> list[Any]:
        """Every agent seen in this episode so far."""
        return list(self._policies)

    def policy_for(self, agent_id: Any) -> str:
        """The policy id the agent was mapped to in this episode."""
        return self._policies[agent_id]

    def last_observation_for(self, agent_id: Any) -> Any:
        """The agent's latest raw observation (None if it has had none)."""
        return self._obs_for.get(agent_id)

    def last_action_for(self, agent_id: Any) -> Any:
        """The agent's latest action (None before it acted)."""
        return self._action_for.get(agent_id)

    def last_reward_for(self, agent_id: Any) -> float:
        """The reward the agent got at the latest step that gave it one (0.0 before any)."""
        return self._reward_for.get(agent_id, 0.0)

    def last_info_for(self, agent_id: Any) -> Any:
        """The agent's latest info dict (None if it has had none)."""
        return self._info_for.get(agent_id)
