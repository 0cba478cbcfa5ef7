"""The runnable examples that go with the orchestrator: they run and do what they print."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_custom_env_example_learns_even_without_a_main_guard(tmp_path):
    """Rollout workers start with subprocess, so a script without ``if __name__ == "__main__"`` works too."""
    source = (REPO / "examples" / "custom_env.py").read_text()
    guard = 'if __name__ == "__main__":'
    assert guard in source
    script = tmp_path / "custom_env_no_guard.py"
    script.write_text(source.replace(guard, "if True:  # no guard"))
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "2 rollout worker processes" in proc.stdout
    assert proc.stdout.count("deterministic mean return: 0.60") == 2
    assert proc.stdout.rstrip().endswith("learned the corridor")
