"""The multi-agent env checker: each rule of the dict API broken by a small env, and build_env choosing the checker."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rltune.env import EnvContext, MultiAgentEnv, make_multi_agent
from rltune.env._build import build_env
from rltune.env._multi_agent_check import check_multi_agent_env, unpack_reset, unpack_step
from rltune.env._registry import resolve_env
from rltune.errors import EnvError

CTX = EnvContext({}, worker_index=2, vector_index=1)


class TwoAgentEnv(MultiAgentEnv):
    """Agents "a" and "b" move together for 5 steps; obs is the step count (capped at 3), reward 1 to "a"."""

    def __init__(self, config=None):
        self.observation_space = gym.spaces.Dict({"a": gym.spaces.Discrete(4), "b": gym.spaces.Discrete(4)})
        self.action_space = gym.spaces.Dict({"a": gym.spaces.Discrete(2), "b": gym.spaces.Discrete(2)})
        self.t = 0

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return self.obs(), {"a": {}, "b": {}}

    def obs(self):
        return {"a": min(self.t, 3), "b": min(self.t, 3)}

    def step(self, action_dict):
        assert set(action_dict) == {"a", "b"}, action_dict
        self.t += 1
        done = self.t >= 5
        return self.obs(), {"a": 1.0, "b": 0}, {"a": done, "b": done, "__all__": done}, {"__all__": False}, {}


class TurnsEnv(MultiAgentEnv):
    """A turn-based game: "x" and "o" alternate (shared spaces, possible_agents); "o" leaves after 2 moves."""

    possible_agents = ["x", "o"]

    def __init__(self, config=None):
        self.observation_space = gym.spaces.Box(0.0, 1.0, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(3)

    def reset(self, *, seed=None, options=None):
        self.moves = {"x": 0, "o": 0}
        return {"x": np.zeros(2, np.float32)}, {}

    def step(self, action_dict):
        (agent,) = action_dict
        self.moves[agent] += 1
        if agent == "o" and self.moves["o"] > 2:
            raise RuntimeError("'o' was asked to act after it left")
        ob = np.full(2, 0.5, np.float32)
        if agent == "x" and self.moves["o"] < 2:
            return {"o": ob}, {"x": 0.5}, {"__all__": False}, {"__all__": False}, {}
        if agent == "o" and self.moves["o"] == 2:  # "o" leaves with its final obs; "x" plays on
            self.left = True
            return {"o": ob, "x": ob}, {"o": 1.0, "x": -1.0}, {"o": True, "__all__": False}, {"__all__": False}, {"x": {"turn": 1}}
        done = self.moves["x"] >= 4
        return {"x": ob}, {agent: 0.0}, {"__all__": done}, {"__all__": False}, {"__common__": {"moves": 1}}


def test_a_turn_based_env_with_shared_spaces_and_an_agent_leaving_passes():
    env = TurnsEnv()
    check_multi_agent_env(env, "turns", CTX)
    assert env.left  # "o" left mid-episode (and was not asked to act again: the env raises then)


def test_a_dict_space_env_passes():
    check_multi_agent_env(TwoAgentEnv(), "two", CTX)


def test_make_multi_agent_passes():
    check_multi_agent_env(make_multi_agent("CartPole-v1")({"num_agents": 2}), "multi-cartpole", CTX)


class ResetReturnsArray(TwoAgentEnv):
    def reset(self, *, seed=None, options=None):
        return np.zeros(2)


class ResetReturnsSingleAgentPair(TwoAgentEnv):
    def reset(self, *, seed=None, options=None):
        return 0, {}


class StepReturnsSingleAgentTuple(TwoAgentEnv):
    def step(self, action_dict):
        return 0, 1.0, False, False, {}


class StepReturnsFourItems(TwoAgentEnv):
    def step(self, action_dict):
        return super().step(action_dict)[:4]


class NoAllInTerminateds(TwoAgentEnv):
    def step(self, action_dict):
        obs, rew, term, trunc, info = super().step(action_dict)
        return obs, rew, {"a": False}, trunc, info


class NoAllInTruncateds(TwoAgentEnv):
    def step(self, action_dict):
        obs, rew, term, trunc, info = super().step(action_dict)
        return obs, rew, term, {}, info


class UnknownAgentObserved(TwoAgentEnv):
    def reset(self, *, seed=None, options=None):
        return {"a": 0, "ghost": 0}, {}


class UnknownAgentRewarded(TwoAgentEnv):
    def step(self, action_dict):
        obs, rew, term, trunc, info = super().step(action_dict)
        return obs, {**rew, "intruder": 1.0}, term, trunc, info


class UnknownAgentTerminated(TwoAgentEnv):
    def step(self, action_dict):
        obs, rew, term, trunc, info = super().step(action_dict)
        return obs, rew, {**term, "stranger": True}, trunc, info


class UnknownAgentInInfos(TwoAgentEnv):
    def step(self, action_dict):
        obs, rew, term, trunc, info = super().step(action_dict)
        return obs, rew, term, trunc, {"nobody": {}}


class ObsOutsideItsSpace(TwoAgentEnv):
    def obs(self):
        return {"a": 0, "b": 7}


class RewardNotANumber(TwoAgentEnv):
    def step(self, action_dict):
        obs, rew, term, trunc, info = super().step(action_dict)
        return obs, {"a": "1.0"}, term, trunc, info


class RewardNaN(TwoAgentEnv):
    def step(self, action_dict):
        obs, rew, term, trunc, info = super().step(action_dict)
        return obs, {"a": float("nan")}, term, trunc, info


class InfoNotADict(TwoAgentEnv):
    def reset(self, *, seed=None, options=None):
        return self.obs(), {"a": 3}


class FlagNotABool(TwoAgentEnv):
    def step(self, action_dict):
        obs, rew, term, trunc, info = super().step(action_dict)
        return obs, rew, {**term, "a": "no"}, trunc, info


class NobodyLeftToAct(TwoAgentEnv):
    def step(self, action_dict):
        obs, rew, term, trunc, info = super().step(action_dict)
        return {}, rew, {"__all__": False}, {"__all__": False}, info


class DoneAgentObservesAgain(TwoAgentEnv):
    """"a" is terminated at step 1 and observes (and would act) again at step 2; "__all__" stays False."""

    def step(self, action_dict):
        self.t += 1
        return self.obs(), {"b": 1.0}, {"a": self.t == 1, "__all__": False}, {"__all__": False}, {}


class NoObsAtReset(TwoAgentEnv):
    def reset(self, *, seed=None, options=None):
        return {}, {}


class NoSpaces(MultiAgentEnv):
    """Declares no spaces (its PolicySpecs give them, as in RLlib): only reset's dicts are checked."""

    possible_agents = ["a"]

    def reset(self, *, seed=None, options=None):
        return {"a": 0}, {}

    def step(self, action_dict):
        raise AssertionError("the checker has no action space to step this env with")


