"""``rltune tune`` as a process: Ctrl-C and kill -9 of the orchestrator, then ``--resume``, with exact trial counts."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest

from rltune.orchestrator._listing import load_study

RLTUNE = Path(sys.executable).parent / "rltune"
HERE = Path(__file__).parent


def module_path(directory: Path) -> dict[str, str]:
    """The environment of an ``rltune`` process that imports the study's trainables from ``directory``.

    (rltune never puts the current directory on the import path.)
    """
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(directory), os.environ.get("PYTHONPATH")) if p)}

STUDY = """
name: resumable
run: study_trainables:counter
metric: score
n_jobs: 2
checkpoint_freq: 1
config:
  x: {grid_search: [1, 2, 3, 4]}
  steps: 12
  sleep: 0.1
"""


@pytest.fixture
def study_file(tmp_path) -> Path:
    shutil.copy(HERE / "trainables.py", tmp_path / "study_trainables.py")
    path = tmp_path / "resumable.yaml"
    path.write_text(STUDY)
    return path


def _start(study_file: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [str(RLTUNE), "tune", str(study_file), "--results-dir", str(study_file.parent / "results"), "--quiet", *extra],
        cwd=study_file.parent, env=module_path(study_file.parent), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def _wait_for_results(trial_dir: Path, n: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        path = trial_dir / "result.json"
        if path.exists() and len(path.read_text().splitlines()) >= n:
            return
        time.sleep(0.05)
    raise AssertionError(f"{trial_dir} has no {n} results after {timeout}s")


def assert_gone(pid_files: list[Path]) -> None:
    """The processes named by ``pid_<pid>`` files are gone (or zombies) within 10 s: none outlives the orchestrator."""
    pids = [int(p.name.split("_")[1]) for p in pid_files]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(Path(f"/proc/{pid}").exists() for pid in pids):
        time.sleep(0.1)
    for pid in pids:
        stat = Path(f"/proc/{pid}/stat")
        assert not stat.exists() or stat.read_text().split(")")[1].split()[0] == "Z", f"process {pid} still runs"


def _iterations(trial_dir: Path) -> list[int]:
    return [json.loads(line)["training_iteration"] for line in (trial_dir / "result.json").read_text().splitlines()]


def _check_resumed_study(study_file: Path) -> None:
    proc = _start(study_file, "--resume")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    study, _ = load_study(study_file.parent / "results" / "resumable")
    trials = study.get_trials()
    assert len(trials) == 4 and {t.state for t in trials} == {optuna.trial.TrialState.COMPLETE}
    assert sorted(t.params["x"] for t in trials) == [1, 2, 3, 4]  # every grid point exactly once
    assert sorted(t.value for t in trials) == [12, 24, 36, 48]
    for t in trials:
        trial_dir = Path(t.user_attrs["trial_dir"])
        assert _iterations(trial_dir) == list(range(1, 13)), trial_dir
        assert sorted(t.intermediate_values) == list(range(1, 13))
    return study


def test_ctrl_c_checkpoints_running_trials_and_resume_continues_them(study_file):
    proc = _start(study_file)
    trial0 = study_file.parent / "results" / "resumable" / "trial_00000"
    _wait_for_results(trial0, 3)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (out, err)
    assert "Traceback" not in err
    assert "--resume" in out
    study, _ = load_study(study_file.parent / "results" / "resumable")
    interrupted = [t for t in study.get_trials() if t.state == optuna.trial.TrialState.RUNNING]
    assert interrupted and all(t.user_attrs.get("interrupted") for t in interrupted)
    for t in interrupted:  # each stopped at a checkpoint of its last iteration
        trial_dir = Path(t.user_attrs["trial_dir"])
        assert (trial_dir / f"checkpoint_{_iterations(trial_dir)[-1]:06d}").is_dir()
    show = subprocess.run([str(RLTUNE), "show", "resumable", "--results-dir", str(study_file.parent / "results")],
                          capture_output=True, text=True, timeout=60)
    assert show.returncode == 0 and "INTERRUPTED" in show.stdout, show.stderr
    study = _check_resumed_study(study_file)
    restarted = [t for t in study.get_trials() if t.number in {i.number for i in interrupted}]
    for t in restarted:  # continued from its checkpoint, not from scratch
        starts = (Path(t.user_attrs["trial_dir"]) / "starts.txt").read_text().split()
        assert starts[0] == "0" and int(starts[1]) > 0


def test_kill_9_of_the_orchestrator_then_resume(study_file):
    proc = _start(study_file)
    trial0 = study_file.parent / "results" / "resumable" / "trial_00000"
    _wait_for_results(trial0, 4)
    proc.kill()
    proc.communicate(timeout=30)
    assert_gone(list((study_file.parent / "results" / "resumable").glob("trial_*/pid_*")))
    studies = subprocess.run([str(RLTUNE), "studies", "--results-dir", str(study_file.parent / "results")],
                             capture_output=True, text=True, timeout=60)
    assert studies.returncode == 0 and "resumable" in studies.stdout
    study = _check_resumed_study(study_file)
    starts = [(Path(t.user_attrs["trial_dir"]) / "starts.txt").read_text().split() for t in study.get_trials()]
    assert any(len(s) == 2 and int(s[1]) > 0 for s in starts)  # at least one continued from its checkpoint
    assert os.path.exists(study_file.parent / "results" / "resumable" / "best_config.yaml")


def test_owners_on_this_machine_by_pid_and_elsewhere_by_heartbeat():
    import socket

    from rltune.orchestrator._ownership import make_owner, owner_alive

    me = make_owner("run-a")
    assert owner_alive(me, "run-a") and not owner_alive(me, "run-b")  # an earlier run of this same process
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    assert not owner_alive({**me, "pid": int(dead.stdout)}, "run-a")
    assert not owner_alive({**me, "pid": os.getppid(), "pid_start": "1"}, "run-a")  # a reused pid
    assert not owner_alive(None, "run-a")
    elsewhere = {**me, "host": socket.gethostname() + "-other"}
    assert owner_alive(elsewhere, "run-a", heartbeat=time.time() - 10)
    assert not owner_alive(elsewhere, "run-a", heartbeat=time.time() - 3600)


def test_resume_with_a_changed_kind_of_search_space_entry_exits_2(study_file):
    proc = _start(study_file)
    _wait_for_results(study_file.parent / "results" / "resumable" / "trial_00000", 2)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=60)
    study_file.write_text(STUDY.replace("x: {grid_search: [1, 2, 3, 4]}", "x: {uniform: [1, 4]}"))
    resumed = _start(study_file, "--resume")
    out, err = resumed.communicate(timeout=60)
    assert resumed.returncode == 2, out + err
    assert "invalid resume of study 'resumable': config.x: the study's trials drew it from CategoricalDistribution" in err


def test_resume_completes_a_trial_that_met_its_stop_before_the_kill_without_training_it_again(tmp_path):
    shutil.copy(HERE / "trainables.py", tmp_path / "study_trainables.py")
    path = tmp_path / "stopped.yaml"
    path.write_text("name: stopped\nrun: study_trainables:counter_killing_its_orchestrator_at_stop\nmetric: score\n"
                    "checkpoint_freq: 1\ncheckpoint_at_end: true\nstop: {score: 3}\n"
                    "config: {x: 1, steps: 12, sleep: 0.05}\n")
    killed = _start(path)
    killed.communicate(timeout=60)
    assert killed.returncode == -9  # killed by its trial right after the stop result and its checkpoint
    trial_dir = tmp_path / "results" / "stopped" / "trial_00000"
    assert _iterations(trial_dir) == [1, 2, 3] and (trial_dir / "checkpoint_000003").is_dir()
    study, _ = load_study(tmp_path / "results" / "stopped")
    assert study.trials[0].state == optuna.trial.TrialState.RUNNING
    resumed = _start(path, "--resume")
    out, err = resumed.communicate(timeout=60)
    assert resumed.returncode == 0, out + err
    study, _ = load_study(tmp_path / "results" / "stopped")
    (trial,) = study.get_trials()
    assert trial.state == optuna.trial.TrialState.COMPLETE and trial.value == 3
    assert sorted(trial.intermediate_values) == [1, 2, 3]
    assert _iterations(trial_dir) == [1, 2, 3]  # not one iteration more
    assert (trial_dir / "starts.txt").read_text().split() == ["0"]  # never started again
    assert "trial 0 COMPLETE after 3 iterations score=3 (score = 3 >= 3, met before the study was interrupted)" in out


def test_resume_prepares_a_trial_taken_from_the_queue_just_before_a_kill(study_file):
    """Killed between Optuna's ask() and the trial's set-up: resume writes its params.json and trial_dir then."""
    proc = _start(study_file)
    _wait_for_results(study_file.parent / "results" / "resumable" / "trial_00000", 2)
    proc.kill()
    proc.communicate(timeout=30)
    study, _ = load_study(study_file.parent / "results" / "resumable")
    waiting = [t for t in study.get_trials() if t.state == optuna.trial.TrialState.WAITING]
    assert waiting, "the grid should still have queued points"
    taken = study.ask()  # the state a kill right after ask() leaves: RUNNING, no rltune attributes yet
    assert "trial_dir" not in study.get_trials()[taken.number].user_attrs
    study = _check_resumed_study(study_file)
    trial = study.get_trials()[taken.number]
    assert (Path(trial.user_attrs["trial_dir"]) / "params.json").exists()
