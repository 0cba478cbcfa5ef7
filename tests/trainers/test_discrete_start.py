"""``Discrete(n, start)`` spaces: actions reach the env within its space, observations are one-hot from ``start``."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from rltune.env import MultiAgentEnv
from rltune.trainers import PolicySpec, RandomPolicy
from trainer_params import iteration_config

TINY = {"model": {"fcnet_hiddens": [16]}, "seed": 1, "rollout_fragment_length": 8}
ACTIONS = gym.spaces.Discrete(3, start=-1)
CELLS = gym.spaces.Discrete(4, start=10)


class OffsetActions(gym.Env):
    """Actions -1, 0, 1 move a cell observation ``10 .. 13``; the env refuses anything outside its spaces."""

    observation_space = CELLS
    action_space = ACTIONS

    def __init__(self, config: Any = None) -> None:
        self.cell, self.t = 11, 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[int, dict]:
        super().reset(seed=seed)
        self.cell, self.t = 11, 0
        return self.cell, {}

    def step(self, action: int) -> tuple[int, float, bool, bool, dict]:
        if not self.action_space.contains(action):
            raise ValueError(f"action {action!r} is not in {self.action_space}")
        self.cell = int(np.clip(self.cell + int(action), 10, 13))
        self.t += 1
        return self.cell, float(self.cell == 13), self.cell == 13, self.t >= 10, {}


class OffsetAgents(MultiAgentEnv):
    """Two agents, each stepping its own :class:`OffsetActions`."""

    possible_agents = ["a", "b"]
    observation_space = CELLS
    action_space = ACTIONS

    def __init__(self, config: Any = None) -> None:
        self.envs = {agent: OffsetActions() for agent in self.possible_agents}

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        return {a: env.reset()[0] for a, env in self.envs.items()}, {}

    def step(self, action_dict: dict) -> tuple[dict, dict, dict, dict, dict]:
        obs, rewards, terms, truncs = {}, {}, {}, {}
        for agent, action in action_dict.items():
            obs[agent], rewards[agent], terms[agent], truncs[agent], _ = self.envs[agent].step(action)
        done = any(terms.values()) or any(truncs.values())
        return obs, rewards, {**terms, "__all__": done}, {**truncs, "__all__": False}, {}


def test_single_agent_actions_are_offset_in_sampling_evaluation_and_compute_single_action(trainer_cls):
    cfg = {"env": OffsetActions, **iteration_config(trainer_cls, 32), **TINY,
           "evaluation_interval": 1, "evaluation_duration": 2}
    with trainer_cls(config=cfg) as trainer:
        result = trainer.train()  # OffsetActions raises on an action outside -1..1
        assert result["evaluation"]["episodes_this_iter"] == 2
        actions = {trainer.compute_single_action(cell, explore=True) for cell in (10, 11, 12, 13) for _ in range(8)}
        assert actions <= {-1, 0, 1} and -1 in actions


def test_multi_agent_actions_are_offset_for_trained_and_random_policies(trainer_cls):
    cfg = {
        "env": OffsetAgents,
        "multiagent": {"policies": {"learner": PolicySpec(), "random": PolicySpec(policy_class=RandomPolicy)},
                       "policy_mapping_fn": lambda agent, *args, **kwargs: "learner" if agent == "a" else "random"},
        **iteration_config(trainer_cls, 32), **TINY,
    }
    with trainer_cls(config=cfg) as trainer:
        trainer.train()
        for pid in ("learner", "random"):
            policy = trainer.get_policy(pid)
            actions = {policy.compute_single_action(11, explore=True) for _ in range(32)}
            assert actions <= {-1, 0, 1} and -1 in actions, pid


def test_a_discrete_observation_with_start_is_one_hot_from_start(trainer_cls):
    with trainer_cls(config={"env": OffsetActions, **iteration_config(trainer_cls, 16), **TINY}) as trainer:
        np.testing.assert_array_equal(trainer.get_policy().preprocessor(10), [1, 0, 0, 0])
        np.testing.assert_array_equal(trainer.get_policy().preprocessor(13), [0, 0, 0, 1])


def test_rltune_rollout_writes_actions_in_the_env_space(tmp_path, capsys):
    import json

    from rltune.orchestrator.cli import main
    from rltune.trainers import PPO

    with PPO(config={"env": OffsetActions, **iteration_config(PPO, 16), **TINY}) as trainer:
        checkpoint = trainer.save(tmp_path / "ckpt")
    path = tmp_path / "rollouts.jsonl"
    code = main(["rollout", str(checkpoint), "--run", "PPO", "--env", "trainers.test_discrete_start:OffsetActions",
                 "--episodes", "2", "--out", str(path), "--no-render"])
    assert code == 0, capsys.readouterr().err
    steps = [json.loads(line) for line in path.read_text().splitlines()]
    assert steps and {s["action"] for s in steps} <= {-1, 0, 1}
    with PPO.from_checkpoint(checkpoint) as trainer:  # each action is the model's index moved by start
        policy = trainer.get_policy()
        for s in steps:
            index, _ = policy.compute_actions(policy.preprocessor(s["obs"])[None], explore=False)
            assert s["action"] == int(index[0]) - 1, s
