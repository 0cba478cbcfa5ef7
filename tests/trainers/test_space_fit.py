"""A policy's spaces fit its agents' both ways: the agents' observations into the policy, the policy's actions into the agents."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rltune.env import make_multi_agent
from rltune.errors import ConfigError
from rltune.trainers import PPO, PolicySpec
from rltune.trainers.policies._space_fit import fits_within
from trainer_params import iteration_config
from trainers.multi_agent_envs import RockPaperScissors, TurnGame

S = gym.spaces
TINY = {"model": {"fcnet_hiddens": [16]}, "seed": 1, "rollout_fragment_length": 8, **iteration_config(PPO, 16)}


@pytest.mark.parametrize("inner, outer, fits", [
    (S.Discrete(2), S.Discrete(5), True),
    (S.Discrete(5), S.Discrete(2), False),
    (S.Discrete(2, start=1), S.Discrete(3), True),
    (S.Discrete(3, start=1), S.Discrete(3), False),
    (S.Box(0, 1, (2,), np.float32), S.Box(-5, 5, (2,), np.float32), True),
    (S.Box(-5, 5, (2,), np.float32), S.Box(0, 1, (2,), np.float32), False),
    (S.Box(0, 1, (2,), np.float32), S.Box(0, 1, (3,), np.float32), False),
    (S.Box(0, 1, (2,), np.float32), S.Box(0, 1, (1, 2), np.float32), False),
    (S.Box(0, 255, (2,), np.uint8), S.Box(0, 255, (2,), np.float32), True),  # integer values in a float Box
    (S.Box(0, 255, (2,), np.float32), S.Box(0, 255, (2,), np.uint8), False),  # 0.5 is no uint8
    (S.MultiDiscrete([2, 3]), S.MultiDiscrete([3, 3]), True),
    (S.MultiDiscrete([3, 3]), S.MultiDiscrete([2, 3]), False),
    (S.MultiBinary(3), S.MultiBinary(3), True),
    (S.MultiBinary(3), S.MultiBinary(4), False),
    (S.Tuple([S.Discrete(2), S.Discrete(3)]), S.Tuple([S.Discrete(3), S.Discrete(3)]), True),
    (S.Tuple([S.Discrete(2)]), S.Tuple([S.Discrete(2), S.Discrete(2)]), False),
    (S.Dict({"a": S.Discrete(2)}), S.Dict({"a": S.Discrete(3)}), True),
    (S.Dict({"a": S.Discrete(2)}), S.Dict({"b": S.Discrete(2)}), False),
    (S.Discrete(2), S.Box(0, 1, (1,), np.float32), False),
])
def test_a_space_fits_within_another_when_every_value_of_it_is_one_of_the_other(inner, outer, fits):
    assert fits_within(inner, outer) is fits


class ActionSpy(TurnGame):
    """TurnGame that records every action it is sent."""

    actions: list[int] = []

    def step(self, action_dict):
        ActionSpy.actions.extend(int(a) for a in action_dict.values())
        return super().step(action_dict)


def test_a_policy_with_actions_its_agents_do_not_have_is_refused_before_any_step():
    ActionSpy.actions = []
    cfg = {"env": ActionSpy, "multiagent": {"policies": {"p": PolicySpec(action_space=S.Discrete(5))}}, **TINY}
    with pytest.raises(ConfigError) as info:
        PPO(config=cfg)
    message = str(info.value)
    for text in ("multiagent.policies.p: agent 'x' of env 'ActionSpy'", "action space Discrete(5) does not fit the agent's Discrete(2)"):
        assert text in message
    assert ActionSpy.actions and max(ActionSpy.actions) < 2  # the env checker's own actions only: none of 2-4


def test_a_policy_with_fewer_actions_than_its_agents_acts_within_them():
    cfg = {"env": RockPaperScissors, "multiagent": {"policies": {"p": PolicySpec(action_space=S.Discrete(2))}}, **TINY}
    with PPO(config=cfg) as trainer:
        assert trainer.train()["episodes_this_iter"] > 0


@pytest.mark.parametrize("space, why", [
    (S.Box(-3.0, 3.0, (1,), np.float32), "Box(-3.0, 3.0, (1,), float32) does not fit the agent's Box(-2.0, 2.0, (1,), float32)"),
    (S.Box(-1.0, 1.0, (2,), np.float32), "Box(-1.0, 1.0, (2,), float32) does not fit the agent's Box(-2.0, 2.0, (1,), float32)"),
])
def test_a_box_action_space_must_have_the_agents_shape_and_bounds_within_theirs(space, why):
    pendulums = make_multi_agent("Pendulum-v1")
    cfg = {"env": pendulums, "env_config": {"num_agents": 2}, **TINY,
           "multiagent": {"policies": {"p": PolicySpec(action_space=space)}, "policy_mapping_fn": lambda a, *x, **k: "p"}}
    with pytest.raises(ConfigError, match=r"agent 0 of env .* is mapped to it, but the policy's action space") as info:
        PPO(config=cfg)
    assert why in str(info.value)
    narrower = {**cfg, "multiagent": {**cfg["multiagent"], "policies": {"p": PolicySpec(action_space=S.Box(-1.0, 1.0, (1,), np.float32))}}}
    PPO(config=narrower).stop()  # within the agents' bounds: fits


class TwoSizes(TurnGame):
    """TurnGame where "o" observes 3 numbers, "x" 2."""

    def __init__(self, config=None):
        super().__init__(config)
        self.observation_space = S.Dict({"x": S.Box(0.0, 1.0, (2,), np.float32), "o": S.Box(0.0, 1.0, (3,), np.float32)})

    def _obs(self, agent):
        obs = super()._obs(agent)
        return obs if agent == "x" else np.append(obs, 0.5).astype(np.float32)


def test_agents_of_different_observation_spaces_mapped_to_one_policy_are_refused_up_front():
    cfg = {"env": TwoSizes, "multiagent": {"policies": {"p"}}, **TINY}
    with pytest.raises(ConfigError, match=r"multiagent.policies.p: agent 'x' of env 'TwoSizes' is mapped to it, but its "
                                          r"observation space Box\(0.0, 1.0, \(2,\), float32\) does not fit the "
                                          r"policy's Box\(0.0, 1.0, \(3,\), float32\)"):
        PPO(config=cfg)


class LateMapping:
    """Maps every agent to "wide", but only once episodes run (it raises while the trainer is built)."""

    ready = False

    def __call__(self, agent_id, episode, worker, **kwargs):
        if not self.ready:
            raise LookupError("no running episode yet")
        return "wide"


def test_an_agent_mapped_only_once_an_episode_runs_is_checked_when_it_first_appears():
    mapping = LateMapping()
    policies = {"wide": PolicySpec(observation_space=S.Box(0.0, 1.0, (2,), np.float32), action_space=S.Discrete(5))}
    with PPO(config={"env": TurnGame, "multiagent": {"policies": policies, "policy_mapping_fn": mapping}, **TINY}) as trainer:
        mapping.ready = True
        with pytest.raises(ConfigError, match=r"multiagent.policies.wide: agent 'x' of env 'TurnGame' is mapped to it, "
                                              r"but the policy's action space Discrete\(5\) does not fit"):
            trainer.workers.local_worker.sample()
