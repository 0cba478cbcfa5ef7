"""The issue's example: PPO on CartPole-v1 with a grid over the learning rate.

The same study as ``studies/cartpole-ppo-grid.yaml`` (``rltune tune`` runs the
file). Each trial gets its own process, a seed (trial n: seed n) and a
directory under ``~/rltune_results/<study>/``; at the end ``best_config.yaml``
there re-runs the best trial with ``rltune train -f``.

    python examples/tune_cartpole_ppo.py            # until episode_reward_mean 200: about 80 s here
    python examples/tune_cartpole_ppo.py --quick    # 2 iterations per trial: about 20 s
"""

import sys

from rltune import tune

quick = "--quick" in sys.argv
analysis = tune.run(
    "PPO",
    stop={"training_iteration": 2} if quick else {"episode_reward_mean": 200},
    config={
        "env": "CartPole-v1",
        "num_gpus": 0,
        "num_workers": 1,
        "lr": tune.grid_search([0.01, 0.001, 0.0001]),
        **({"train_batch_size": 400} if quick else {}),
    },
)

for trial in analysis.trials:
    print(f"trial {trial.number}: lr={trial.config['lr']:g} {trial.state} "
          f"episode_reward_mean={trial.last_result['episode_reward_mean']:.1f} "
          f"after {trial.last_result['timesteps_total']:,} steps")
print("best config:", {k: analysis.best_config[k] for k in ("lr", "seed")})
print("best checkpoint:", analysis.best_checkpoint)
