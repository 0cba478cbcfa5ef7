"""Small multi-agent envs whose every reward and turn is known, for the multi-agent tests."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from rltune.env import MultiAgentEnv

MOVES_EACH = 4  # moves per player in TurnGame
MOVE_REWARD = 0.5  # to the player who moves
OTHER_REWARD = 1.0  # to the player who does not move, at each move of the other
END_BONUS = {"x": 10.0, "o": -10.0}


class TurnGame(MultiAgentEnv):
    """Two players, "x" then "o", take turns for ``MOVES_EACH`` moves each; only the player to move observes.

    Each move gives the mover MOVE_REWARD and the other (not acting) player
    OTHER_REWARD; the game ends after the last move with END_BONUS for both.
    So every transition of a player but the last sums to 1.5, the last of
    x to 0.5 + 1.0 + 10 and the last of o to 0.5 - 10; episode returns are
    x: 16, o: -4. o's reward from x's first move comes before o ever
    observed: it is held for o's first transition (which sums to 2.5).
    """

    possible_agents = ["x", "o"]

    def __init__(self, config: Any = None) -> None:
        self.observation_space = gym.spaces.Box(0.0, 1.0, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.t = 0

    def _obs(self, agent: str) -> np.ndarray:
        return np.array([self.t / (2 * MOVES_EACH), agent == "o"], dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        self.t = 0
        return {"x": self._obs("x")}, {}

    def step(self, action_dict: dict) -> tuple[dict, dict, dict, dict, dict]:
        mover = "x" if self.t % 2 == 0 else "o"
        assert set(action_dict) == {mover}, action_dict
        other = "o" if mover == "x" else "x"
        self.t += 1
        rewards = {mover: MOVE_REWARD, other: OTHER_REWARD}
        if self.t == 2 * MOVES_EACH:
            rewards = {a: rewards[a] + END_BONUS[a] for a in rewards}
            obs = {a: self._obs(a) for a in self.possible_agents}
            done = {"x": True, "o": True, "__all__": True}
            return obs, rewards, done, {"__all__": False}, {}
        return {other: self._obs(other)}, rewards, {"__all__": False}, {"__all__": False}, {}


class _Stepping(MultiAgentEnv):
    """Agents of one Box observation (the step count) and two actions; ``first`` observe at reset."""

    first: list[Any] = []

    def __init__(self, config: Any = None) -> None:
        self.observation_space = gym.spaces.Box(0.0, 10.0, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        self.t = 0
        return {a: np.zeros(1, np.float32) for a in self.first}, {}


class LeavingAgents(_Stepping):
    """Three agents act together; agent k leaves (terminated, final obs given) after k + 1 steps; reward 1 per step each."""

    possible_agents = first = [0, 1, 2]

    def step(self, action_dict: dict) -> tuple[dict, dict, dict, dict, dict]:
        assert set(action_dict) == {a for a in self.possible_agents if a >= self.t}, (self.t, action_dict)
        self.t += 1
        obs = {a: np.array([self.t], np.float32) for a in action_dict}
        rewards = {a: 1.0 for a in action_dict}
        terminateds = {a: a + 1 == self.t for a in action_dict}
        terminateds["__all__"] = self.t == 3
        return obs, rewards, terminateds, {"__all__": False}, {}


class Coordination(MultiAgentEnv):
    """A one-step cooperative game: both pick 1 -> 1 each (the optimum), both 0 -> 0.5 each, else 0."""

    possible_agents = ["a", "b"]

    def __init__(self, config: Any = None) -> None:
        self.observation_space = gym.spaces.Box(0.0, 1.0, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        return {a: np.ones(1, np.float32) for a in self.possible_agents}, {}

    def step(self, action_dict: dict) -> tuple[dict, dict, dict, dict, dict]:
        a, b = action_dict["a"], action_dict["b"]
        reward = 1.0 if a == b == 1 else 0.5 if a == b == 0 else 0.0
        obs = {x: np.ones(1, np.float32) for x in self.possible_agents}
        return obs, {x: reward for x in self.possible_agents}, {"__all__": True}, {"__all__": False}, {}


class RockPaperScissors(MultiAgentEnv):
    """A one-throw game of rock (0), paper (1), scissors (2): +1 to the winner, -1 to the loser."""

    possible_agents = ["p1", "p2"]

    def __init__(self, config: Any = None) -> None:
        self.observation_space = gym.spaces.Box(0.0, 1.0, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(3)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        return {a: np.zeros(1, np.float32) for a in self.possible_agents}, {}

    def step(self, action_dict: dict) -> tuple[dict, dict, dict, dict, dict]:
        a, b = int(action_dict["p1"]), int(action_dict["p2"])
        r = 0.0 if a == b else 1.0 if (a - b) % 3 == 1 else -1.0
        obs = {x: np.zeros(1, np.float32) for x in self.possible_agents}
        return obs, {"p1": r, "p2": -r}, {"__all__": True}, {"__all__": False}, {}


class InPlaceCounter(MultiAgentEnv):
    """One agent observes the step count, truncated every ``LENGTH`` steps; every obs is the same array, changed in place."""

    possible_agents = ["a"]
    LENGTH = 5

    def __init__(self, config: Any = None) -> None:
        self.observation_space = gym.spaces.Box(0.0, 100.0, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.buffer = np.zeros(1, np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        self.buffer[0] = 0.0
        return {"a": self.buffer}, {}

    def step(self, action_dict: dict) -> tuple[dict, dict, dict, dict, dict]:
        self.buffer[0] += 1.0
        return {"a": self.buffer}, {"a": 1.0}, {"__all__": False}, {"__all__": self.buffer[0] >= self.LENGTH}, {}


class NoAllInTruncateds(TurnGame):
    """TurnGame whose truncateds lack ``"__all__"`` (its terminateds have it): it breaks the multi-agent API."""

    def step(self, action_dict: dict) -> tuple[dict, dict, dict, dict, dict]:
        obs, rewards, terminateds, truncateds, infos = super().step(action_dict)
        truncateds.pop("__all__")
        return obs, rewards, terminateds, truncateds, infos


class Respawning(_Stepping):
    """Agents "a" and "b" act together; "a" is terminated at step 2 but observes again from step 3 on, and
    ``"__all__"`` stays False: the episode would never end."""

    possible_agents = first = ["a", "b"]

    def step(self, action_dict: dict) -> tuple[dict, dict, dict, dict, dict]:
        self.t += 1
        obs = {a: np.full(1, self.t, np.float32) for a in self.possible_agents}
        rewards = {a: 1.0 for a in action_dict}
        return obs, rewards, {"a": self.t == 2, "__all__": False}, {"__all__": False}, {}


class Bystander(_Stepping):
    """Agent "a" acts for 3 steps (reward 1 each); "watcher" is given 10 at each step but never observes.

    Episode reward 33; "a"'s return 3.
    """

    possible_agents = ["a", "watcher"]
    first = ["a"]

    def step(self, action_dict: dict) -> tuple[dict, dict, dict, dict, dict]:
        assert set(action_dict) == {"a"}, action_dict
        self.t += 1
        obs = {"a": np.full(1, self.t, np.float32)}
        return obs, {"a": 1.0, "watcher": 10.0}, {"__all__": self.t == 3}, {"__all__": False}, {}


class UnlikeAgents(TurnGame):
    """TurnGame where "o" has 3 actions: its agents cannot share one policy."""

    def __init__(self, config: Any = None) -> None:
        super().__init__(config)
        self.action_space = gym.spaces.Dict({"x": gym.spaces.Discrete(2), "o": gym.spaces.Discrete(3)})


class Undeclared(TurnGame):
    """TurnGame that declares no spaces (RLlib's envs whose PolicySpecs give them)."""

    def __init__(self, config: Any = None) -> None:
        self.t = 0
