"""Callbacks: track CartPole's pole angle in every episode and report it as a custom metric.

``PoleAngleCallbacks`` keeps the pole angle (observation index 2, in
radians) of every step of an episode in ``episode.user_data`` and, when the
episode ends, reports the mean absolute angle as custom metric
``pole_angle``; results then hold ``custom_metrics/pole_angle_mean``,
``_min`` and ``_max`` over the same episodes as ``episode_reward_mean``. Its
``on_train_result`` prints how many episodes each iteration finished.

The episode hooks run in the rollout worker process that owns the env (here
one worker, ``num_workers: 1``): the class is defined in this script and
shipped there, as a lambda would be. Run it (about 10-20 s)::

    python examples/callbacks_pole_angle.py
"""

from __future__ import annotations

import numpy as np

from rltune.callbacks import DefaultCallbacks
from rltune.trainers import PPO


class PoleAngleCallbacks(DefaultCallbacks):
    """Mean absolute pole angle of each episode as custom metric ``pole_angle``; episodes per iteration printed."""

    def on_episode_start(self, *, episode, env, env_index, **kwargs) -> None:
        # The observation of the reset that started the episode.
        episode.user_data["pole_angles"] = [abs(float(episode.last_observation()[2]))]

    def on_episode_step(self, *, episode, env, env_index, **kwargs) -> None:
        episode.user_data["pole_angles"].append(abs(float(episode.last_observation()[2])))

    def on_episode_end(self, *, episode, env, env_index, **kwargs) -> None:
        episode.custom_metrics["pole_angle"] = float(np.mean(episode.user_data["pole_angles"]))

    def on_train_result(self, *, trainer, result, **kwargs) -> None:
        # Runs in this (the trainer's) process after every iteration.
        print(
            f"iteration {result['training_iteration']:>2}: {result['episodes_this_iter']:>3} episodes, "
            f"episode_reward_mean {result['episode_reward_mean']:6.1f}, "
            f"pole_angle_mean {result['custom_metrics']['pole_angle_mean']:.4f} rad"
        )


# PPO on CartPole-v1 (close to studies/cartpole-ppo.yaml, with larger batches), in one rollout worker.
CONFIG = {
    "env": "CartPole-v1",
    "callbacks": PoleAngleCallbacks,
    "num_workers": 1,
    "num_envs_per_worker": 8,
    "rollout_fragment_length": 128,  # 8 envs x 128 steps = 1024 env steps per iteration
    "train_batch_size": 1024,
    "sgd_minibatch_size": 256,
    "num_sgd_iter": 10,
    "lambda": 0.8,
    "gamma": 0.98,
    "lr": 1e-3,
    "kl_coeff": 0.0,
    "vf_loss_coeff": 0.5,
    "vf_clip_param": None,
    "grad_clip": 0.5,
    "model": {"fcnet_hiddens": [64, 64]},
    "seed": 0,
}
ITERATIONS = 40


def main() -> None:
    with PPO(config=CONFIG, results_dir="/tmp/rltune_examples") as trainer:
        results = [trainer.train() for _ in range(ITERATIONS)]
    first, last = results[0], results[-1]
    print(
        f"pole angle, mean |angle| per episode: {first['custom_metrics']['pole_angle_mean']:.4f} rad at first "
        f"(episode_reward_mean {first['episode_reward_mean']:.0f}), "
        f"{last['custom_metrics']['pole_angle_mean']:.4f} rad after {last['timesteps_total']:,} env steps "
        f"(episode_reward_mean {last['episode_reward_mean']:.0f})"
    )


if __name__ == "__main__":
    main()
