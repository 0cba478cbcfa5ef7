"""Ray Tune 2.x function trainables for the Tuner's tests: ``fn(config)`` with ``train.report(..., checkpoint=...)``.

Each records where it started (``starts.txt`` in its trial directory) so that
resume tests can tell a trial continued from its checkpoint from one that
started over.
"""

from __future__ import annotations

import json
import os
import tempfile
import time

from rltune import train
from rltune.train import Checkpoint


def stepper(config):
    """``steps`` iterations of ``score = x * step``; a directory Checkpoint of ``{"step": n}`` at each one."""
    context = train.get_context()
    start = 0
    checkpoint = train.get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as d:
            with open(os.path.join(d, "state.json")) as f:
                start = json.load(f)["step"]
    with open(os.path.join(context.get_trial_dir(), "starts.txt"), "a") as f:
        f.write(f"{start}\n")
    for step in range(start, config.get("steps", 5)):
        time.sleep(config.get("sleep", 0.0))
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "state.json"), "w") as f:
                json.dump({"step": step + 1}, f)
            train.report({"score": config["x"] * (step + 1), "step": step + 1,
                          "trial_name": context.get_trial_name()}, checkpoint=Checkpoint.from_directory(d))


def dict_stepper(config):
    """``stepper`` with dict checkpoints (Ray 2.0-2.6's ``session.report`` and ``Checkpoint.from_dict``)."""
    from rltune.air import session

    checkpoint = session.get_checkpoint()
    start = checkpoint.to_dict()["step"] if checkpoint else 0
    for step in range(start, config.get("steps", 5)):
        session.report({"score": config["x"] * (step + 1)}, checkpoint=Checkpoint.from_dict({"step": step + 1}))


def failing(config):
    """Reports once, then raises if ``x`` is 2."""
    train.report({"score": config["x"]})
    if config["x"] == 2:
        raise ValueError("x is 2")


def crashing_once(config):
    """``stepper`` that raises after its checkpoint of step ``crash_at``, once (a marker file remembers it:
    ``marker``, default one in the trial's directory)."""
    marker = config.get("marker") or os.path.join(train.get_context().get_trial_dir(), "crashed")
    checkpoint = train.get_checkpoint()
    start = 0
    if checkpoint is not None:
        with open(os.path.join(checkpoint.path, "state.json")) as f:
            start = json.load(f)["step"]
    with open(os.path.join(train.get_context().get_trial_dir(), "starts.txt"), "a") as f:
        f.write(f"{start}\n")
    for step in range(start, config["steps"]):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "state.json"), "w") as f:
                json.dump({"step": step + 1}, f)
            train.report({"score": step + 1}, checkpoint=Checkpoint.from_directory(d))
        if step + 1 == config["crash_at"] and not os.path.exists(marker):
            open(marker, "w").close()
            raise RuntimeError("crash once")
