"""An RLlib 2.x example script (its custom-env example), ported by renaming ``ray.rllib.`` / ``ray.`` to ``rltune.``.

Nothing else changed: ``get_trainable_cls(...).get_default_config()`` is the
algorithm's config builder, the env is written on gym's old API (as RLlib's
older docs write them; rltune wraps it, with a warning), ``ray.init`` and
``check_learning_achieved`` are there.

    python examples/rllib2_script.py                 # PPO until the corridor is walked (reward > 0.5)
    python examples/rllib2_script.py --stop-iters 1  # one iteration
"""

import argparse
import os

import gymnasium as gym
import numpy as np
from gymnasium.spaces import Box, Discrete

import rltune
from rltune import tune
from rltune.env.env_context import EnvContext
from rltune.tune.logger import pretty_print
from rltune.tune.registry import get_trainable_cls
from rltune.utils.test_utils import check_learning_achieved

parser = argparse.ArgumentParser()
parser.add_argument("--run", type=str, default="PPO", help="The RLlib-registered algorithm to use.")
parser.add_argument("--stop-iters", type=int, default=50, help="Number of iterations to train.")
parser.add_argument("--stop-reward", type=float, default=0.5, help="Reward at which we stop training.")
parser.add_argument("--no-tune", action="store_true", help="Train with the algorithm itself instead of tune.run.")


class SimpleCorridor(gym.Env):
    """Walk right to the end of a corridor of ``corridor_length`` cells (reward 1 there, -0.1 a step)."""

    def __init__(self, config: EnvContext):
        self.end_pos = config["corridor_length"]
        self.cur_pos = 0
        self.action_space = Discrete(2)
        self.observation_space = Box(0.0, self.end_pos, shape=(1,), dtype=np.float32)

    def reset(self):
        self.cur_pos = 0
        return np.array([self.cur_pos], np.float32)

    def step(self, action):
        if action == 0 and self.cur_pos > 0:
            self.cur_pos -= 1
        elif action == 1:
            self.cur_pos += 1
        done = self.cur_pos >= self.end_pos
        return np.array([self.cur_pos], np.float32), 1.0 if done else -0.1, done, {}


if __name__ == "__main__":
    args = parser.parse_args()
    rltune.init()
    config = (
        get_trainable_cls(args.run).get_default_config()
        .environment(SimpleCorridor, env_config={"corridor_length": 5})
        .framework("torch")
        .rollouts(num_rollout_workers=1)
        .resources(num_gpus=int(os.environ.get("RLLIB_NUM_GPUS", "0")))
    )
    config["train_batch_size"] = 400  # the classic dict's way still works on the builder
    config["sgd_minibatch_size"] = 100
    config["model"]["fcnet_hiddens"] = [32, 32]
    stop = {"training_iteration": args.stop_iters, "episode_reward_mean": args.stop_reward}
    if args.no_tune:
        config.lr = 1e-3
        algo = config.build()
        for _ in range(args.stop_iters):
            result = algo.train()
            print(pretty_print(result))
            if result["episode_reward_mean"] >= args.stop_reward:
                break
        algo.stop()
    else:
        results = tune.run(args.run, config=config.to_dict(), stop=stop, verbose=1,
                           resources_per_trial=get_trainable_cls(args.run).default_resource_request(config))
        if args.stop_iters > 1:
            check_learning_achieved(results, args.stop_reward)
    rltune.shutdown()
