"""Automatic curricula: PPO on corridors of many lengths, the task drawn per episode by learning progress or PLR.

The corridor of ``examples/curriculum.py`` (reward 1.0 at the end, episodes
cut after 2 steps per cell; the observation is the position only, so the
agent cannot see how long its corridor is) declares its tasks in
``task_space``. Two task spaces:

- ``long`` (the default; ``LongCorridor``): lengths 2, 4, ..., 60. A random
  walk reaches the end of the short ones at once and never the end of the
  long ones; the value the agent learns near the start in short corridors
  then makes stepping right look bad in the long ones, where no reward
  comes. Sampling every length alike wastes most steps on lengths that are
  still out of reach (and hurt), or already mastered.
- ``short`` (``LengthCorridor``): lengths 2, 4, ..., 20, where what is
  learned in short corridors carries to 20 cells within a few iterations.

No phases are written by hand: with ``curriculum: {type:
learning_progress}`` every env draws its next length at each reset from a
distribution that favours the lengths whose success rate is changing
fastest; with ``{type: plr}`` (Prioritized Level Replay), the lengths whose
GAE advantages are largest. ``uniform`` draws every length alike (learning
progress with ``epsilon: 1``); ``hardest`` trains on the longest corridor
only.

Solved: after every other iteration, 50 episodes of the trained policy in
the longest corridor, acting as in training (sampled actions: a greedy
policy walks any corridor as soon as "right" is its likelier action), reach
its end at least 90% of the time. Run it (seconds to a minute a variant)::

    python examples/curriculum_auto.py                      # learning_progress, seed 0, lengths 2..60
    python examples/curriculum_auto.py --variant plr --seed 3 --space short

``benchmarks/bench_curriculum_auto.py`` compares the four variants over
several seeds; ``studies/curriculum-auto-corridor.yaml`` tunes the sampler's
options.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

from rltune.trainers import PPO

try:
    from examples.curriculum import CONFIG as PHASES_CONFIG
    from examples.curriculum import MAX_LENGTH, Corridor
except ImportError:  # run as a script (python examples/curriculum_auto.py): examples/ is on the path
    from curriculum import CONFIG as PHASES_CONFIG  # type: ignore[no-redef]
    from curriculum import MAX_LENGTH, Corridor  # type: ignore[no-redef]

LENGTHS = list(range(2, MAX_LENGTH + 1, 2))  # the short task space: 2, 4, ..., 20 cells
LONG_LENGTHS = list(range(2, 61, 2))  # the long one: 2, 4, ..., 60 cells
SOLVED_RATE = 0.9


class LengthCorridor(Corridor):
    """The corridor, with its lengths 2..20 declared for an automatic curriculum."""

    task_space = LENGTHS


class LongCorridor(Corridor):
    """The corridor with lengths 2..60 (env_config ``max_length: 60``, which scales the observation)."""

    task_space = LONG_LENGTHS


SPACES: dict[str, tuple[type[Corridor], int]] = {"long": (LongCorridor, 60), "short": (LengthCorridor, MAX_LENGTH)}

CURRICULA: dict[str, dict[str, Any] | None] = {
    "learning_progress": {"type": "learning_progress", "fast_alpha": 0.5, "slow_alpha": 0.1, "epsilon": 0.2},
    "plr": {"type": "plr", "score": "positive_value_loss", "temperature": 0.3, "staleness_coef": 0.2},
    "uniform": {"type": "learning_progress", "epsilon": 1.0},  # the same machinery, every length alike
    "hardest": None,
}

# examples/curriculum.py's PPO settings, on the corridor that declares its lengths (and no metrics callback).
CONFIG = {**{k: v for k, v in PHASES_CONFIG.items() if k != "callbacks"}, "env": LengthCorridor}


def space_config(space: str) -> dict[str, Any]:
    """:data:`CONFIG` on the corridor of task space ``space`` (``long`` or ``short``)."""
    env, longest = SPACES[space]
    return {**CONFIG, "env": env, "env_config": {"length": longest, "max_length": longest}}


def success_rate(trainer: PPO, seed: int, episodes: int = 50, length: int = MAX_LENGTH) -> float:
    """The share of ``episodes`` in the ``length``-cell corridor that reach its end, actions sampled as in training.

    The episodes run side by side, one batched policy call per step.
    """
    policy = trainer.get_policy()
    envs = [Corridor({"length": length, "max_length": length}) for _ in range(episodes)]
    obs = [env.reset(seed=seed * 1000 + i)[0] for i, env in enumerate(envs)]
    running, successes = list(range(episodes)), 0
    while running:
        actions, _ = policy.compute_actions(np.stack([obs[i] for i in running]), explore=True)
        still = []
        for i, action in zip(running, actions.tolist()):
            obs[i], reward, terminated, truncated, _ = envs[i].step(action)
            if terminated or truncated:
                successes += int(reward > 0)
            else:
                still.append(i)
        running = still
    return successes / episodes


def train_until_solved(variant: str, seed: int = 0, max_steps: int = 150_000, *, space: str = "long",
                       verbose: bool = True, results_dir: str | None = None) -> dict[str, Any]:
    """Train PPO with ``variant``'s task sampling until the longest corridor of ``space`` is solved (or ``max_steps``).

    Returns the env steps it took (None: not within ``max_steps``), the
    iterations, the wall time and the last task distribution.
    """
    longest = SPACES[space][1]
    config = {**space_config(space), "seed": seed}
    if CURRICULA[variant] is not None:
        config["curriculum"] = CURRICULA[variant]
    start = time.perf_counter()
    solved_at, probs = None, {}
    with PPO(config=config, results_dir=results_dir or "/tmp/rltune_examples") as trainer:
        while trainer.timesteps_total < max_steps:
            result = trainer.train()
            probs = result.get("curriculum", {}).get("task_probs", {})
            if result["training_iteration"] % 2:
                continue
            success = success_rate(trainer, seed, length=longest)
            if verbose:
                top = sorted(probs.items(), key=lambda kv: -kv[1])[:3]
                print(f"  {result['timesteps_total']:>7,} env steps: success in {longest} cells {success:.2f}"
                      + (f"; most drawn lengths {', '.join(f'{k} ({p:.2f})' for k, p in top)}" if top else ""))
            if success >= SOLVED_RATE:
                solved_at = result["timesteps_total"]
                break
        iterations = trainer.iteration
    return {"steps": solved_at, "iterations": iterations, "seconds": time.perf_counter() - start,
            "task_probs": probs, "max_steps": max_steps}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variant", choices=sorted(CURRICULA), default="learning_progress")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--space", choices=sorted(SPACES), default="long")
    parser.add_argument("--max-steps", type=int, default=150_000)
    args = parser.parse_args()
    run = train_until_solved(args.variant, args.seed, args.max_steps, space=args.space)
    if run["steps"] is None:
        print(f"{args.variant}: not solved within {args.max_steps:,} env steps ({run['seconds']:.0f} s)")
    else:
        print(f"{args.variant}: solved after {run['steps']:,} env steps ({run['iterations']} iterations, "
              f"{run['seconds']:.1f} s)")


if __name__ == "__main__":
    main()