def test_an_env_without_spaces_is_checked_at_reset_only():
    check_multi_agent_env(NoSpaces(), "my-env", CTX)


class SpaceMissingForAnAgent(MultiAgentEnv):
    """possible_agents knows "b" but the per-agent spaces do not."""

    possible_agents = ["a", "b"]

    def __init__(self, config=None):
        self.observation_spaces = {"a": gym.spaces.Discrete(2)}
        self.action_spaces = {"a": gym.spaces.Discrete(2), "b": gym.spaces.Discrete(2)}

    def reset(self, *, seed=None, options=None):
        return {"a": 0, "b": 0}, {}


class StepRaises(TwoAgentEnv):
    def step(self, action_dict):
        raise ZeroDivisionError("boom in step")


BROKEN = [
    (ResetReturnsArray, "reset must return a tuple (obs, infos) of two dicts keyed by agent id; it returned ndarray"),
    (ResetReturnsArray, "single-agent gymnasium API"),
    (ResetReturnsSingleAgentPair, "reset: the observations must be a dict keyed by agent id, not int 0"),
    (StepReturnsSingleAgentTuple, "step 1: the observations must be a dict keyed by agent id, not int"),
    (StepReturnsFourItems, "step must return a tuple (obs, rewards, terminateds, truncateds, infos) of five dicts"),
    (NoAllInTerminateds, "step 1: terminateds has no '__all__' key"),
    (NoAllInTruncateds, "step 1: truncateds has no '__all__' key"),
    (UnknownAgentObserved, "the observations name agent 'ghost', which is not one of the env's agents ['a', 'b']"),
    (UnknownAgentRewarded, "step 1: the rewards name agent 'intruder', which is not one of the env's agents"),
    (UnknownAgentTerminated, "step 1: the terminateds name agent 'stranger'"),
    (UnknownAgentInInfos, "step 1: the infos name agent 'nobody'"),
    (ObsOutsideItsSpace, "reset: the observation of agent 'b' is not within its observation space Discrete(4): int 7"),
    (RewardNotANumber, "step 1: the reward of agent 'a' is str '1.0', not a number"),
    (RewardNaN, "step 1: the reward of agent 'a' is nan, not a finite number"),
    (InfoNotADict, "reset: the info of agent 'a' must be a dict, not int 3"),
    (FlagNotABool, "step 1: terminateds['a'] is str 'no', not a bool"),
    (NobodyLeftToAct, "step 1: no agent is left to act"),
    (DoneAgentObservesAgain, "step 2: agent 'a' has an observation, but it was done (terminated or truncated) at step 1: "
                             "an agent that is done may not act again in the same episode"),
    (NoObsAtReset, "reset returned no observation"),
    (SpaceMissingForAnAgent, "reset: agent 'b' has an observation but no observation space: agent 'b' has no observation space"),
]


