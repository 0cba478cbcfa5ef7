"""Ray Tune 2.x's Tuner on rltune: a function trainable with Checkpoints, a ResultGrid, Tuner.restore.

The 2.x style: ``fn(config)`` reports with ``train.report(metrics,
checkpoint=Checkpoint.from_directory(d))`` (the files of ``d`` are copied
into the trial's directory) and a resumed or retried trial gets its last
checkpoint back from ``train.get_checkpoint()``. ``Tuner.fit()`` runs the
study exactly as ``tune.run`` would (it calls it) and returns a
``ResultGrid``. Run it twice: the second run finds the study with
``Tuner.can_restore`` and restores it, which here has nothing left to do
(after a crash or Ctrl-C it continues the unfinished trials from their
checkpoints). It runs the study of ``examples/tune_function.py`` and
takes about as long.

    python examples/tune_tuner_function.py

A Ray script ports by renaming its imports: ``from ray import train, tune``
becomes ``from rltune import train, tune``.
"""

import json
import math
import os
import tempfile

from rltune import train, tune
from rltune.train import Checkpoint


def noisy_descent(config):
    """A stand-in for training: the loss falls at a rate set by lr and momentum; the best lr is near 0.03."""
    step, loss = 0, 10.0
    checkpoint = train.get_checkpoint()
    if checkpoint:  # resumed or retried: continue where the checkpoint was written
        with checkpoint.as_directory() as d:
            with open(os.path.join(d, "state.json")) as f:
                step, loss = json.load(f).values()
    rate = config["momentum"] * math.exp(-abs(math.log10(config["lr"]) - math.log10(0.03)))
    while step < 30:
        step += 1
        loss *= 1.0 - 0.2 * rate
        metrics = {"loss": loss, "accuracy": 1.0 - loss / 10.0}
        if step % 5:
            train.report(metrics)
            continue
        with tempfile.TemporaryDirectory() as d:  # a checkpoint every 5 steps
            with open(os.path.join(d, "state.json"), "w") as f:
                json.dump({"step": step, "loss": loss}, f)
            train.report(metrics, checkpoint=Checkpoint.from_directory(d))


storage_path = os.path.join(tempfile.gettempdir(), "rltune_examples")
path = os.path.join(storage_path, "tuner-function-example")
if tune.Tuner.can_restore(path):
    tuner = tune.Tuner.restore(path, trainable=noisy_descent)
else:
    tuner = tune.Tuner(
        noisy_descent,
        param_space={
            "lr": tune.loguniform(1e-4, 1.0),
            "momentum": tune.grid_search([0.5, 0.9]),  # every value is run, lr is drawn by TPE
        },
        tune_config=tune.TuneConfig(
            metric="loss",
            mode="min",
            num_samples=6,                              # 2 grid points x 6 samples = 12 trials
            search_alg={"type": "tpe", "n_startup_trials": 4, "seed": 0},
            scheduler={"type": "median", "n_startup_trials": 4, "n_warmup_steps": 3},
            max_concurrent_trials=2,
        ),
        run_config=train.RunConfig(
            name="tuner-function-example",
            storage_path=storage_path,
            stop={"accuracy": 0.99},
            checkpoint_config=train.CheckpointConfig(num_to_keep=2),
        ),
    )
results = tuner.fit()

print(results)
print("terminated:", results.num_terminated, "errors:", results.num_errors)
best = results.get_best_result()                    # by the TuneConfig's metric and mode
print("best config:", best.config)
print("best loss:", best.metrics["loss"], "at iteration", best.metrics["training_iteration"])
print("best checkpoint:", best.checkpoint)
print(results.get_dataframe(filter_metric="loss", filter_mode="min")[["loss", "config/lr", "config/momentum"]]
      .sort_values("loss").head(3).to_string())
