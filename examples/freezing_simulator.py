"""A simulator that sometimes freezes: ``sample_timeout_s`` and ``recreate_failed_workers`` keep PPO training.

``FreezingCartPole`` is CartPole whose ``step()`` now and then never returns,
as a simulator waiting on a dead socket would. A rollout worker stuck in it
does not answer its ``sample()`` call within ``sample_timeout_s``: the trainer
kills it and, with ``recreate_failed_workers``, starts a new process in its
place (same worker index, the current weights) and samples again; the results
count the replacements in ``num_worker_restarts``. Without
``recreate_failed_workers``, ``train()`` would raise a ``WorkerError`` naming
the env, the worker and the call. The bound applies to rollout worker
processes (``num_workers >= 1``): an env stepping in the trainer's own process
cannot be interrupted safely.

Run it (a minute or two, with a few freezes)::

    python examples/freezing_simulator.py
"""

from __future__ import annotations

import time

import gymnasium as gym

from rltune.trainers import PPO


class FreezingCartPole(gym.Wrapper):
    """CartPole-v1 whose ``step()`` hangs forever with probability ``env_config["freeze_prob"]`` (default 1e-4)."""

    def __init__(self, env_config: dict) -> None:
        super().__init__(gym.make("CartPole-v1"))
        self.freeze_prob = float(env_config.get("freeze_prob", 1e-4))

    def step(self, action):
        if self.np_random.random() < self.freeze_prob:
            time.sleep(10**6)  # frozen: only killing the process ends this
        return self.env.step(action)


CONFIG = {
    "env_config": {"freeze_prob": 1e-4},
    "num_workers": 2,
    "rollout_fragment_length": 500,
    "train_batch_size": 2000,
    "sgd_minibatch_size": 250,
    "num_sgd_iter": 10,
    "lr": 3e-4,
    "model": {"fcnet_hiddens": [64, 64]},
    "sample_timeout_s": 5,  # a healthy worker samples 500 steps in well under a second
    "recreate_failed_workers": True,
    "disable_env_checking": True,  # gymnasium's checker would step it too
}


def main(iterations: int = 15) -> dict:
    """Train PPO for ``iterations`` and print the reward and the replaced workers; the last result."""
    with PPO(config=CONFIG, env=FreezingCartPole) as trainer:
        for _ in range(iterations):
            result = trainer.train()
            print(f"iteration {result['training_iteration']:2d}: reward {result['episode_reward_mean']:6.1f}, "
                  f"workers replaced so far {result['num_worker_restarts']}")
    return result


if __name__ == "__main__":
    main()
