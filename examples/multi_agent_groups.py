"""Agent groups: two agents that must coordinate, grouped so that one policy picks their joint action.

The climbing game (Claus & Boutilier, 1998) is a one-shot cooperative game:
two agents each pick a, b or c and both get the payoff of the pair::

              other: a     b     c
    me: a           11   -30     0
        b          -30     7     6
        c            0     0     5

The best pair, (a, a), is next to the worst ones: an agent that tries a while
its partner still explores mostly meets -30, so two independent learners
tend to settle on (b, b) or (c, c). Grouped with
``with_agent_groups(env, {"team": ["left", "right"]})``, the two act as one
agent "team": its observation is the tuple of theirs, its action a tuple of
theirs (a ``Tuple`` space), its reward the sum of theirs, and each member's
own reward stays in its info as ``individual_rewards``.

rltune's PPO acts in Discrete and Box spaces; :class:`JointPolicy` (a
PPOPolicy subclass, so PPO trains it) turns a Tuple of Discrete spaces into
one categorical over the joint actions (3 x 3 = 9 here), a centralized
controller, and gives the env the tuple. It finds (a, a). The same PPO
settings on the ungrouped agents, one policy each, are run first for
comparison. Run it (about 15 s)::

    python examples/multi_agent_groups.py
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import gymnasium as gym
import numpy as np

from rltune.callbacks import DefaultCallbacks
from rltune.env import MultiAgentEnv, register_env, with_agent_groups
from rltune.trainers import PPO, PolicySpec, PPOPolicy

MOVES = "abc"
PAYOFF = np.array([[11.0, -30.0, 0.0], [-30.0, 7.0, 6.0], [0.0, 0.0, 5.0]])


class ClimbingGame(MultiAgentEnv):
    """Agents "left" and "right" pick a move (0: a, 1: b, 2: c) once; each gets ``PAYOFF[left, right]``."""

    possible_agents = ["left", "right"]

    def __init__(self, env_config: dict[str, Any] | None = None) -> None:
        self.observation_space = gym.spaces.Box(0.0, 1.0, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(3)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        return {agent: np.ones(1, np.float32) for agent in self.possible_agents}, {}

    def step(self, action_dict: dict) -> tuple[dict, dict, dict, dict, dict]:
        payoff = float(PAYOFF[int(action_dict["left"]), int(action_dict["right"])])
        obs = {agent: np.ones(1, np.float32) for agent in self.possible_agents}
        rewards = {agent: payoff for agent in self.possible_agents}
        return obs, rewards, {"__all__": True}, {"__all__": False}, {agent: {} for agent in self.possible_agents}


def make_team(env_config: dict[str, Any]) -> MultiAgentEnv:
    """The env creator given to ``register_env``: the game with both agents in one group, "team"."""
    return with_agent_groups(ClimbingGame(env_config), {"team": ["left", "right"]})


class JointPolicy(PPOPolicy):
    """PPO over a Tuple of Discrete action spaces: one categorical over the joint actions, tuples to the env."""

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, config: Any, **kwargs: Any) -> None:
        if not (isinstance(action_space, gym.spaces.Tuple)
                and all(isinstance(s, gym.spaces.Discrete) for s in action_space.spaces)):
            raise ValueError(f"JointPolicy acts in a Tuple of Discrete spaces, not {action_space}")
        self.member_sizes = [int(s.n) for s in action_space.spaces]
        self.group_action_space = action_space
        super().__init__(observation_space, gym.spaces.Discrete(int(np.prod(self.member_sizes))), config, **kwargs)

    def to_env_actions(self, actions: np.ndarray) -> list[Any]:
        """Each joint action as the tuple of the members' actions."""
        return [tuple(int(a) for a in np.unravel_index(int(joint), self.member_sizes)) for joint in actions]


class IndividualRewards(DefaultCallbacks):
    """Reports the left agent's own payoff (``individual_rewards`` of the team's info) as custom metric ``left_payoff``."""

    def on_episode_end(self, *, episode: Any, **kwargs: Any) -> None:
        info = episode.last_info_for("team")
        if info:
            episode.custom_metrics["left_payoff"] = info["individual_rewards"][0]


COMMON = {
    "num_workers": 0,
    "num_envs_per_worker": 8,
    "rollout_fragment_length": 16,  # 8 envs x 16 games = 128 env steps per iteration
    "train_batch_size": 128,
    "sgd_minibatch_size": 64,
    "num_sgd_iter": 8,
    "lr": 3e-3,
    "entropy_coeff": 0.01,
    "model": {"fcnet_hiddens": [16]},
    "metrics_num_episodes_for_smoothing": 64,
}
INDEPENDENT = {
    **COMMON,
    "env": ClimbingGame,
    "multiagent": {"policies": {"left", "right"}, "policy_mapping_fn": lambda agent_id, *args, **kwargs: agent_id},
}
GROUPED = {
    **COMMON,
    "env": "climbing_team",
    "callbacks": IndividualRewards,
    "multiagent": {"policies": {"team": PolicySpec(policy_class=JointPolicy)}},  # one policy: no mapping needed
}


def train(config: dict[str, Any], iterations: int = 25, seed: int = 0, *, results_dir: str | None = None) -> dict[str, Any]:
    """Train PPO on ``config`` for ``iterations``; the last result, the greedy moves and the time."""
    register_env("climbing_team", make_team)
    start = time.perf_counter()
    with PPO(config={**config, "seed": seed}, results_dir=results_dir or "/tmp/rltune_examples") as trainer:
        for _ in range(iterations):
            result = trainer.train()
        obs = np.ones(1, np.float32)
        if "team" in trainer.workers.local_worker.policy_map:
            moves = trainer.compute_single_action((obs, obs), policy_id="team")
        else:
            moves = tuple(trainer.compute_single_action(obs, policy_id=pid) for pid in ("left", "right"))
    return {"result": result, "moves": "".join(MOVES[int(m)] for m in moves), "seconds": time.perf_counter() - start}


def describe(run: dict[str, Any]) -> str:
    """``greedy pair (a, a), payoff 11 ...``: what a trained run plays."""
    left, right = run["moves"]
    payoff = PAYOFF[MOVES.index(left), MOVES.index(right)]
    return (f"greedy pair ({left}, {right}), payoff {payoff:g} each; mean episode reward (both agents) "
            f"{run['result']['episode_reward_mean']:.1f} while training ({run['seconds']:.1f} s)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print("independent learners:", describe(train(INDEPENDENT, seed=args.seed)))
    grouped = train(GROUPED, seed=args.seed)
    print("grouped (one joint policy):", describe(grouped))
    print(f"left agent's own payoff (individual_rewards), mean of the last 64 games: "
          f"{grouped['result']['custom_metrics']['left_payoff_mean']:.1f}")
