"""A study of a custom env (an import string of the user's own module) resumes from its trials' checkpoints.

The trials' config comes from the study file, the user's: restoring their
checkpoints needs no trust, even though rltune never imports from the
current directory and opening a checkpoint imports nothing it names. The
module is found on PYTHONPATH, as a user's package is.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

RLTUNE = Path(sys.executable).parent / "rltune"
ENV_MODULE = """\
from gymnasium.envs.classic_control import CartPoleEnv


class Pole(CartPoleEnv):
    def __init__(self, env_config=None):
        super().__init__()
"""
STUDY = """\
name: custom
run: PPO
metric: episode_reward_mean
mode: max
checkpoint_freq: 1
stop: {training_iteration: 400}
config:
  env: rltune_study_env:Pole
  train_batch_size: 64
  rollout_fragment_length: 32
  sgd_minibatch_size: 32
  num_sgd_iter: 1
  model: {fcnet_hiddens: [8]}
"""


def _iterations(trial_dir: Path) -> list[int]:
    return [json.loads(line)["training_iteration"] for line in (trial_dir / "result.json").read_text().splitlines()]


def test_a_study_of_a_custom_env_resumes_from_its_checkpoints(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "rltune_study_env.py").write_text(ENV_MODULE)
    (tmp_path / "custom.yaml").write_text(STUDY)
    env = {**os.environ, "PYTHONPATH": str(site), "RLTUNE_TRACKING": "0"}
    argv = [str(RLTUNE), "tune", "custom.yaml", "--results-dir", "results", "--quiet"]
    proc = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    trial_dir = tmp_path / "results" / "custom" / "trial_00000"
    try:
        deadline = time.monotonic() + 120
        while not ((trial_dir / "result.json").exists() and len(_iterations(trial_dir)) >= 3):
            assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, (out, err)
    done = len(_iterations(trial_dir))
    assert done < 400
    resumed = subprocess.run([*argv, "--resume", "--stop", json.dumps({"training_iteration": done + 2})], cwd=tmp_path,
                             env=env, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert "COMPLETE" in resumed.stdout, resumed.stdout
    assert _iterations(trial_dir) == list(range(1, done + 3))  # continued from its checkpoint

