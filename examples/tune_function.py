"""Tune a function trainable: TPE search, median pruning, checkpoints, resume.

A function trainable is ``fn(config, reporter)``: it calls ``reporter(**result)``
once per iteration. The orchestrator reports ``result[metric]`` to Optuna at
step ``training_iteration``, and ``reporter(...)`` raises ``tune.TrialStopped``
when the trial must end (a stop criterion met, pruned, Ctrl-C). Checkpoints:
write them in ``with reporter.checkpoint_dir() as d:`` (committed atomically as
``checkpoint_<iteration>``) when ``reporter.should_checkpoint``; a resumed or
retried trial finds its latest one in ``reporter.restored_checkpoint``.

Each trial runs in its own process (started with subprocess: this script
needs no ``if __name__ == "__main__"`` guard). Run it twice: the second run
resumes the study (``resume="auto"``: continue it if it exists, else start it)
and has nothing left to do. About 3 s.

    python examples/tune_function.py
"""

import json
import math
import os
import tempfile

from rltune import tune


def noisy_descent(config, reporter):
    """A stand-in for training: the loss falls at a rate set by lr and momentum; the best lr is near 0.03."""
    step, loss = 0, 10.0
    if reporter.restored_checkpoint:  # resumed or retried: continue where the checkpoint was written
        with open(os.path.join(reporter.restored_checkpoint, "state.json")) as f:
            step, loss = json.load(f).values()
    rate = config["momentum"] * math.exp(-abs(math.log10(config["lr"]) - math.log10(0.03)))
    while step < 30:
        step += 1
        loss *= 1.0 - 0.2 * rate
        reporter(loss=loss, accuracy=1.0 - loss / 10.0)
        if reporter.should_checkpoint:
            with reporter.checkpoint_dir() as d:
                with open(os.path.join(d, "state.json"), "w") as f:
                    json.dump({"step": step, "loss": loss}, f)


results_dir = os.path.join(tempfile.gettempdir(), "rltune_examples")
analysis = tune.run(
    noisy_descent,
    name="tune-function-example",
    config={
        "lr": tune.loguniform(1e-4, 1.0),
        "momentum": tune.grid_search([0.5, 0.9]),   # every value is run, lr is drawn by TPE
    },
    num_samples=6,                                   # 2 grid points x 6 samples = 12 trials
    metric="loss",
    mode="min",
    search_alg={"type": "tpe", "n_startup_trials": 4},
    scheduler={"type": "median", "n_startup_trials": 4, "n_warmup_steps": 3},
    stop={"accuracy": 0.99},
    checkpoint_freq=5,
    n_jobs=2,
    seed=0,
    results_dir=results_dir,
    resume="auto",                                   # a second run continues (here: nothing left to do)
)

print(analysis)
print("states:", analysis.counts())
print("best config:", analysis.best_config)
print("best loss:", analysis.best_result["loss"], "at iteration", analysis.best_result["training_iteration"])
print("best checkpoint:", analysis.best_checkpoint)
