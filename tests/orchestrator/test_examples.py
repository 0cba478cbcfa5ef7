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


def test_tune_function_example_runs_and_resumes(tmp_path):
    """A script with no ``__main__`` guard: trials are subprocesses; the second run resumes with nothing to do."""
    script = REPO / "examples" / "tune_function.py"
    env = {**__import__("os").environ, "TMPDIR": str(tmp_path)}
    runs = [subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)
            for _ in range(2)]
    for proc in runs:
        assert proc.returncode == 0, proc.stderr
        assert "states: {'COMPLETE': " in proc.stdout and "'PRUNED'" in proc.stdout
    assert runs[0].stdout.splitlines()[-4:] == runs[1].stdout.splitlines()[-4:]  # the same study, nothing re-run
    assert "started" not in runs[1].stdout
