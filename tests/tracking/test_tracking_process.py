"""The study's tracking runs in a process of its own: the loop never imports mlflow, and survives its death."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections import deque
from pathlib import Path

import pytest

from rltune import tune
from rltune._ipc import EndTrial, LogCheckpoint, LogResult
from rltune.tracking import TrialTracker
from rltune.tracking._server import _Server

from .conftest import mlflow_env, new_store

pytestmark = pytest.mark.tracked


def test_the_study_completes_when_the_tracking_process_is_killed(tmp_path, template_db, caplog):
    new_store(template_db, tmp_path)
    with caplog.at_level(logging.WARNING, logger="rltune"):
        analysis = tune.run("orchestrator.trainables:kill_tracking_then_train", name="lost", config={"x": tune.grid_search([0, 1, 2])},
                            metric="score", mode="max", results_dir=str(tmp_path), n_jobs=1, verbose=0,
                            tracking=True)
    assert sorted(t.state for t in analysis.trials) == ["COMPLETE"] * 3
    assert [t.last_result["training_iteration"] for t in analysis.trials] == [5, 5, 5]
    messages = " ".join(r.getMessage() for r in caplog.records)
    assert "the tracking process ended" in messages
    assert "not recorded" in messages  # the closing summary names what was lost


def test_the_orchestrator_never_imports_mlflow(tmp_path, template_db):
    new_store(template_db, tmp_path)
    script = textwrap.dedent(f"""
        import sys
        from rltune import tune

        def trainable(config, reporter):
            for i in range(3):
                reporter(score=float(i))

        tune.run(trainable, name="light", metric="score", mode="max", results_dir={str(tmp_path)!r},
                 verbose=0, tracking=True)
        print("mlflow imported:", "mlflow" in sys.modules)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                         env=dict(mlflow_env(), RLTUNE_TRACKING="1"), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "mlflow imported: False" in out.stdout
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    experiment = client.get_experiment_by_name("light")
    runs = client.search_runs([experiment.experiment_id], filter_string="tags.`rltune.role` = 'trial'")
    assert len(runs) == 1
    history = client.get_metric_history(runs[0].info.run_id, "score")
    assert sorted((m.step, m.value) for m in history) == [(1, 0.0), (2, 1.0), (3, 2.0)]


def test_queued_results_of_a_trial_are_taken_together_and_in_order():
    server = _Server(conn=None, tracker=None)
    server.pending = deque(enumerate([
        LogResult(1, {"training_iteration": 2}, 0),
        LogResult(2, {"training_iteration": 1}, 0),
        LogResult(1, {"training_iteration": 3}, 0),
        LogCheckpoint(1, "/copy", "checkpoint_000003"),
        LogResult(1, {"training_iteration": 4}, 0),  # after trial 1's checkpoint: not taken yet
        EndTrial(2, "COMPLETE", None, None),
    ], start=1))
    taken = server._take_results(1)
    assert [r["training_iteration"] for r, _ in taken] == [2, 3]
    assert [m.kind for _, m in server.pending] == ["result", "checkpoint", "result", "end"]
    assert [m.number for _, m in server.pending] == [2, 1, 1, 2]
    assert [n for n, _ in server.pending] == [2, 4, 5, 6]  # in order: the first still pending is what is told


def test_several_results_are_logged_in_one_call_with_their_steps(tmp_path, template_db):
    new_store(template_db, tmp_path)
    from mlflow import MlflowClient

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = MlflowClient(uri)
    run_id = client.create_run(client.create_experiment("batched")).info.run_id
    tracker = TrialTracker(run_id, uri)
    calls = []
    real_log_batch = tracker.client.log_batch
    tracker.client.log_batch = lambda *a, **k: (calls.append(k.get("metrics")), real_log_batch(*a, **k))[1]
    tracker.log_results([{"training_iteration": i, "episode_reward_mean": 10.0 * i, "info": {"x": i},
                          "curriculum_task": f"task{i // 3}"} for i in range(1, 6)])
    assert len(calls) == 1
    history = client.get_metric_history(run_id, "episode_reward_mean")
    assert sorted((m.step, m.value) for m in history) == [(i, 10.0 * i) for i in range(1, 6)]
    assert sorted(m.step for m in client.get_metric_history(run_id, "info/x")) == [1, 2, 3, 4, 5]
    assert client.get_run(run_id).data.tags["rltune.curriculum_task"] == '"task1"'
    assert [p["iteration"] for p in tracker.history] == [1, 2, 3, 4, 5]
    assert tracker.unrecorded == []


