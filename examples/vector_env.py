"""gymnasium vector envs as rltune envs: each worker steps one VectorEnv, with one step(actions) call a step.

Three ways to pass one:

- an instance (here ``gymnasium.make_vec``'s ``SyncVectorEnv``), sampled in
  the trainer's process (``num_workers: 0``);
- a creator returning an ``AsyncVectorEnv``, whose sub-envs step in their own
  processes, in one rollout worker process (``num_workers: 1``): a creator,
  because an ``AsyncVectorEnv`` instance cannot be sent to another process;
- a ``SyncVectorEnv`` in ``SAME_STEP`` autoreset mode: with the same seed its
  episodes are those of ``num_envs_per_worker: 4`` plain CartPoles.

Run it (about 20 s)::

    python examples/vector_env.py
"""

from __future__ import annotations

import gymnasium as gym
from gymnasium.vector import AutoresetMode

from rltune.trainers import PPO

CONFIG = {
    "rollout_fragment_length": 100,  # steps of each sub-env a round: 4 sub-envs x 100 = 400
    "train_batch_size": 400,
    "sgd_minibatch_size": 100,
    "num_sgd_iter": 10,
    "model": {"fcnet_hiddens": [32]},
    "seed": 0,
}


def async_cartpoles(ctx):
    """A creator: each worker that calls it gets its own AsyncVectorEnv of 4 CartPoles."""
    return gym.vector.AsyncVectorEnv([lambda: gym.make("CartPole-v1")] * 4)


def train(env, iterations: int, **config) -> dict:
    """Train PPO on ``env`` for ``iterations``; the last result."""
    with PPO(config={**CONFIG, **config, "env": env}) as trainer:
        for _ in range(iterations):
            result = trainer.train()
        return result


def main(iterations: int = 5) -> None:
    sync = gym.make_vec("CartPole-v1", num_envs=4, vectorization_mode="sync")
    result = train(sync, iterations)
    print(f"make_vec instance: {result['episodes_total']} episodes, mean return {result['episode_reward_mean']:.1f}")

    result = train(async_cartpoles, iterations, num_workers=1)
    print(f"AsyncVectorEnv in a worker process: mean return {result['episode_reward_mean']:.1f}")

    same_step = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")] * 4, autoreset_mode=AutoresetMode.SAME_STEP)
    vector = train(same_step, iterations)
    listed = train("CartPole-v1", iterations, num_envs_per_worker=4)
    same = vector["episode_reward_mean"] == listed["episode_reward_mean"]
    print(f"SAME_STEP vector env vs 4 plain envs, same seed: the same episodes: {same}")


if __name__ == "__main__":
    main()
