"""PettingZoo envs as MultiAgentEnvs: ``PettingZooEnv`` (AEC, turn-based) and ``ParallelPettingZooEnv`` (simultaneous moves).

Only this module imports PettingZoo (an optional dependency:
``pip install 'rltune[pettingzoo]'``), when a wrapper is created.

Both wrappers expose the PettingZoo env's ``possible_agents`` and, from its
``observation_space(agent)`` / ``action_space(agent)``, ``observation_spaces``
/ ``action_spaces`` dicts and ``observation_space`` / ``action_space`` Dict
spaces keyed by agent. Observations are passed on as PettingZoo gives them:
the ``{"observation": ..., "action_mask": ...}`` dicts of the classic games
stay dicts (their spaces are ``Dict`` spaces).
"""

from __future__ import annotations

import importlib
from typing import Any

import gymnasium as gym

from rltune.env._multi_agent import ALL, AgentID, MultiAgentEnv
from rltune.errors import EnvError

INSTALL_HINT = "pip install 'rltune[pettingzoo]'"


def _pettingzoo() -> Any:
    """The pettingzoo module; :class:`EnvError` saying how to install it when it is missing."""
    try:
        return importlib.import_module("pettingzoo")
    except ImportError as exc:
        raise EnvError(f"the PettingZoo wrappers need PettingZoo, which is not installed ({exc}): {INSTALL_HINT}") from None


class _PettingZooSpaces(MultiAgentEnv):
    """The spaces and agent ids of a wrapped PettingZoo env (AEC or parallel)."""

    def __init__(self, env: Any) -> None:
        self.env = env
        self.possible_agents = list(env.possible_agents)
        self.observation_spaces = {a: env.observation_space(a) for a in self.possible_agents}
        self.action_spaces = {a: env.action_space(a) for a in self.possible_agents}
        self.observation_space = gym.spaces.Dict(self.observation_spaces)
        self.action_space = gym.spaces.Dict(self.action_spaces)
        self.metadata = dict(getattr(env, "metadata", None) or {})
        self.render_mode = getattr(env, "render_mode", None)
        self._ended: dict[AgentID, bool] = {}  # agents done this episode: True if terminated, False if truncated
        self._over = True

    def _all_flags(self, terminateds: dict, truncateds: dict, all_gone: bool) -> None:
        """Set ``"__all__"``: the episode ended when every agent is gone; terminated unless one was only truncated."""
        truncated = all_gone and not all(self._ended.values())
        terminateds[ALL] = all_gone and not truncated
        truncateds[ALL] = truncated
        self._over = all_gone

    def _check_not_over(self) -> None:
        if self._over:
            raise EnvError(f"{type(self).__name__}: step called before reset, or after the episode ended (call reset)")

    def render(self) -> Any:
        return self.env.render()

    def close(self) -> None:
        self.env.close()


