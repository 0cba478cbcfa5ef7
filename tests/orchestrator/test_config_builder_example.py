"""examples/config_builder.py (an RLlib script ported with the config builder) runs, with its tiny budget."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_config_builder_example_trains_saves_and_runs_its_grid(tmp_path):
    env = {**os.environ, "RLTUNE_RESULTS_DIR": str(tmp_path), "RLTUNE_TRACKING": "0"}
    proc = subprocess.run([sys.executable, str(REPO / "examples" / "config_builder.py"), "--quick"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert re.search(r"^iter 1: episode_reward_mean [\d.]+$", out, re.M)
    assert "timesteps_total: 400\n" in out  # pretty_print of the result
    checkpoint = Path(re.search(r"^checkpoint: (.+)$", out, re.M).group(1))
    assert checkpoint.is_relative_to(tmp_path) and (checkpoint / "rltune_checkpoint.json").exists()
    trials = re.findall(r"^trial \d: lr=([\d.e-]+) COMPLETE episode_reward_mean=[\d.]+$", out, re.M)
    assert sorted(trials) == ["0.0003", "0.001"]