def test_a_tracking_process_closed_twice_logs_its_summary_once(tmp_path, template_db, caplog):
    """The end of a study may close the tracking twice (the loop's fallback after a failed final step)."""
    from rltune.tracking import TrackingProcess

    tracker = TrackingProcess(None, new_store(template_db, tmp_path), "twice", "tpe", "none")
    tracker._failures.record("metrics", "something lost")
    with caplog.at_level(logging.WARNING, logger="rltune"):
        tracker.close()
        tracker.close()
    summaries = [r.getMessage() for r in caplog.records if "call(s) not recorded" in r.getMessage()]
    assert summaries == ["MLflow tracking (study 'twice'): 1 call(s) not recorded (metrics x1)"]
    assert tracker.proc.poll() == 0



HOLDER = textwrap.dedent('''
    # a stand-in for the tracking process (rltune.tracking._server) of a killed orchestrator, draining its queue
    import fcntl, os, sys, time
    from rltune.tracking._priority import lower_priority
    lock = open(sys.argv[1], "a")
    fcntl.flock(lock, fcntl.LOCK_EX)
    lock.truncate(0)
    lock.write(f"{os.getpid()}\\n")
    lock.flush()
    lower_priority()
    print("holding", flush=True)
    time.sleep(120)
''')


def _wait_for_nice(pid: int, nice: int, what: str, then=None, timeout: float = 60.0) -> None:
    from rltune.tracking._priority import autogroup_nice

    deadline = time.monotonic() + timeout
    while autogroup_nice(pid) != nice:
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: its autogroup is at nice {autogroup_nice(pid)}, not {nice}, after {timeout} s")
        if then is not None:
            then()
        time.sleep(0.05)


@pytest.fixture
def study_dir(tmp_path, template_db) -> Path:
    new_store(template_db, tmp_path)
    (tmp_path / "study").mkdir()
    return tmp_path / "study"


def _tracking(tmp_path: Path, study_dir: Path):
    from rltune.tracking import TrackingProcess

    return TrackingProcess(None, tmp_path, "yielding", "grid", "none", study_dir=study_dir, drain_timeout_s=120,
                           log_path=tmp_path / "tracking.log")


@pytest.mark.skipif(not os.path.exists("/proc/self/autogroup"), reason="no Linux autogroups here")
def test_the_tracking_yields_to_trials_but_not_while_the_studys_end_waits_for_it(tmp_path, study_dir):
    """Nice 19 starved the drain at a study's end for minutes on a busy machine (the study waited for it)."""
    import fcntl

    from rltune.tracking._server import LOCK_FILE

    lock = open(study_dir / LOCK_FILE, "a")  # held here: the tracking process waits for it, as for a killed one's
    fcntl.flock(lock, fcntl.LOCK_EX)
    tracking = _tracking(tmp_path, study_dir)
    _wait_for_nice(tracking.proc.pid, 19, "the tracking process at its start (trials start with it)")
    closing = threading.Thread(target=tracking.close)
    closing.start()
    try:
        _wait_for_nice(tracking.proc.pid, 0, "the tracking process the study's end waits for")
    finally:
        lock.close()
        closing.join(timeout=150)
    assert not closing.is_alive() and tracking.unrecorded == []


@pytest.mark.skipif(not os.path.exists("/proc/self/autogroup"), reason="no Linux autogroups here")
def test_a_tracking_process_waiting_for_a_killed_runs_one_hands_it_its_share(tmp_path, study_dir):
    from rltune.tracking._server import LOCK_FILE

    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(study_dir / LOCK_FILE)], stdout=subprocess.PIPE,
                              text=True, start_new_session=True)
    try:
        assert holder.stdout.readline() == "holding\n"
        _wait_for_nice(holder.pid, 19, "the earlier tracking process")
        tracking = _tracking(tmp_path, study_dir)
        _wait_for_nice(tracking.proc.pid, 19, "the tracking process at its start")
        closing = threading.Thread(target=tracking.close)
        closing.start()
        _wait_for_nice(holder.pid, 0, "the earlier tracking process, which the study's end waits for too")
    finally:
        holder.kill()
        holder.wait()
    closing.join(timeout=150)
    assert not closing.is_alive() and tracking.unrecorded == []