class PettingZooEnv(_PettingZooSpaces):
    """A PettingZoo AEC env (turn-based) as a MultiAgentEnv.

    - ``reset`` and ``step`` give the observation of the agent whose turn it
      is (``agent_selection``) only; ``step`` expects an action for that agent only.
    - The rewards PettingZoo gives after a move (``env.rewards``, to any
      agent) are in that step's rewards dict, as PettingZoo's own AEC-to-parallel
      conversion counts them: every agent that gets a reward, the acting
      agent and the agents that leave appear in it.
    - An agent that leaves (terminated or truncated) appears once in
      ``terminateds`` / ``truncateds`` and in ``obs`` with its final
      observation; the wrapper steps it out of the PettingZoo env (action
      ``None``) and it is never asked to act again. ``"__all__"`` is True
      when every agent has left.
    - Illegal moves are PettingZoo's to handle (its classic games end the game
      with a penalty for the player, ``TerminateIllegalWrapper``).
    """

    def __init__(self, env: Any) -> None:
        pz = _pettingzoo()
        if isinstance(env, pz.ParallelEnv):
            raise EnvError(f"PettingZooEnv wraps AEC envs; {type(env).__name__} is a parallel env: use rltune.env.ParallelPettingZooEnv")
        if not isinstance(env, pz.AECEnv):
            raise EnvError(f"PettingZooEnv wraps a PettingZoo AEC env (pettingzoo.AECEnv), not {type(env).__name__}")
        super().__init__(env)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        """Reset the PettingZoo env: the observation and info of the agent that moves first."""
        self.env.reset(seed=seed, options=options)
        self._ended = {}
        self._over = False
        obs, _, _, _, infos = self._advance()
        if not obs:
            raise EnvError(f"{type(self.env).__name__}: no agent can act after reset")
        return {a: ob for a, ob in obs.items() if a not in self._ended}, {a: i for a, i in infos.items() if a not in self._ended}

    def step(self, action_dict: dict[AgentID, Any]) -> tuple[dict, dict, dict, dict, dict]:
        """Play the acting agent's move; results up to the next agent to move (or the end)."""
        self._check_not_over()
        agent = self.env.agent_selection
        others = [a for a in action_dict if a != agent]
        if agent not in action_dict or others:
            raise EnvError(
                f"PettingZooEnv: it is agent {agent!r}'s turn, and only its action is expected; "
                f"got actions of {sorted(map(str, action_dict))}"
            )
        self.env.step(action_dict[agent])
        rewards = {a: float(r) for a, r in self.env.rewards.items() if r or a == agent}
        obs, left, terminateds, truncateds, infos = self._advance()
        for a in left:
            rewards.setdefault(a, 0.0)
        for a in obs:
            rewards.setdefault(a, 0.0)
        self._all_flags(terminateds, truncateds, all_gone=not self.env.agents)
        return obs, rewards, terminateds, truncateds, infos

    def _advance(self) -> tuple[dict, list, dict, dict, dict]:
        """Step done agents out (each with its final observation) up to the next agent to act or the end."""
        obs: dict[AgentID, Any] = {}
        terminateds: dict[AgentID, bool] = {}
        truncateds: dict[AgentID, bool] = {}
        infos: dict[AgentID, Any] = {}
        left: list[AgentID] = []
        env = self.env
        # Agents done by this move, whether or not it is their turn yet: their final observation now.
        for a in env.agents:
            if a not in self._ended and (env.terminations[a] or env.truncations[a]):
                self._ended[a] = bool(env.terminations[a])
                terminateds[a], truncateds[a] = bool(env.terminations[a]), bool(env.truncations[a])
                obs[a], infos[a] = env.observe(a), dict(env.infos.get(a) or {})
                left.append(a)
        while env.agents:
            a = env.agent_selection
            if not (env.terminations[a] or env.truncations[a]):
                obs[a], infos[a] = env.observe(a), dict(env.infos.get(a) or {})
                terminateds.setdefault(a, False)
                truncateds.setdefault(a, False)
                break
            env.step(None)
        return obs, left, terminateds, truncateds, infos


class ParallelPettingZooEnv(_PettingZooSpaces):
    """A PettingZoo parallel env (simultaneous moves) as a MultiAgentEnv.

    Every live agent is in ``obs`` and acts at each step; the results are
    PettingZoo's, with ``"__all__"`` added (True once every agent is done).
    Done agents' actions are not sent to the PettingZoo env.
    """

    def __init__(self, env: Any) -> None:
        pz = _pettingzoo()
        if isinstance(env, pz.AECEnv):
            raise EnvError(f"ParallelPettingZooEnv wraps parallel envs; {type(env).__name__} is an AEC env: use rltune.env.PettingZooEnv")
        if not isinstance(env, pz.ParallelEnv):
            raise EnvError(f"ParallelPettingZooEnv wraps a PettingZoo parallel env (pettingzoo.ParallelEnv), not {type(env).__name__}")
        super().__init__(env)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        """Reset the PettingZoo env: every agent's observation and info."""
        obs, infos = self.env.reset(seed=seed, options=options)
        self._ended = {}
        self._over = False
        return dict(obs), {a: dict(i or {}) for a, i in (infos or {}).items()}

    def step(self, action_dict: dict[AgentID, Any]) -> tuple[dict, dict, dict, dict, dict]:
        """Step every live agent at once."""
        self._check_not_over()
        actions = {a: act for a, act in action_dict.items() if a not in self._ended}
        obs, rewards, terminations, truncations, infos = self.env.step(actions)
        terminateds = {a: bool(t) for a, t in terminations.items()}
        truncateds = {a: bool(t) for a, t in truncations.items()}
        for a in terminateds.keys() | truncateds.keys():
            if a not in self._ended and (terminateds.get(a) or truncateds.get(a)):
                self._ended[a] = bool(terminateds.get(a))
        live = [a for a in self.env.agents if a not in self._ended]
        self._all_flags(terminateds, truncateds, all_gone=not live)
        return dict(obs), dict(rewards), terminateds, truncateds, {a: dict(i or {}) for a, i in infos.items()}
