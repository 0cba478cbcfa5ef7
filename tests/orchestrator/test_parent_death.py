"""No process of a study outlives its SIGKILLed orchestrator, not even a trial stuck in native code."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from processes import kill_left, process_alive, survivors_of_sigkill

RLTUNE = Path(sys.executable).parent / "rltune"
HERE = Path(__file__).parent

STUDY = """
name: stuck
run: study_trainables:stuck_in_native_code
metric: score
n_jobs: 2
config:
  x: {grid_search: [1, 2]}
"""


def _wait(condition, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.1)
    return condition()


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


@pytest.mark.timeout(180)
@pytest.mark.parametrize("warm", ["0", "wait"])  # trials started cold, or forked from the warm template (rltune._warm)
def test_kill_9_of_the_orchestrator_ends_trials_stuck_holding_the_gil(tmp_path, warm):
    shutil.copy(HERE / "trainables.py", tmp_path / "study_trainables.py")
    (tmp_path / "stuck.yaml").write_text(STUDY)
    results = tmp_path / "results"
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "RLTUNE_WARM_START": warm}  # its trainables are there
    proc = subprocess.Popen([str(RLTUNE), "tune", "stuck.yaml", "--results-dir", str(results), "--quiet"],
                            cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pids: list[int] = []
    try:
        def both_started() -> bool:
            pids[:] = [int(p.name.split("_")[1]) for p in results.glob("stuck/trial_*/pid_*")]
            return len(pids) == 2

        assert _wait(both_started, 120), "the trials never reached their native code"
        assert all(process_alive(p) for p in pids)
        parents = {_parent(p) for p in pids}
        assert (parents == {proc.pid}) == (warm == "0"), parents
        pids.extend(parents - {proc.pid})  # the template dies too
        assert survivors_of_sigkill(proc, pids) == [], "trial processes outlived their SIGKILLed orchestrator"
    finally:
        proc.kill()
        kill_left(pids)
