"""An RLlib script, ported: the config builder, build(), train(), save, and tune.run on the same config.

RLlib's ``from ray.rllib.algorithms.ppo import PPOConfig`` becomes
``from rltune.trainers import PPOConfig``; the chain below is RLlib's own
(classic names such as ``.rollouts(num_rollout_workers=...)`` and
``num_sgd_iter`` work too). A bad keyword or value fails at the call that
gives it, naming the method and the keyword.

    python examples/config_builder.py            # PPO to episode_reward_mean 450, then a 2-point lr grid
    python examples/config_builder.py --quick    # one iteration of each
"""

import sys

from rltune import tune
from rltune.trainers import PPOConfig, pretty_print

quick = "--quick" in sys.argv

config = (
    PPOConfig()
    .environment("CartPole-v1")
    .env_runners(num_env_runners=0 if quick else 1, num_envs_per_env_runner=4, rollout_fragment_length=100 if quick else 250)
    .training(
        lr=3e-4,
        gamma=0.99,
        train_batch_size=400 if quick else 2000,
        minibatch_size=200,
        num_epochs=1 if quick else 10,
        model={"fcnet_hiddens": [64, 64]},
    )
    .debugging(seed=0)
)

# One trainer, trained by hand (RLlib: algo = config.build(); algo.train()).
algo = config.build()
for _ in range(1 if quick else 60):
    result = algo.train()
    print(f"iter {result['training_iteration']}: episode_reward_mean {result['episode_reward_mean']:.1f}")
    if result["episode_reward_mean"] >= 450:
        break
print(pretty_print({k: result[k] for k in ("episode_reward_mean", "timesteps_total", "time_total_s")}), end="")
print("checkpoint:", algo.save())
algo.stop()

# The same config as a study: search-space entries go into the builder's calls, to_dict() keeps them.
study = config.copy().training(lr=tune.grid_search([1e-3, 3e-4]))
analysis = tune.run(
    "PPO",
    config=study.to_dict(),
    stop={"training_iteration": 1} if quick else {"episode_reward_mean": 450},
    n_jobs=2,
    name="config-builder-example",
)
for trial in analysis.trials:
    print(f"trial {trial.number}: lr={trial.config['lr']:g} {trial.state} "
          f"episode_reward_mean={trial.last_result['episode_reward_mean']:.1f}")
