"""MLflow keeps up with a running study (issue 24): runs while trials run, on a loaded machine too; true times, lag told.

A user starts a study and opens ``rltune ui`` to watch it: each trial's run
must be there with its params and its first results while the trial runs,
and the study's parent run FINISHED with its plots right after the study,
even when other work keeps every core busy (the tracking process must not
starve at its low priority).
"""

from __future__ import annotations

import csv
import io
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

import pytest
from mlflow import MlflowClient

from rltune import tune

from .conftest import new_store

pytestmark = pytest.mark.tracked

LIVE_WAIT_S = 90.0  # how long a trial's run may take to show in MLflow before the test fails (a loaded machine)
END_WAIT_S = 10.0  # the parent run is FINISHED with its plots within this long of the study's last trial's end


@pytest.fixture
def cpu_hog():
    """One busy-loop process per core, each in a session of its own (like other jobs on a shared machine)."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
             for _ in range(os.cpu_count() or 1)]
    try:
        yield procs
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def _wait_for(check: Callable[[], Any], what: str, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:.0f} s: {what}")
        time.sleep(0.2)


def _trial_run(client: MlflowClient, study: str, number: int) -> Any:
    """Trial ``number``'s run if it holds its params and at least one metric step, else None."""
    experiment = client.get_experiment_by_name(study)
    if experiment is None:
        return None
    runs = client.search_runs([experiment.experiment_id], filter_string=f"tags.`rltune.trial` = '{number}'")
    if not runs or "x" not in runs[0].data.params:
        return None
    return runs[0] if client.get_metric_history(runs[0].info.run_id, "score") else None


def _finished_parent(client: MlflowClient, study: str, trials: int) -> Any:
    """The parent run once it is FINISHED with its final trials.csv (every trial COMPLETE) and its plots."""
    experiment = client.get_experiment_by_name(study)
    parents = client.search_runs([experiment.experiment_id], filter_string="tags.`rltune.role` = 'study'")
    if not parents or parents[0].info.status != "FINISHED":
        return None
    run_id = parents[0].info.run_id
    if "optimization_history.png" not in {Path(a.path).name for a in client.list_artifacts(run_id, "plots")}:
        return None
    table = Path(client.download_artifacts(run_id, "trials.csv")).read_text()
    states = [row["state"] for row in csv.DictReader(io.StringIO(table))]
    return parents[0] if states == ["COMPLETE"] * trials else None


def test_mlflow_keeps_up_with_a_study_on_a_loaded_machine(tmp_path, template_db, cpu_hog):
    """Before each trial goes on past its first result, its run is in MLflow with params and that result."""
    new_store(template_db, tmp_path)
    study_dir, trials, outcome = tmp_path / "live", 4, {}

    def run() -> None:
        try:
            outcome["analysis"] = tune.run(
                "orchestrator.trainables:report_then_wait", name="live", metric="score", mode="max",
                config={"x": tune.grid_search([1, 2, 3, 4]), "steps": 3}, results_dir=str(tmp_path), n_jobs=2,
                verbose=0, tracking=True)
        except BaseException as exc:  # noqa: BLE001 - shown by the assertion below
            outcome["error"] = exc

    study = threading.Thread(target=run, daemon=True)
    study.start()
    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    try:
        for number in range(trials):  # trial n waits for its "go" until its run is seen here
            live = _wait_for(lambda: _trial_run(client, "live", number),
                             f"trial {number}'s run with its params and a first result, while the trial runs",
                             LIVE_WAIT_S)
            assert live.data.params["x"] == str(number + 1) and live.info.status == "RUNNING"
            (study_dir / f"trial_{number:05d}" / "go").write_text("go")
        parent = _wait_for(lambda: _finished_parent(client, "live", trials), "the parent run FINISHED with its plots",
                           120.0)
        seen = time.time()
    finally:
        for number in range(trials):  # a failed check: the study ends all the same
            (study_dir / f"trial_{number:05d}").mkdir(parents=True, exist_ok=True)
            (study_dir / f"trial_{number:05d}" / "go").write_text("go")
        study.join(timeout=240)
    assert "error" not in outcome, outcome.get("error")
    ends = [t.datetime_complete.timestamp() for t in outcome["analysis"].study.get_trials()]
    assert len(ends) == trials and parent.info.status == "FINISHED"
    assert seen - max(ends) <= END_WAIT_S, f"the parent run was FINISHED with its plots {seen - max(ends):.1f} s " \
                                           "after the study's last trial ended"


def _ms(when: Any) -> int:
    return int(when.timestamp() * 1000)


def _runs_by_trial(client: MlflowClient, study: str) -> dict[int, Any]:
    experiment = client.get_experiment_by_name(study)
    runs = client.search_runs([experiment.experiment_id], filter_string="tags.`rltune.role` = 'trial'")
    return {int(r.data.tags["rltune.trial"]): r for r in runs}


