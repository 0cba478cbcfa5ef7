"""A custom environment, trained with PPO: passed as a class, then by a name given to register_env.

The env's constructor takes one ``env_config`` argument (an ``EnvContext``:
the config dict plus ``worker_index``, ``vector_index``, ``num_workers``), as
in RLlib. Rollout worker processes are started with ``subprocess``, so this
script works with or without the ``if __name__ == "__main__":`` guard, and
the class and the lambda defined here reach the workers.

Run it (about 10 s)::

    python examples/custom_env.py

The same env from the command line, from the repository root: an import
string names a module on Python's path, and rltune adds no directory to it
(not even the current one), so put the root on ``PYTHONPATH``::

    PYTHONPATH=. rltune train --run PPO --env examples.custom_env:Corridor \\
        --config '{"env_config": {"corridor_length": 5}}' --stop '{"episode_reward_mean": 0.5}'
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from rltune.trainers import get_trainer_class, register_env


class Corridor(gym.Env):
    """Walk right from cell 0 to the end of a corridor: -0.1 per step, +1 on reaching the end.

    ``env_config``: ``corridor_length`` (default 5) and ``max_steps`` (default 50).
    The best return is ``1 - 0.1 * (corridor_length - 1)``; a random walk scores far below.
    """

    def __init__(self, env_config: dict | None = None) -> None:
        env_config = env_config or {}
        self.end = int(env_config.get("corridor_length", 5))
        self.max_steps = int(env_config.get("max_steps", 50))
        self.action_space = gym.spaces.Discrete(2)  # 0: left, 1: right
        self.observation_space = gym.spaces.Box(0.0, float(self.end), shape=(1,), dtype=np.float32)
        self.pos = 0
        self.steps = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.pos, self.steps = 0, 0
        return np.array([self.pos], dtype=np.float32), {}

    def step(self, action):
        self.pos = max(0, self.pos - 1) if action == 0 else self.pos + 1
        self.steps += 1
        terminated = self.pos >= self.end
        truncated = self.steps >= self.max_steps and not terminated
        reward = 1.0 if terminated else -0.1
        return np.array([self.pos], dtype=np.float32), reward, terminated, truncated, {}


CONFIG = {
    "env_config": {"corridor_length": 5},
    "num_envs_per_worker": 4,
    "rollout_fragment_length": 50,
    "train_batch_size": 400,
    "sgd_minibatch_size": 100,
    "num_sgd_iter": 10,
    "lr": 3e-3,
    "model": {"fcnet_hiddens": [32]},
    "seed": 0,
}
BEST_RETURN = 1.0 - 0.1 * (CONFIG["env_config"]["corridor_length"] - 1)


def train(env, config: dict, max_iterations: int = 30) -> float:
    """Train PPO on ``env`` until the mean training return is near the best; return the deterministic mean return."""
    PPO = get_trainer_class("PPO")
    with PPO(config=config, env=env) as trainer:
        for _ in range(max_iterations):
            result = trainer.train()
            if result["episode_reward_mean"] >= BEST_RETURN - 0.1:
                break
        print(
            f"  iteration {result['training_iteration']}, {result['timesteps_total']} steps: "
            f"training episode_reward_mean {result['episode_reward_mean']:.2f}"
        )
        return trainer.evaluate(10)["evaluation"]["episode_reward_mean"]


def main() -> None:
    print(f"Corridor of length 5: best return {BEST_RETURN:.1f}")

    print("PPO with env=Corridor (the class), sampling in this process:")
    by_class = train(Corridor, CONFIG)
    print(f"  deterministic mean return: {by_class:.2f}")

    # A name for configs and YAML files; the creator gets the EnvContext. With
    # num_workers 2 the lambda is shipped to two rollout worker processes.
    register_env("corridor", lambda ctx: Corridor(ctx))
    print("PPO with env='corridor' (register_env), 2 rollout worker processes:")
    by_name = train("corridor", {**CONFIG, "num_workers": 2, "num_envs_per_worker": 2})
    print(f"  deterministic mean return: {by_name:.2f}")

    if min(by_class, by_name) < BEST_RETURN - 0.1:
        raise SystemExit("did NOT learn the corridor")
    print("learned the corridor")


if __name__ == "__main__":
    main()
