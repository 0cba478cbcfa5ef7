"""PPO and DQN side by side: tiny per-algorithm configs for tests of behaviour every trainer shares.

Tests take the ``trainer_cls`` fixture (tests/conftest.py: PPO, then DQN; a
new algorithm is added there and here) and build their config from the shared keys plus
:func:`iteration_config`, which gives each algorithm the same env steps per
``train()`` call (the same sampling rounds) and the cheapest update it has.
"""

from __future__ import annotations

from typing import Any

from rltune.trainers import DQN, PPO, Trainer

DQN_MINIBATCH = 8


def iteration_config(trainer_cls: type[Trainer], steps: int, *, minibatch: int | None = None) -> dict[str, Any]:
    """Keys that make one ``train()`` of ``trainer_cls`` sample rounds until ``steps`` env steps, then update.

    PPO: a train batch of ``steps``, one SGD pass in minibatches of
    ``minibatch`` (default: the whole batch). DQN: ``steps`` sampled per
    iteration, learning from the first round on (one gradient step per round
    on :data:`DQN_MINIBATCH` replayed transitions, ``minibatch`` if given),
    a small replay buffer.
    """
    if issubclass(trainer_cls, PPO):
        return {"train_batch_size": steps, "sgd_minibatch_size": minibatch or steps, "num_sgd_iter": 1}
    if issubclass(trainer_cls, DQN):
        return {
            "min_sample_timesteps_per_iteration": steps,
            "train_batch_size": minibatch or DQN_MINIBATCH,
            "learning_starts": 0,
            "replay_buffer_config": {"capacity": 1000},
        }
    raise TypeError(f"no tiny config for {trainer_cls.__name__}")


def steps_per_iteration(trainer_cls: type[Trainer], config: dict[str, Any]) -> int:
    """The env steps one ``train()`` samples at least under ``config`` (the key differs by algorithm)."""
    key = "min_sample_timesteps_per_iteration" if issubclass(trainer_cls, DQN) else "train_batch_size"
    return config[key]