def test_runs_have_the_trials_own_start_and_end_times_also_when_recorded_late(tmp_path, template_db, capsys):
    """Live, and by the reconciliation of a resume (a study run without tracking), which trains nothing."""
    new_store(template_db, tmp_path)
    fields = dict(metric="score", mode="max", config={"x": tune.grid_search([1.0, 2.0]), "steps": 2},
                  results_dir=str(tmp_path))
    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    for name, first_tracking in (("live-times", True), ("late-times", False)):
        analysis = tune.run("orchestrator.trainables:counter", name=name, **fields, verbose=0, tracking=first_tracking)
        if not first_tracking:  # a finished study, never tracked: --resume records it, training nothing
            results = {t.number: (Path(t.trial_dir) / "result.json").read_text() for t in analysis.trials}
            analysis = tune.run("orchestrator.trainables:counter", name=name, **fields, verbose=1, tracking=True,
                                resume=True)
            out = capsys.readouterr().out
            assert "has run all its 2 trial(s), so no trial is trained" in out, out
            assert "recorded what an earlier run left out in the runs of trial(s) 0, 1" in out, out
            assert {t.number: (Path(t.trial_dir) / "result.json").read_text() for t in analysis.trials} == results
        runs = _runs_by_trial(client, name)
        for t in analysis.study.get_trials():
            run = runs[t.number]
            assert (run.info.start_time, run.info.end_time) == (_ms(t.datetime_start), _ms(t.datetime_complete)), name
            assert sorted(m.step for m in client.get_metric_history(run.info.run_id, "score")) == [1, 2]


def test_the_lag_is_told_while_tracking_is_behind_and_the_end_wait_says_what_it_waits_for(
        tmp_path, template_db, monkeypatch):
    """The tracking process is stopped (SIGSTOP) while the orchestrator sends it calls: the live view says how far
    behind it is, and the study's end says what it waits for, until it is let go on."""
    from rltune.orchestrator import _events
    from rltune.orchestrator._display import PlainDisplay
    from rltune.tracking import TrackingProcess, _process
    from rltune.tracking._priority import autogroup_nice, has_autogroups

    monkeypatch.setattr(_events, "BEHIND_S", 1.0)
    monkeypatch.setattr(_process, "SAY_AFTER_S", 0.2)
    tracking = TrackingProcess(None, new_store(template_db, tmp_path), "lagging", "grid", "none",
                               log_path=tmp_path / "tracking.log", result_hold_s=0.0)

    def started() -> bool:
        tracking.poll()
        tracking.yield_to_trials(True)  # as the study's loop does on every turn
        return tracking.lag().queued == 0

    _wait_for(started, "the tracking process started", 120.0)
    stream = io.StringIO()
    runner = SimpleNamespace(spec=SimpleNamespace(metric="score", mode="max", timeout_s=None),
                             plan=SimpleNamespace(total_trials=1), active=["a running trial"])
    display = PlainDisplay(runner, stream)
    display.TRACKING_BEHIND_S = 1.0  # the plain lines' own threshold (15 s)
    runner.observers = _events.Observers([display])
    observer = _events.TrackingObserver(tracking, runner)
    os.kill(tracking.proc.pid, signal.SIGSTOP)
    said: list[str] = []
    closing = threading.Thread(target=lambda: tracking.close(say=said.append))
    try:
        trial = tracking.open_trial(0, {"x": 1}, {"x": 1})
        for i in (1, 2, 3):
            trial.log_result({"training_iteration": i, "score": float(i)})
        time.sleep(2.5)  # past BEHIND_S and the priority's deadline
        observer.refresh(runner)
        lag = tracking.lag()
        assert lag.queued == 4 and lag.waiting_for == {"result": 3, "open": 1} and lag.seconds > 2
        assert re.search(r"MLflow tracking is \d+ s behind the study \(4 call\(s\) queued\)", stream.getvalue())
        if has_autogroups():  # behind its deadline: no longer yielding to the running trials
            assert autogroup_nice(tracking.proc.pid) == 0
        closing.start()
        _wait_for(lambda: said, "a line saying what the study's end waits for", 30.0)
    finally:
        os.kill(tracking.proc.pid, signal.SIGCONT)
    closing.join(timeout=120)
    assert not closing.is_alive() and tracking.unrecorded == []
    assert said[0].startswith("MLflow tracking: recording the study's last 5 call(s) (result x3, open, close)"), said
    assert "giving up in" in said[0]
    client = MlflowClient(tracking.tracking_uri)
    [run] = _runs_by_trial(client, "lagging").values()
    assert sorted(m.step for m in client.get_metric_history(run.info.run_id, "score")) == [1, 2, 3]


def test_the_tracking_yields_to_trials_only_while_it_keeps_up():
    from rltune.tracking._priority import Priority

    priority = Priority()
    assert [priority.nice_for(True, lag) for lag in (0.0, 1.9, 2.1, 60.0)] == [19, 19, 0, 0]
    assert priority.nice_for(False, 0.0) == 0  # no trial runs (the study's end): the tracking's turn
    assert Priority(nice=10, deadline_s=None).nice_for(True, 60.0) == 10
