"""Curriculum learning: a corridor whose length is the task, learned with and without a curriculum.

The agent starts at cell 0 of a corridor and steps left or right; it earns
1.0 for reaching the last cell and nothing else, and an episode is cut after
``2 * length`` steps. A random walk reaches the end of a 4-cell corridor in
about 25% of its episodes, but the end of the 20-cell one in about 0.2%: PPO
trained on the 20-cell corridor from the start explores blindly until a
first lucky success gives it something to learn from. With a
``CurriculumCallback`` (the ``curriculum`` config key) the corridor grows
4 -> 8 -> 12 -> 16 -> 20 cells, each time the success rate on the current
length has been >= 0.8 for two iterations, and what PPO learned on the short
corridors carries over to the long one.

Both runs train PPO on 8 envs with the same settings and seed and stop when
the 20-cell corridor is solved: the last 50 training episodes all ran in the
20-cell corridor (custom metric ``corridor_length_min``, reported by a
callback) and >= 90% of them reached its end. Run it (about 10 s)::

    python examples/curriculum.py            # seed 0
    python examples/curriculum.py --seed 3

The curriculum run from the command line (the same env, config and phases),
from the repository root::

    rltune train -f studies/curriculum-corridor.yaml

``benchmarks/bench_curriculum.py`` runs both for 5 seeds and compares the env
steps they need.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import gymnasium as gym
import numpy as np

from rltune.callbacks import DefaultCallbacks, TaskSettableEnv
from rltune.trainers import PPO

MAX_LENGTH = 20  # the hardest task
SOLVED_RATE = 0.9  # success rate over the last 50 training episodes, all in the longest corridor


class Corridor(TaskSettableEnv):
    """Walk right from cell 0 to cell ``length``: reward 1.0 there (terminated), 0.0 everywhere else.

    The task is the corridor's length. env_config: ``length`` (the initial
    task, default 20), ``max_length`` (default 20; scales the observation,
    ``position / max_length``, so that every length shares one observation
    space) and ``steps_per_cell`` (default 2: an episode is truncated after
    ``steps_per_cell * length`` steps). Actions: 0 left (a wall at cell 0),
    1 right. A new length takes effect at the next reset; ``info["length"]``
    is the length of the running episode.
    """

    def __init__(self, env_config: dict | None = None) -> None:
        env_config = env_config or {}
        self.max_length = int(env_config.get("max_length", MAX_LENGTH))
        self.steps_per_cell = int(env_config.get("steps_per_cell", 2))
        self.length = int(env_config.get("length", self.max_length))
        self.next_length = self.length
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.pos = 0
        self.steps = 0

    def get_task(self) -> int:
        return self.next_length

    def set_task(self, task: Any) -> None:
        length = int(task)
        if not 1 <= length <= self.max_length:
            raise ValueError(f"corridor length must be in [1, {self.max_length}], but got {task!r}")
        self.next_length = length

    def _obs(self) -> np.ndarray:
        return np.array([self.pos / self.max_length], dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.length = self.next_length
        self.pos, self.steps = 0, 0
        return self._obs(), {"length": self.length}

    def step(self, action):
        self.pos = self.pos + 1 if action == 1 else max(0, self.pos - 1)
        self.steps += 1
        terminated = self.pos >= self.length
        truncated = not terminated and self.steps >= self.steps_per_cell * self.length
        return self._obs(), float(terminated), terminated, truncated, {"length": self.length}


class CorridorLength(DefaultCallbacks):
    """Reports the corridor length each episode ran in as custom metric ``corridor_length``.

    Custom metrics summarise the same window of episodes as
    ``episode_reward_mean``, so ``corridor_length_min == 20`` says that the
    success rate in the same result was measured in the longest corridor only.
    """

    def on_episode_end(self, *, episode, **kwargs) -> None:
        episode.custom_metrics["corridor_length"] = episode.last_info()["length"]


# Move on when the success rate (episode_reward_mean) is >= 0.8 two iterations in a row.
CURRICULUM = {
    "metric": "episode_reward_mean",
    "phases": [
        {"task": 4, "threshold": 0.8, "patience": 2},
        {"task": 8, "threshold": 0.8, "patience": 2},
        {"task": 12, "threshold": 0.8, "patience": 2},
        {"task": 16, "threshold": 0.8, "patience": 2},
        {"task": MAX_LENGTH},
    ],
}

CONFIG = {
    "env": Corridor,
    "env_config": {"length": MAX_LENGTH, "max_length": MAX_LENGTH},
    "callbacks": CorridorLength,
    "num_workers": 0,
    "num_envs_per_worker": 8,
    "rollout_fragment_length": 64,  # 8 envs x 64 steps = 512 env steps per iteration
    "train_batch_size": 512,
    "sgd_minibatch_size": 128,
    "num_sgd_iter": 10,
    "lr": 1e-3,
    "gamma": 0.99,
    "lambda": 0.95,
    # Sparse rewards: until a first success every reward is 0, and per-minibatch advantage
    # normalisation would blow value-function noise up into full-size updates that soon make
    # the policy always step left. Unnormalised advantages and a small entropy bonus keep it
    # exploring uniformly until it first reaches the end.
    "normalize_advantages": False,
    "entropy_coeff": 0.01,
    "model": {"fcnet_hiddens": [32, 32]},
    # Success rate over the last 50 episodes: recent enough to follow a phase change.
    "metrics_num_episodes_for_smoothing": 50,
}


def is_solved(result: dict[str, Any]) -> bool:
    """The last 50 episodes all ran in the longest corridor and >= 90% of them reached its end."""
    longest_only = result["custom_metrics"].get("corridor_length_min") == MAX_LENGTH
    return longest_only and result["episode_reward_mean"] >= SOLVED_RATE


def train_until_solved(
    curriculum: bool,
    seed: int = 0,
    max_steps: int = 150_000,
    *,
    verbose: bool = True,
    results_dir: str | None = None,
) -> dict[str, Any]:
    """Train PPO, with the curriculum or in the longest corridor only, until :func:`is_solved`.

    Returns the env steps it took (``None`` if not within ``max_steps``), the
    iterations, the wall time and, with the curriculum, the env steps at
    which each phase began.
    """
    config = {**CONFIG, "seed": seed}
    if curriculum:
        config["curriculum"] = CURRICULUM
    start = time.perf_counter()
    phases: list[tuple[int, int]] = []
    solved_at = None
    with PPO(config=config, results_dir=results_dir or "/tmp/rltune_examples") as trainer:
        if curriculum:
            phases.append((0, trainer.current_task()))
        while trainer.timesteps_total < max_steps:
            result = trainer.train()
            if curriculum and result["curriculum_task"] != phases[-1][1]:
                phases.append((result["timesteps_total"], result["curriculum_task"]))
                if verbose:
                    print(
                        f"    {result['timesteps_total']:>6,} env steps: phase {result['curriculum_phase']}, "
                        f"corridor length {result['curriculum_task']}"
                    )
            if is_solved(result):
                solved_at = result["timesteps_total"]
                break
        iterations = trainer.iteration
    return {
        "steps": solved_at,
        "iterations": iterations,
        "seconds": time.perf_counter() - start,
        "phases": phases,
        "max_steps": max_steps,
    }


def describe(run: dict[str, Any]) -> str:
    """``solved after N env steps (...)`` or ``not solved within N env steps``."""
    if run["steps"] is None:
        return f"not solved within {run['max_steps']:,} env steps ({run['seconds']:.0f} s)"
    return f"solved after {run['steps']:,} env steps ({run['iterations']} iterations, {run['seconds']:.1f} s)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-steps", type=int, default=150_000, help="env step budget of each run (default 150000)")
    args = parser.parse_args()

    goal = f"the end of the {MAX_LENGTH}-cell corridor"
    print(f"Solved: >= {SOLVED_RATE:.0%} of the last 50 training episodes reach {goal}.")
    lengths = " -> ".join(str(phase["task"]) for phase in CURRICULUM["phases"])
    print(f"PPO with a curriculum, corridor length {lengths}:")
    with_curriculum = train_until_solved(True, args.seed, args.max_steps)
    print(f"  {describe(with_curriculum)}")
    print(f"PPO in the {MAX_LENGTH}-cell corridor from the start:")
    from_start = train_until_solved(False, args.seed, args.max_steps)
    print(f"  {describe(from_start)}")
    if with_curriculum["steps"] and from_start["steps"]:
        print(f"the curriculum needed {from_start['steps'] / with_curriculum['steps']:.1f}x fewer env steps")
    elif with_curriculum["steps"]:
        print(f"only the curriculum solved it within {args.max_steps:,} env steps")


if __name__ == "__main__":
    main()
