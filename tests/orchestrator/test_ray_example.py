"""examples/tune_ray_names.py runs: its point first, ASHA prunes, the best config is near the known optimum."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_ray_names_example_runs_its_point_first_and_prunes(tmp_path):
    proc = subprocess.run([sys.executable, str(REPO / "examples" / "tune_ray_names.py")], cwd=tmp_path,
                          capture_output=True, text=True, timeout=180, env={**__import__("os").environ,
                                                                           "TMPDIR": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    assert "first trial (the point to evaluate): {'lr': 0.03, 'momentum': 0.9, 'steps': 20, 'seed': 0}" in proc.stdout
    assert "'PRUNED'" in proc.stdout
