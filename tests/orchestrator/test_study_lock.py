"""One orchestrator per study on the journal storage: a second one is refused (exit 2, naming host and pid);
the lock dies with its holder (kill -9), and the next run starts at once, even past a stale Optuna journal lock."""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest

from rltune import tune
from rltune.errors import StudyLockedError
from rltune.orchestrator._listing import load_study
from rltune.orchestrator._study_lock import LOCK_FILE, StudyLock, clear_stale_journal_lock

from .test_resume import RLTUNE, _iterations, _wait_for_results, module_path
from .trainables import counter

HERE = Path(__file__).parent

STUDY = """
name: locked
run: study_trainables:counter
metric: score
max_concurrent: 3
checkpoint_freq: 1
config:
  x: {grid_search: [1, 2, 3]}
  steps: 8
  sleep: 0.15
"""


@pytest.fixture
def study_file(tmp_path) -> Path:
    shutil.copy(HERE / "trainables.py", tmp_path / "study_trainables.py")
    path = tmp_path / "locked.yaml"
    path.write_text(STUDY)
    return path


def _tune(study_file: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [str(RLTUNE), "tune", str(study_file), "--results-dir", str(study_file.parent / "results"), "--quiet", *extra],
        cwd=study_file.parent, env=module_path(study_file.parent), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def _each_grid_point_once(study_file: Path) -> None:
    study, _ = load_study(study_file.parent / "results" / "locked")
    trials = study.get_trials()
    assert sorted(t.params["x"] for t in trials) == [1, 2, 3], [(t.number, t.state, t.params) for t in trials]
    assert {t.state for t in trials} == {optuna.trial.TrialState.COMPLETE}
    assert sorted(t.value for t in trials) == [8, 16, 24]
    for t in trials:
        assert _iterations(Path(t.user_attrs["trial_dir"])) == list(range(1, 9))


def test_a_second_orchestrator_of_a_running_study_is_refused_naming_the_first(study_file, tmp_path):
    release = tmp_path / "release"  # the first study's trials wait for it after their first result
    study_file.write_text(study_file.read_text() + f"  wait_for: {str(release)!r}\n")
    first = _tune(study_file)
    _wait_for_results(tmp_path / "results" / "locked" / "trial_00000", 1)
    second = _tune(study_file, "--resume")
    out, err = second.communicate(timeout=60)
    assert second.returncode == 2, out + err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"host {socket.gethostname()}, pid {first.pid}" in err and "already run by another orchestrator" in err
    with pytest.raises(StudyLockedError) as raised:  # tune.run in Python: the same refusal, typed
        tune.run(counter, config={"x": tune.grid_search([1, 2, 3])}, metric="score", name="locked",
                 results_dir=str(tmp_path / "results"), resume=True, verbose=0)
    assert raised.value.holder["pid"] == first.pid and raised.value.holder["host"] == socket.gethostname()
    release.touch()
    out, err = first.communicate(timeout=120)
    assert first.returncode == 0, out + err
    _each_grid_point_once(study_file)  # the refused run added nothing


def test_kill_9_of_the_orchestrator_then_resume_starts_at_once(study_file, tmp_path):
    proc = _tune(study_file)
    _wait_for_results(tmp_path / "results" / "locked" / "trial_00000", 2)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    # a kill while appending to the journal leaves Optuna's lock file behind (Optuna breaks it after 30 s):
    # made here on purpose, as the exact state such a kill leaves
    (tmp_path / "results" / "locked" / "study.journal.lock").touch()
    start = time.monotonic()
    resumed = _tune(study_file, "--resume")
    out, err = resumed.communicate(timeout=120)
    elapsed = time.monotonic() - start
    assert resumed.returncode == 0, out + err
    assert "removed Optuna's journal lock" in out
    assert elapsed < 20, f"the resume took {elapsed:.1f}s"  # the whole study's remaining work is ~2 s of trials
    _each_grid_point_once(study_file)


def test_the_lock_is_exclusive_released_and_dies_with_its_process(tmp_path):
    lock = StudyLock.acquire(tmp_path, "s")
    with pytest.raises(StudyLockedError, match=r"pid \d+"):
        StudyLock.acquire(tmp_path, "s")  # another open file: refused even in the same process
    lock.release()
    lock.release()
    StudyLock.acquire(tmp_path, "s").release()
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from pathlib import Path;"
         "from rltune.orchestrator._study_lock import StudyLock; StudyLock.acquire(Path(sys.argv[1]), 's');"
         "print('locked', flush=True); time.sleep(60)", str(tmp_path)],
        stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "locked"
    with pytest.raises(StudyLockedError) as raised:
        StudyLock.acquire(tmp_path, "s")
    assert raised.value.holder["pid"] == holder.pid
    holder.kill()
    holder.wait(timeout=10)
    StudyLock.acquire(tmp_path, "s").release()  # the kernel released it: no stale lock
    assert (tmp_path / LOCK_FILE).read_text() == ""


def test_a_stale_lock_of_a_shared_journal_is_left_to_optuna_but_said(tmp_path):
    journal = tmp_path / "elsewhere" / "studies.journal"
    journal.parent.mkdir()
    (tmp_path / "elsewhere" / "studies.journal.lock").touch()
    said = []
    clear_stale_journal_lock(journal, own_journal=False, say=said.append)
    assert (tmp_path / "elsewhere" / "studies.journal.lock").exists()
    assert len(said) == 1 and "30 s" in said[0]
    clear_stale_journal_lock(journal, own_journal=True, say=said.append)
    assert not (tmp_path / "elsewhere" / "studies.journal.lock").exists() and "removed" in said[1]


def test_default_names_move_past_a_study_that_another_orchestrator_holds(tmp_path):
    analysis = tune.run(counter, config={"steps": 1}, metric="score", results_dir=str(tmp_path), verbose=0)
    base = analysis.study.study_name
    lock = StudyLock.acquire(tmp_path / base, base)
    try:
        from rltune.orchestrator._runner import StudyRunner
        from rltune.orchestrator._spec import make_plan

        plan = make_plan({"run": counter, "config": {"steps": 1}, "metric": "score", "results_dir": str(tmp_path)})
        plan.spec = plan.spec.model_copy(update={"name": base})
        runner = StudyRunner(plan)
        runner.plan.name_given = False
        (tmp_path / f"{base}_1").mkdir()
        held = StudyLock.acquire(tmp_path / f"{base}_1", f"{base}_1")  # locked, no study.json yet: skipped too
        try:
            runner.open_study()
            assert runner.plan.name == f"{base}_2"
        finally:
            runner.close()
            held.release()
    finally:
        lock.release()
