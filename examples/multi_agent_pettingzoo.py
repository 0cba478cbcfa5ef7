"""PPO on PettingZoo's rock-paper-scissors (an AEC game) against a fixed opponent that favours rock.

PettingZoo's ``rps_v2`` is turn-based in PettingZoo's AEC API (player_0
moves, then player_1; each observes the other's previous move), and
``rltune.env.PettingZooEnv`` makes it a MultiAgentEnv: only the player to
move observes, and each round's result reaches both players. Two policies
play it:

- ``learner``: PPO, playing player_0;
- ``rock_lover``: :class:`RockLover`, a fixed heuristic (a Policy subclass
  that only acts, never trains): rock 60% of the time, paper or scissors 20%
  each, whatever it observes.

The best reply is always paper: +1 against rock, 0 against paper, -1 against
scissors, so 0.6 - 0.2 = +0.4 a round, +4 over a game of 10 rounds, where a
random player scores 0 on average. PPO finds it in a few thousand env steps.

The env reaches the trainer by a name given to ``register_env`` (any
creator function works; it gets the ``EnvContext``), and, for study files
and the command line, by the import string of :class:`RockPaperScissors`.
Run it (about 10 s)::

    python examples/multi_agent_pettingzoo.py

A study tunes the learner's learning rate on the same game, its metric the
learner's own return (``policy_reward_mean/learner``), from the repository root::

    rltune tune studies/multi-agent-rps.yaml
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

from rltune.env import PettingZooEnv, register_env
from rltune.trainers import PPO, Policy, PolicySpec

ROUNDS = 10  # rounds of a game (PettingZoo's max_cycles)
ROCK, PAPER, SCISSORS = 0, 1, 2
OPPONENT_ODDS = (0.6, 0.2, 0.2)  # rock, paper, scissors
BEST_RETURN = ROUNDS * (OPPONENT_ODDS[ROCK] - OPPONENT_ODDS[SCISSORS])  # always paper


def pettingzoo_rps(rounds: int) -> Any:
    """PettingZoo's AEC rock-paper-scissors of ``rounds`` rounds (``pettingzoo.make``, PettingZoo 1.27 on)."""
    import pettingzoo

    if hasattr(pettingzoo, "make"):
        return pettingzoo.make("aec", "classic/rps-v2", max_cycles=rounds)
    from pettingzoo.classic import rps_v2  # older PettingZoo

    return rps_v2.env(max_cycles=rounds)


def make_rps(env_config: dict[str, Any]) -> PettingZooEnv:
    """The env creator given to ``register_env``: PettingZoo's game, wrapped."""
    return PettingZooEnv(pettingzoo_rps(int(env_config.get("rounds", ROUNDS))))


class RockPaperScissors(PettingZooEnv):
    """The same game as a class taking ``env_config`` (``rounds``, default 10), for import strings in YAML."""

    def __init__(self, env_config: dict[str, Any] | None = None) -> None:
        super().__init__(pettingzoo_rps(int((env_config or {}).get("rounds", ROUNDS))))


class RockLover(Policy):
    """A fixed opponent: throws rock, paper, scissors with the odds of ``OPPONENT_ODDS``, whatever it observes."""

    def compute_actions(self, obs: np.ndarray, explore: bool = True) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        return self.rng.choice(3, size=len(obs), p=OPPONENT_ODDS), {}


def map_players(agent_id: str, episode: Any = None, worker: Any = None, **kwargs: Any) -> str:
    """player_0 is the learner, player_1 the rock lover."""
    return "learner" if agent_id == "player_0" else "rock_lover"


CONFIG = {
    "env": "rps",
    "env_config": {"rounds": ROUNDS},
    "multiagent": {
        "policies": {
            "learner": PolicySpec(config={"lr": 3e-3}),
            "rock_lover": PolicySpec(policy_class=RockLover),
        },
        "policy_mapping_fn": map_players,
        "policies_to_train": ["learner"],
    },
    "num_workers": 0,
    "num_envs_per_worker": 8,
    "rollout_fragment_length": 40,  # 2 games of 20 turns per env: 320 env steps per iteration
    "train_batch_size": 320,
    "sgd_minibatch_size": 80,
    "num_sgd_iter": 8,
    "model": {"fcnet_hiddens": [32]},
    "metrics_num_episodes_for_smoothing": 50,
}


def train(seed: int = 0, max_iterations: int = 60, *, verbose: bool = True, results_dir: str | None = None) -> dict[str, Any]:
    """Train until the learner averages 90% of the best return over 50 games; its last result and the time."""
    register_env("rps", make_rps)  # the name CONFIG's env refers to (rollout worker processes get it too)
    start = time.perf_counter()
    with PPO(config={**CONFIG, "seed": seed}, results_dir=results_dir or "/tmp/rltune_examples") as trainer:
        for _ in range(max_iterations):
            result = trainer.train()
            learner = result["policy_reward_mean"].get("learner", float("nan"))
            if verbose:
                print(f"iteration {result['training_iteration']:>3}: {result['timesteps_total']:>6,} env steps, "
                      f"learner {learner:+.2f}, rock_lover {result['policy_reward_mean'].get('rock_lover', 0.0):+.2f}")
            if learner >= 0.9 * BEST_RETURN:
                break
        paper = [trainer.compute_single_action(obs, policy_id="learner") for obs in range(4)]
    return {"result": result, "seconds": time.perf_counter() - start, "greedy_moves": paper}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    from _extras import require_extra  # examples/_extras.py, beside this script

    require_extra("pettingzoo", modules=("pettingzoo", "pygame"))  # pygame: PettingZoo's classic games import it
    run = train(args.seed)
    learner = run["result"]["policy_reward_mean"]["learner"]
    names = {ROCK: "rock", PAPER: "paper", SCISSORS: "scissors"}
    print(f"learner: {learner:+.2f} a game (best {BEST_RETURN:+.1f}, random 0) after "
          f"{run['result']['timesteps_total']:,} env steps, {run['seconds']:.1f} s")
    print("greedy move after each opponent move (rock, paper, scissors, none):",
          ", ".join(names[int(m)] for m in run["greedy_moves"]))
