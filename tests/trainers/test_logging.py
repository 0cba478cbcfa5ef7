"""log_level applies in the trainer's process and inside rollout worker processes, so env code that logs is seen (or silenced)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rltune.trainers import PPO

from trainers.envs import LoggingEnv

TESTS_DIR = Path(__file__).resolve().parents[1]
SMALL = {
    "num_workers": 1,
    "rollout_fragment_length": 20,
    "train_batch_size": 20,
    "sgd_minibatch_size": 20,
    "num_sgd_iter": 1,
    "model": {"fcnet_hiddens": [8]},
}


@pytest.mark.parametrize(
    ("level", "info_seen", "warning_seen"),
    [("INFO", True, True), ("WARN", False, True), ("ERROR", False, False)],
)
def test_log_level_reaches_env_code_in_worker_processes(capfd, level, info_seen, warning_seen):
    trainer = PPO(config={**SMALL, "log_level": level}, env=LoggingEnv)
    try:
        trainer.train()
    finally:
        trainer.stop()
    err = capfd.readouterr().err
    assert ("info from env in worker 1" in err) is info_seen
    assert ("warning from env in worker 1" in err) is warning_seen


SCRIPT = """
import sys
from rltune.trainers import PPO
from trainers.envs import LoggingEnv
config = dict(SMALL, num_workers=0, log_level=sys.argv[1])
with PPO(config=config, env=LoggingEnv) as trainer:
    trainer.train()
"""


@pytest.mark.parametrize(
    ("level", "info_seen", "warning_seen"),
    [("INFO", True, True), ("WARN", False, True), ("ERROR", False, False)],
)
def test_log_level_reaches_env_code_in_the_trainers_process(tmp_path, level, info_seen, warning_seen):
    # A script of the user's that configures no logging, sampling in its own process (num_workers: 0).
    script = tmp_path / "train.py"
    script.write_text(f"SMALL = {SMALL!r}\n" + SCRIPT)
    env = dict(os.environ, PYTHONPATH=str(TESTS_DIR), RLTUNE_RESULTS_DIR=str(tmp_path / "results"))
    proc = subprocess.run([sys.executable, str(script), level], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert ("info from env in worker 0" in proc.stderr) is info_seen
    assert ("warning from env in worker 0" in proc.stderr) is warning_seen


def test_the_users_logging_set_up_after_the_trainer_still_takes_effect(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(
        f"SMALL = {SMALL!r}\n" + SCRIPT
        + "import logging\nlogging.basicConfig(level=logging.WARNING, format='USER %(message)s')\n"
        "logging.getLogger('mine').warning('configured later')\n"
    )
    env = dict(os.environ, PYTHONPATH=str(TESTS_DIR), RLTUNE_RESULTS_DIR=str(tmp_path / "results"))
    proc = subprocess.run([sys.executable, str(script), "INFO"], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "info from env in worker 0" in proc.stderr  # log_level INFO while the user had no logging
    assert "USER configured later" in proc.stderr  # the user's basicConfig, called afterwards, took effect


def test_the_users_own_logging_set_up_is_left_alone(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(
        f"SMALL = {SMALL!r}\nimport logging\n"
        "logging.basicConfig(level=logging.WARNING, format='USER %(name)s %(message)s')\n" + SCRIPT
    )
    env = dict(os.environ, PYTHONPATH=str(TESTS_DIR), RLTUNE_RESULTS_DIR=str(tmp_path / "results"))
    proc = subprocess.run([sys.executable, str(script), "INFO"], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "USER tests.logging_env warning from env in worker 0" in proc.stderr  # the user's format
    assert "info from env" not in proc.stderr  # the user's level
