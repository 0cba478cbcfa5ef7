"""Self-play with a league: one learned policy plays copies of itself and frozen snapshots of its past selves.

The game (:class:`Nim`) is symmetric and turn-based: a pile of 5 to 12
stones; the two players, ``p1`` (first to move) and ``p2``, take 1, 2 or 3
stones in turn; whoever takes the last stone wins (+1; the other -1). The
perfect player leaves the other a multiple of 4 stones, and wins every
game it can; a random player rarely beats it.

One policy learns, ``main``. In each episode (the mapping function is
called per agent, and decides from the episode's id, so both agents of an
episode agree), ``main`` plays one side, chosen at random, and the other
side is played by a member of the league, chosen at random: ``main`` itself
or one of its frozen snapshots. A callback (``on_train_result``) adds a
snapshot every 5 iterations, ``trainer.add_policy("main_v<n>",
policy=trainer.get_policy("main"), policy_mapping_fn=...)``: a copy of the
learner's weights that only acts (``policies_to_train`` stays ``["main"]``),
and a mapping function whose league includes it. Run it (about 30 s)::

    python examples/self_play.py

It prints, at each snapshot, how often ``main`` (greedy, on both sides)
wins against a random player and against the perfect one, then the league.
"""

from __future__ import annotations

import argparse
import random
import time
from typing import Any, Callable

import gymnasium as gym
import numpy as np

from rltune.callbacks import DefaultCallbacks
from rltune.env import MultiAgentEnv
from rltune.trainers import PPO, PolicySpec

MAX_STONES = 12
PILES = range(5, MAX_STONES + 1)
SNAPSHOT_EVERY = 5  # iterations


class Nim(MultiAgentEnv):
    """Take 1-3 stones in turn; the player who takes the last one wins. The player to move observes the pile (one-hot)."""

    possible_agents = ["p1", "p2"]

    def __init__(self, env_config: dict[str, Any] | None = None) -> None:
        self.observation_space = gym.spaces.Box(0.0, 1.0, (MAX_STONES + 1,), np.float32)
        self.action_space = gym.spaces.Discrete(3)  # take 1, 2 or 3
        self.rng = np.random.default_rng()
        self.stones, self.mover = 0, "p1"

    def _obs(self) -> np.ndarray:
        return np.eye(MAX_STONES + 1, dtype=np.float32)[self.stones]

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.stones, self.mover = int(self.rng.choice(PILES)), "p1"
        return {self.mover: self._obs()}, {}

    def step(self, action_dict: dict) -> tuple[dict, dict, dict, dict, dict]:
        mover = self.mover
        other = "p2" if mover == "p1" else "p1"
        self.stones -= min(int(action_dict[mover]) + 1, self.stones)
        if self.stones == 0:
            obs = {mover: self._obs(), other: self._obs()}
            return obs, {mover: 1.0, other: -1.0}, {"__all__": True}, {"__all__": False}, {}
        self.mover = other
        return {other: self._obs()}, {mover: 0.0}, {"__all__": False}, {"__all__": False}, {}


# Against the perfect player, a game is won only from a winning start: as p1 with a pile that is not a
# multiple of 4, as p2 with one that is. win_rate plays every pile once from each side: one of the two wins.
BEST_VS_PERFECT = 0.5


def perfect_take(stones: int) -> int:
    """The perfect move: leave a multiple of 4 (when that cannot be done, take 1)."""
    return stones % 4 or 1


class LeagueMapping:
    """Maps agents by episode: ``main`` on one side, a random league member on the other (the same for both agents)."""

    def __init__(self, league: list[str]) -> None:
        self.league = list(league)

    def __call__(self, agent_id: Any, episode: Any, worker: Any = None, **kwargs: Any) -> str:
        draw = random.Random(episode.episode_id)
        main_side = draw.choice(Nim.possible_agents)
        opponent = draw.choice(self.league)
        return "main" if agent_id == main_side else opponent


