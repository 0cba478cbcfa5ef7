"""Agent groups: a group acts as one agent (tuple observations and actions, summed rewards), others pass through."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rltune.env import EnvContext, MultiAgentEnv, with_agent_groups
from rltune.env._groups import GroupAgentsWrapper
from rltune.env._multi_agent_check import check_multi_agent_env
from rltune.errors import ConfigError, EnvError


class ThreeAgents(MultiAgentEnv):
    """Agents "a1", "a2" (Discrete obs) and "solo" (Box obs) move together; each agent's reward is its action.

    Observations are the step count. "a1" terminates at step ``a1_leaves``, the others at step 4.
    """

    possible_agents = ["a1", "a2", "solo"]

    def __init__(self, config=None, a1_leaves: int = 4):
        self.observation_space = gym.spaces.Dict(
            {"a1": gym.spaces.Discrete(5), "a2": gym.spaces.Discrete(5), "solo": gym.spaces.Box(0, 5, (1,), np.float32)}
        )
        self.action_space = gym.spaces.Dict(
            {"a1": gym.spaces.Discrete(3), "a2": gym.spaces.Discrete(3), "solo": gym.spaces.Discrete(2)}
        )
        self.a1_leaves = a1_leaves
        self.received: list[dict] = []

    def _obs(self, agents):
        return {a: np.array([self.t], np.float32) if a == "solo" else self.t for a in agents}

    def reset(self, *, seed=None, options=None):
        self.t = 0
        self.live = ["a1", "a2", "solo"]
        return self._obs(self.live), {"a1": {"x": 1}, "solo": {"y": 2}}

    def step(self, action_dict):
        self.received.append(dict(action_dict))
        assert set(action_dict) == set(self.live), (action_dict, self.live)
        self.t += 1
        rewards = {a: float(action) for a, action in action_dict.items()}
        leaving = [a for a in self.live if self.t >= (self.a1_leaves if a == "a1" else 4)]
        obs = self._obs(self.live)
        self.live = [a for a in self.live if a not in leaving]
        terminateds = {**{a: a in leaving for a in obs}, "__all__": not self.live}
        return obs, rewards, terminateds, {"__all__": False}, {"a2": {"z": 3}}


def test_a_group_acts_as_one_agent_with_tuple_spaces():
    env = with_agent_groups(ThreeAgents(), {"team": ["a1", "a2"]})
    assert isinstance(env, GroupAgentsWrapper) and isinstance(env, MultiAgentEnv)
    assert env.possible_agents == ["team", "solo"] and env.get_agent_ids() == {"team", "solo"}
    assert env.observation_space == gym.spaces.Dict(
        {"team": gym.spaces.Tuple([gym.spaces.Discrete(5)] * 2), "solo": gym.spaces.Box(0, 5, (1,), np.float32)}
    )
    assert env.get_action_space("team") == gym.spaces.Tuple([gym.spaces.Discrete(3)] * 2)
    assert env.get_action_space("solo") == gym.spaces.Discrete(2)

    obs, infos = env.reset()
    assert set(obs) == {"team", "solo"} and obs["team"] == (0, 0)
    assert infos["solo"] == {"y": 2} and infos["team"]["individual_infos"] == [{"x": 1}, {}]

    obs, rewards, terminateds, truncateds, infos = env.step({"team": (2, 1), "solo": 1})
    assert env.env.received[-1] == {"a1": 2, "a2": 1, "solo": 1}  # the group's action split among its members
    assert obs["team"] == (1, 1) and obs["solo"].tolist() == [1.0]
    assert rewards == {"team": 3.0, "solo": 1.0}  # the sum of the members' rewards
    assert infos["team"]["individual_rewards"] == [2.0, 1.0]  # in member order
    assert infos["team"]["individual_infos"] == [{}, {"z": 3}]
    assert terminateds == {"team": False, "solo": False, "__all__": False}
    assert truncateds == {"__all__": False}


def test_the_method_of_multi_agent_env_groups_too():
    env = ThreeAgents().with_agent_groups({"team": ["a2", "a1"]})
    obs, _ = env.reset()
    env.step({"team": (0, 2), "solo": 0})
    assert env.env.received[-1] == {"a2": 0, "a1": 2, "solo": 0}


def test_the_group_is_done_when_all_its_members_are():
    env = with_agent_groups(ThreeAgents(a1_leaves=2), {"team": ["a1", "a2"]})
    env.reset()
    env.step({"team": (1, 1), "solo": 0})
    obs, rewards, terminateds, _, infos = env.step({"team": (1, 1), "solo": 0})  # a1 leaves
    assert terminateds["team"] is False and obs["team"] == (2, 2)
    obs, rewards, terminateds, _, infos = env.step({"team": (1, 2), "solo": 0})
    # a1 is done: its part of the action is dropped, its final observation stays in the tuple, its reward is 0
    assert env.env.received[-1] == {"a2": 2, "solo": 0}
    assert obs["team"] == (2, 3) and rewards["team"] == 2.0 and infos["team"]["individual_rewards"] == [0.0, 2.0]
    assert terminateds["team"] is False
    obs, rewards, terminateds, _, _ = env.step({"team": (0, 0), "solo": 1})
    assert terminateds == {"team": True, "solo": True, "__all__": True}


def test_the_grouped_env_passes_the_multi_agent_checker():
    check_multi_agent_env(with_agent_groups(ThreeAgents(a1_leaves=2), {"team": ["a1", "a2"]}), "grouped", EnvContext())


def test_given_spaces_replace_the_tuples():
    box = gym.spaces.Box(0, 4, (2,))
    env = with_agent_groups(ThreeAgents(), {"team": ["a1", "a2"]}, obs_space=box, act_space=gym.spaces.MultiDiscrete([3, 3]))
    assert env.get_observation_space("team") == box and env.get_observation_space("solo") == gym.spaces.Box(0, 5, (1,), np.float32)
    assert env.get_action_space("team") == gym.spaces.MultiDiscrete([3, 3])
    whole = gym.spaces.Dict({"team": box, "solo": gym.spaces.Discrete(9)})
    assert with_agent_groups(ThreeAgents(), {"team": ["a1", "a2"]}, obs_space=whole).observation_space is whole


@pytest.mark.parametrize(
    "groups, rule",
    [
        ({"g": []}, "agent group 'g' has no member"),
        ({"g": ["a1"], "h": ["a1", "a2"]}, "agent 'a1' is in two groups: 'g' and 'h'"),
        ({"g": ["a1", "ghost"]}, "agent group 'g': 'ghost' is not an agent of the env"),
        ({"solo": ["a1", "a2"]}, "agent group 'solo' has the name of an agent of the env that is in no group"),
    ],
)
def test_bad_groups_are_config_errors(groups, rule):
    with pytest.raises(ConfigError, match=rule):
        with_agent_groups(ThreeAgents(), groups)


def test_an_action_that_is_not_one_per_member_is_an_env_error():
    env = with_agent_groups(ThreeAgents(), {"team": ["a1", "a2"]})
    env.reset()
    with pytest.raises(EnvError, match=r"the action of agent group 'team' must be a tuple of 2 actions"):
        env.step({"team": 1, "solo": 0})


class TakesTurns(MultiAgentEnv):
    possible_agents = ["a", "b"]
    observation_space = gym.spaces.Discrete(2)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        return {"a": 0}, {}


def test_members_that_do_not_act_together_are_named():
    env = with_agent_groups(TakesTurns(), {"g": ["a", "b"]})
    with pytest.raises(EnvError, match=r"agent group 'g': members act together, but the env gave observations of \['a'\] and not of \['b'\]"):
        env.reset()
