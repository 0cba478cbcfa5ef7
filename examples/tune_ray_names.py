"""Ray Tune's names for what Optuna does: a Ray Tune script, imports renamed, run as a study.

``OptunaSearch`` becomes the study's sampler (its ``points_to_evaluate`` run
first), ``ASHAScheduler`` its pruner (``max_t`` a stop criterion),
``ConcurrencyLimiter`` the trials at once; ``tune.sample_from`` computes a
value from the drawn config. Every argument rltune cannot honour is refused
by name (see docs/porting-from-rllib.md, "Ray Tune 2.x: schedulers and
searchers"). About 10 s.

    python examples/tune_ray_names.py
"""

import math
import os
import tempfile

import optuna

from rltune import tune


def descent(config, reporter):
    """A stand-in for training: the loss falls at a rate set by lr and momentum; the best lr is near 0.03."""
    loss = 10.0
    rate = config["momentum"] * math.exp(-abs(math.log10(config["lr"]) - math.log10(0.03)))
    for _ in range(config["steps"]):
        loss *= 1.0 - 0.2 * rate
        reporter(loss=loss)


searcher = tune.OptunaSearch(
    metric="loss",
    mode="min",
    sampler=optuna.samplers.TPESampler(n_startup_trials=3, seed=0),
    points_to_evaluate=[{"lr": 0.03, "momentum": 0.9}],   # a known good config, run first
)
analysis = tune.run(
    descent,
    name="tune-ray-names-example",
    config={
        "lr": tune.qloguniform(1e-4, 1.0, 1e-4),
        "momentum": tune.choice([0.5, 0.9]),
        "steps": tune.sample_from(lambda spec: 40 if spec.config.momentum < 0.7 else 20),
    },
    num_samples=8,
    search_alg=tune.ConcurrencyLimiter(searcher, max_concurrent=2),
    scheduler=tune.ASHAScheduler(max_t=30, grace_period=2, reduction_factor=2),
    results_dir=os.path.join(tempfile.mkdtemp(), "rltune_examples"),
    verbose=0,
)

print("states:", analysis.counts())
print("first trial (the point to evaluate):", analysis.trials[0].config)
print("best config:", analysis.best_config)
print("best loss:", analysis.best_result["loss"])