class Snapshots(DefaultCallbacks):
    """Every SNAPSHOT_EVERY iterations: freeze a copy of ``main`` into the league; ``result["league"]`` lists them.

    Each entry: the snapshot's id, its iteration, and how often greedy
    ``main`` then wins against a random player and against the perfect one.
    """

    def __init__(self) -> None:
        super().__init__()
        self.league = ["main"]
        self.history: list[dict[str, Any]] = []

    def on_train_result(self, *, trainer: Any, result: dict, **kwargs: Any) -> None:
        if result["training_iteration"] % SNAPSHOT_EVERY == 0:
            snapshot = f"main_v{len(self.league)}"
            self.league.append(snapshot)
            trainer.add_policy(snapshot, policy=trainer.get_policy("main"), policy_mapping_fn=LeagueMapping(self.league))
            self.history.append({"snapshot": snapshot, "iteration": result["training_iteration"],
                                 "vs_random": win_rate(trainer, lambda stones, rng: int(rng.integers(1, 4))),
                                 "vs_perfect": win_rate(trainer, lambda stones, rng: perfect_take(stones))})
        result["league"] = list(self.history)  # the snapshots so far, in every result


def win_rate(trainer: Any, opponent: Callable[[int, np.random.Generator], int], games: int = 200) -> float:
    """How often greedy ``main`` beats ``opponent(stones, rng) -> stones taken``, half the games as p1, half as p2."""
    rng = np.random.default_rng(0)
    wins = 0
    for game in range(games):
        stones, main_moves = PILES[game // 2 % len(PILES)], game % 2 == 0
        while True:
            if main_moves:
                obs = np.eye(MAX_STONES + 1, dtype=np.float32)[stones]
                take = int(trainer.compute_single_action(obs, policy_id="main")) + 1
            else:
                take = opponent(stones, rng)
            stones -= min(take, stones)
            if stones == 0:
                wins += main_moves
                break
            main_moves = not main_moves
    return wins / games


CONFIG = {
    "env": Nim,
    "callbacks": Snapshots,
    "multiagent": {
        "policies": {"main": PolicySpec()},
        "policy_mapping_fn": LeagueMapping(["main"]),
        "policies_to_train": ["main"],
    },
    "num_workers": 0,
    "num_envs_per_worker": 8,
    "rollout_fragment_length": 50,
    "train_batch_size": 400,
    "sgd_minibatch_size": 100,
    "num_sgd_iter": 8,
    "lr": 3e-3,
    "gamma": 1.0,
    "entropy_coeff": 0.01,
    "model": {"fcnet_hiddens": [64]},
}


def train(seed: int = 0, iterations: int = 20, *, verbose: bool = True, results_dir: str | None = None) -> dict[str, Any]:
    """Self-play for ``iterations``; the league's history (win rates at each snapshot) and the final policy ids."""
    start = time.perf_counter()
    with PPO(config={**CONFIG, "seed": seed}, results_dir=results_dir or "/tmp/rltune_examples") as trainer:
        for _ in range(iterations):
            result = trainer.train()
            history = result["league"]
            if verbose and result["training_iteration"] % SNAPSHOT_EVERY == 0:
                h = history[-1]
                print(f"iteration {h['iteration']:>3}: {h['snapshot']} joins the league; greedy main wins "
                      f"{h['vs_random']:.0%} against a random player, {h['vs_perfect']:.0%} against the perfect "
                      f"one (at best {BEST_VS_PERFECT:.0%})")
        policies = sorted(trainer.workers.local_worker.policy_map)
        trained = sorted(result["info"]["learner"])
    return {"history": history, "policies": policies, "trained": trained, "seconds": time.perf_counter() - start}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    run = train(args.seed)
    print(f"league: main (trained: {run['trained']}), " + ", ".join(
        f"{h['snapshot']} (frozen at iteration {h['iteration']})" for h in run["history"]) + f" ({run['seconds']:.1f} s)")