@pytest.mark.parametrize("env_cls, rule", BROKEN, ids=[f"{c.__name__}-{i}" for i, (c, _) in enumerate(BROKEN)])
def test_each_broken_rule_is_one_error_naming_env_place_and_rule(env_cls, rule):
    with pytest.raises(EnvError) as info:
        check_multi_agent_env(env_cls(), "my-env", CTX)
    message = str(info.value)
    assert message.startswith("env 'my-env' (worker 2, env 1) breaks the multi-agent env API: "), message
    assert rule in message
    assert "disable_env_checking" in message and "\n" not in message


def test_an_exception_of_the_env_is_reported_with_the_method():
    with pytest.raises(EnvError, match=r"env 'my-env' \(worker 2, env 1\): step raised ZeroDivisionError: boom in step") as info:
        check_multi_agent_env(StepRaises(), "my-env", CTX)
    assert isinstance(info.value.__cause__, ZeroDivisionError)


class CountsResets(TwoAgentEnv):
    resets = 0

    def reset(self, *, seed=None, options=None):
        type(self).resets += 1
        return super().reset(seed=seed, options=options)


def test_the_check_steps_on_after_an_episode_ends():
    check_multi_agent_env(CountsResets(), "counts", CTX, steps=12)  # episodes of 5 steps: reset at 0, 5, 10
    assert CountsResets.resets == 3


class MaskedEnv(MultiAgentEnv):
    """One agent whose action_mask allows action 2 only; any other action raises."""

    def __init__(self, config=None):
        self.observation_space = gym.spaces.Dict(
            {"p": gym.spaces.Dict({"observation": gym.spaces.Discrete(2), "action_mask": gym.spaces.MultiBinary(4)})}
        )
        self.action_space = gym.spaces.Dict({"p": gym.spaces.Discrete(4)})

    def reset(self, *, seed=None, options=None):
        return {"p": {"observation": 0, "action_mask": np.array([0, 0, 1, 0], np.int8)}}, {}

    def step(self, action_dict):
        if action_dict["p"] != 2:
            raise ValueError(f"illegal action {action_dict['p']}")
        return self.reset()[0], {"p": 1.0}, {"__all__": False}, {"__all__": False}, {}


def test_random_actions_keep_to_the_action_mask():
    check_multi_agent_env(MaskedEnv(), "masked", CTX)


def test_build_env_checks_a_multi_agent_env_with_the_multi_agent_checker():
    # gymnasium's checker would reject every MultiAgentEnv (dict observations outside a Dict of agents).
    env = build_env(resolve_env(TwoAgentEnv), CTX, check=True)
    assert isinstance(env, TwoAgentEnv)
    with pytest.raises(EnvError, match=r"env 'ObsOutsideItsSpace' \(worker 2, env 1\) breaks the multi-agent env API: reset: the observation of agent 'b'"):
        build_env(resolve_env(ObsOutsideItsSpace), CTX, check=True)


