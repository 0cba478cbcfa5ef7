"""seeds_per_trial under kill -9 of the orchestrator: the group checkpoint brings every seed back where it was."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import optuna
import pytest

from rltune.orchestrator._listing import load_study

from .test_resume import HERE, _iterations, _start, assert_gone

STUDY = """
name: seeded
run: study_trainables:counter
metric: score
checkpoint_freq: 1
seeds_per_trial: 2
seed_mode: {mode}
config:
  x: {{grid_search: [1, 2]}}
  steps: 6
  sleep: 0.1
"""


def _study(tmp_path: Path, mode: str) -> Path:
    shutil.copy(HERE / "trainables.py", tmp_path / "study_trainables.py")
    path = tmp_path / "seeded.yaml"
    path.write_text(STUDY.format(mode=mode))
    return path


def _wait_for(path: Path, lines: int, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and len(path.read_text().splitlines()) >= lines:
            return
        time.sleep(0.05)
    raise AssertionError(f"{path} has no {lines} lines after {timeout}s")


@pytest.mark.parametrize("mode,killed_at", [("parallel", 3), ("race", 8)])
def test_kill_9_then_resume_continues_every_seed_from_the_group_checkpoint(tmp_path, mode, killed_at):
    study_file = _study(tmp_path, mode)
    results = tmp_path / "results" / "seeded"
    proc = _start(study_file)
    _wait_for(results / "trial_00000" / "result.json", killed_at)
    proc.kill()
    proc.communicate(timeout=30)
    assert_gone(list(results.glob("trial_*/seed_*/pid_*")))  # seed processes do not outlive the orchestrator
    resumed = _start(study_file, "--resume")
    out, err = resumed.communicate(timeout=180)
    assert resumed.returncode == 0, err
    study, _ = load_study(results)
    trials = study.get_trials()
    assert {t.state for t in trials} == {optuna.trial.TrialState.COMPLETE}
    assert sorted(t.value for t in trials) == [6, 12]
    first = Path(trials[0].user_attrs["trial_dir"])
    starts = [(first / f"seed_{i}" / "starts.txt").read_text().split() for i in range(2)]
    if mode == "parallel":  # both seeds continued from their checkpoints, not from scratch
        assert all(s[0] == "0" and len(s) == 2 and int(s[1]) > 0 for s in starts), starts
        assert _iterations(first) == list(range(1, 7))
    else:  # the first seed had ended: not run again; the second continued
        assert starts[0] == ["0"] and len(starts[1]) == 2 and int(starts[1][1]) > 0, starts
        assert _iterations(first)[-6:] == list(range(1, 7))
    for i in range(2):
        assert _iterations(first / f"seed_{i}") == list(range(1, 7))
    last = json.loads((first / "result.json").read_text().splitlines()[-1])
    assert last["seeds"] == [6.0, 6.0] and sorted(trials[0].intermediate_values) == list(range(1, 7))
