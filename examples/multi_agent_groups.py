"""Agent groups: two agents that each see what the other needs, grouped so that one policy acts for both.

The card swap is a one-shot cooperative game: "left" and "right" each draw
a card (0, 1 or 2) and see only their own; each must name its partner's
card and earns 1 if it does. On its own an agent can only guess (1/3 of the
time). Grouped with ``with_agent_groups(env, {"team": ["left", "right"]})``,
the two act as one agent "team": its observation is the tuple of theirs (a
``Tuple`` of ``Discrete`` spaces, one-hot encoded for the model), its action
a tuple of theirs (a ``Tuple`` action space, which PPO samples as a product
of one categorical per member), its reward the sum of theirs, and each
member's own reward stays in its info as ``individual_rewards``. The team
sees both cards and learns to name them crosswise. The same PPO settings on
the ungrouped agents, one policy each, are run first for comparison. Run it
(about 15 s)::

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
from rltune.trainers import PPO

CARDS = 3


class CardSwap(MultiAgentEnv):
    """Agents "left" and "right" see their own card (``Discrete(3)``), name the other's (``Discrete(3)``) once; 1 if right."""

    possible_agents = ["left", "right"]

    def __init__(self, env_config: dict[str, Any] | None = None) -> None:
        self.observation_space = gym.spaces.Discrete(CARDS)
        self.action_space = gym.spaces.Discrete(CARDS)
        self.rng = np.random.default_rng()
        self.cards: dict[str, int] = {}

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.cards = {agent: int(self.rng.integers(CARDS)) for agent in self.possible_agents}
        return dict(self.cards), {}

    def step(self, action_dict: dict) -> tuple[dict, dict, dict, dict, dict]:
        partner = {"left": "right", "right": "left"}
        rewards = {agent: float(int(action_dict[agent]) == self.cards[partner[agent]]) for agent in self.possible_agents}
        return dict(self.cards), rewards, {"__all__": True}, {"__all__": False}, {agent: {} for agent in self.possible_agents}


def make_team(env_config: dict[str, Any]) -> MultiAgentEnv:
    """The env creator given to ``register_env``: the game with both agents in one group, "team"."""
    return with_agent_groups(CardSwap(env_config), {"team": ["left", "right"]})


class IndividualRewards(DefaultCallbacks):
    """Reports the left agent's own reward (``individual_rewards`` of the team's info) as custom metric ``left_payoff``."""

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
    "model": {"fcnet_hiddens": [32]},
    "metrics_num_episodes_for_smoothing": 64,
}
INDEPENDENT = {
    **COMMON,
    "env": CardSwap,
    "multiagent": {"policies": {"left", "right"}, "policy_mapping_fn": lambda agent_id, *args, **kwargs: agent_id},
}
GROUPED = {
    **COMMON,
    "env": "card_swap_team",
    "callbacks": IndividualRewards,
    "multiagent": {"policies": {"team"}},  # one policy, spaces from the env (Tuple observations and actions)
}


def train(config: dict[str, Any], iterations: int = 25, seed: int = 0, *, results_dir: str | None = None) -> dict[str, Any]:
    """Train PPO on ``config`` for ``iterations``; the last result, the greedy calls for every pair of cards and the time."""
    register_env("card_swap_team", make_team)
    start = time.perf_counter()
    calls: dict[tuple[int, int], tuple[int, int]] = {}
    with PPO(config={**config, "seed": seed}, results_dir=results_dir or "/tmp/rltune_examples") as trainer:
        for _ in range(iterations):
            result = trainer.train()
        for left in range(CARDS):
            for right in range(CARDS):
                if "team" in trainer.workers.local_worker.policy_map:
                    named = trainer.compute_single_action((left, right), policy_id="team")
                else:
                    named = (trainer.compute_single_action(left, policy_id="left"),
                             trainer.compute_single_action(right, policy_id="right"))
                calls[(left, right)] = tuple(int(card) for card in named)
    return {"result": result, "calls": calls, "seconds": time.perf_counter() - start}


def describe(run: dict[str, Any]) -> str:
    """``names both cards right for 9 of 9 deals ...``: what a trained run plays."""
    right = sum(named == (cards[1], cards[0]) for cards, named in run["calls"].items())
    return (f"names both cards right for {right} of {CARDS * CARDS} deals; mean episode reward (both agents, best 2) "
            f"{run['result']['episode_reward_mean']:.2f} while training ({run['seconds']:.1f} s)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print("independent learners:", describe(train(INDEPENDENT, seed=args.seed)))
    grouped = train(GROUPED, seed=args.seed)
    print("grouped (one policy, Tuple actions):", describe(grouped))
    print(f"left agent's own reward (individual_rewards), mean of the last 64 games: "
          f"{grouped['result']['custom_metrics']['left_payoff_mean']:.2f}")