def test_build_env_without_check_does_not_check():
    assert isinstance(build_env(resolve_env(ResetReturnsArray), CTX, check=False), ResetReturnsArray)


def test_build_env_checks_a_multi_agent_env_under_a_gymnasium_wrapper():
    spec = resolve_env(lambda ctx: gym.Wrapper(ObsOutsideItsSpace()))
    with pytest.raises(EnvError, match="observation of agent 'b' is not within"):
        build_env(spec, CTX, check=True)


def test_a_creator_returning_something_else_is_told_about_multi_agent_env():
    with pytest.raises(EnvError) as info:
        build_env(resolve_env(lambda ctx: object()), CTX, check=False)
    message = str(info.value)
    assert "rltune.env.MultiAgentEnv for several agents" in message and "later" not in message


def test_unpack_reset_and_step_check_the_shape_for_the_sampler():
    # Cheap shape checks the sampler runs on every reset and step (also with env checking disabled).
    env = TwoAgentEnv()
    obs, infos = unpack_reset(env.reset(), "two", CTX)
    assert obs == {"a": 0, "b": 0}
    assert unpack_step(env.step({"a": 0, "b": 1}), "two", CTX)[2] == {"a": False, "b": False, "__all__": False}
    with pytest.raises(EnvError) as info:
        unpack_reset(ResetReturnsArray().reset(), "arr", CTX)
    message = str(info.value)
    assert message.startswith("env 'arr' (worker 2, env 1) breaks the multi-agent env API: reset must return a tuple (obs, infos)")
    assert "single-agent gymnasium API" in message and "disable_env_checking" not in message
    with pytest.raises(EnvError, match=r"env 'x' \(worker 2, env 1\) breaks the multi-agent env API: step: truncateds has no '__all__' key"):
        unpack_step(NoAllInTruncateds().step({"a": 0, "b": 0}), "x", CTX)
    with pytest.raises(EnvError, match="step must return a tuple .* returned a tuple of 4"):
        unpack_step(StepReturnsFourItems().step({"a": 0, "b": 0}), "x", CTX)


class SharedSpacesAnyAgents(MultiAgentEnv):
    """One space shared by every agent, agent ids not declared: any id goes."""

    observation_space = gym.spaces.Discrete(3)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        return {7: 0, "z": 1}, {}

    def step(self, action_dict):
        assert set(action_dict) == {7, "z"}
        return {7: 2, "z": 3}, {7: 1}, {"__all__": False}, {"__all__": False}, {}


def test_shared_spaces_without_agent_ids_accept_any_agent_but_still_check_the_space():
    with pytest.raises(EnvError, match=r"step 1: the observation of agent 'z' is not within its observation space Discrete\(3\): int 3"):
        check_multi_agent_env(SharedSpacesAnyAgents(), "shared", CTX)


class SpacesByKind(MultiAgentEnv):
    """Agents "scout_1", "scout_2"...: their spaces come from ``get_*_space`` by kind, as the sampler reads them."""

    possible_agents = ["scout_1", "scout_2"]
    observation_space = gym.spaces.Dict({"scout": gym.spaces.Discrete(3)})  # keyed by kind, not by agent
    action_space = gym.spaces.Dict({"scout": gym.spaces.Discrete(2)})

    def get_observation_space(self, agent_id):
        return self.observation_space["scout"]

    def get_action_space(self, agent_id):
        return self.action_space["scout"]

    def reset(self, *, seed=None, options=None):
        return {"scout_1": 0}, {}

    def step(self, action_dict):  # scout_1 acts, leaves and scout_2 enters; then scout_2 acts and the episode ends
        (agent,) = action_dict
        if agent == "scout_1":
            return {"scout_1": 1, "scout_2": 2}, {"scout_1": 1.0}, {"scout_1": True, "__all__": False}, {"__all__": False}, {}
        return {"scout_2": 2}, {"scout_2": 1.0}, {"scout_2": True, "__all__": True}, {"__all__": False}, {}


def test_the_checker_reads_spaces_with_the_envs_own_get_space_methods():
    check_multi_agent_env(SpacesByKind(), "kinds", CTX)  # was: agent 'scout_1' has no observation space
