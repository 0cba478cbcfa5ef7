"""Function trainables of the Ray Tune name tests: a timed span per trial, and a trial that calls setup_mlflow."""

from __future__ import annotations

import json
import time


def spans(config, reporter):
    """``steps`` iterations of ``score = x * step``, ``sleep`` seconds each; writes its start and end times."""
    start = time.time()
    for step in range(config.get("steps", 3)):
        time.sleep(config.get("sleep", 0.0))
        reporter(score=config.get("x", 1.0) * (step + 1))
    (reporter.trial_dir / "span.json").write_text(json.dumps([start, time.time()]))


def mlflow_user(config, reporter):
    """Ray's MLflow pattern: ``setup_mlflow(config, **config["setup"])``, then one result."""
    from rltune import tune

    module = tune.setup_mlflow(config, **config.get("setup", {}))
    reporter(score=1.0, has_log_metrics=hasattr(module, "log_metrics"))
