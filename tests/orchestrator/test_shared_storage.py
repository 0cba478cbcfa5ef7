"""One study, many workers, on PostgreSQL: an exact budget, grid points once, stale trials retried, restarts survived.

Needs the server of ``$RLTUNE_TEST_POSTGRES_URL`` (``scripts/postgres.sh`` starts
one; ``.ci/run`` does it and sets the variable). Each test gets a database of
its own. Workers are real ``rltune tune`` processes on one results directory.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

pytestmark = pytest.mark.postgres

BASE_URL = os.environ.get("RLTUNE_TEST_POSTGRES_URL")
CLUSTER = os.environ.get("RLTUNE_TEST_POSTGRES_CLUSTER")  # "<version> <name>" for pg_ctlcluster (restart test)

TRAINABLE = '''
import json, os, time

def count(config, reporter):
    """ITERATIONS iterations of SLEEP s; score = a + b/10 + iteration/100; checkpoint every iteration."""
    start = 0
    if reporter.restored_checkpoint:
        with open(os.path.join(reporter.restored_checkpoint, "state.json")) as f:
            start = json.load(f)["iteration"]
        with open(os.path.join(str(reporter.trial_dir), "restored_from.txt"), "w") as f:
            f.write(str(start))
    for i in range(start + 1, int(os.environ.get("ITERATIONS", "5")) + 1):
        time.sleep(float(os.environ.get("SLEEP", "0.2")))
        reporter(score=config["a"] + config["b"] / 10 + i / 100)
        with reporter.checkpoint_dir() as d:
            with open(os.path.join(d, "state.json"), "w") as f:
                json.dump({"iteration": i}, f)
'''


@pytest.fixture
def new_database():
    """Makes fresh databases on the test server (dropped afterwards); returns their URLs."""
    if not BASE_URL:
        if os.environ.get("CI"):
            pytest.fail("RLTUNE_TEST_POSTGRES_URL is not set under CI: .ci/run starts PostgreSQL (scripts/postgres.sh)")
        pytest.skip("no PostgreSQL server: run `bash scripts/postgres.sh` and set RLTUNE_TEST_POSTGRES_URL to its URL")
    import psycopg

    made = []

    def admin(sql: str) -> None:  # a new connection each time: the restart test restarts the server
        with psycopg.connect(BASE_URL, autocommit=True) as conn:
            conn.execute(sql)

    def make() -> str:
        name = f"rltune_test_{uuid.uuid4().hex[:12]}"
        admin(f'CREATE DATABASE "{name}"')
        made.append(name)
        return urlunsplit(urlsplit(BASE_URL)._replace(path=f"/{name}"))

    yield make
    for name in made:
        admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def pg_url(new_database) -> str:
    """The study's database."""
    return new_database()


def study_file(tmp_path: Path, *, name: str = "shared", a=(1, 2, 3, 4), b=(0, 1, 2), n_trials: int = 12,
               extra: str = "", grace_s: int | None = 4) -> Path:
    (tmp_path / "shared_trainables.py").write_text(TRAINABLE)
    path = tmp_path / f"{name}.yaml"
    path.write_text(textwrap.dedent(f"""\
        name: {name}
        run: "shared_trainables:count"
        metric: score
        mode: max
        n_trials: {n_trials}
        search_alg: grid
        checkpoint_freq: 1
        heartbeat_interval_s: 1
        {f"heartbeat_grace_s: {grace_s}" if grace_s else ""}
        config:
          a: {{grid_search: {list(a)}}}
          b: {{grid_search: {list(b)}}}
        """) + extra)
    return path


def worker(path: Path, url: str, results: Path, *, extra_env: dict[str, str] | None = None,
           args: tuple[str, ...] = ()) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(path.parent), "RLTUNE_TRACKING": "0", **(extra_env or {})}
    return subprocess.Popen(
        [sys.executable, "-m", "rltune.orchestrator.cli", "tune", str(path), "--storage", url,
         "--results-dir", str(results), "--quiet", "--max-concurrent", "1", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=path.parent,
    )


def finish(procs: list[subprocess.Popen], timeout: float = 240) -> list[tuple[int, str, str]]:
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=timeout)
        out.append((p.returncode, stdout, stderr))
    return out


def load(url: str, name: str = "shared"):
    import optuna

    return optuna.load_study(study_name=name, storage=url)


def grid_points(trials) -> list[tuple[int, int]]:
    return sorted((t.params["a"], t.params["b"]) for t in trials)


def test_three_workers_share_a_budget_of_twelve_trials_and_one_mlflow_parent(tmp_path, pg_url, new_database):
    path = study_file(tmp_path)
    tracking = new_database()  # MLflow's tracking store on PostgreSQL too, shared by the workers
    from mlflow import MlflowClient

    MlflowClient(tracking).search_experiments()  # creates its tables once, before the workers start
    procs = [worker(path, pg_url, tmp_path / "results", extra_env={"RLTUNE_TRACKING": "1"},
                    args=("--tracking-uri", tracking)) for _ in range(3)]
    results = finish(procs)
    assert all(code == 0 for code, _, _ in results), results
    trials = load(pg_url).get_trials(deepcopy=False)
    complete = [t for t in trials if t.state.name == "COMPLETE"]
    assert len(trials) == 12 and len(complete) == 12
    assert grid_points(complete) == [(a, b) for a in (1, 2, 3, 4) for b in (0, 1, 2)]
    owners = {t.user_attrs["owner"]["pid"] for t in complete}
    assert len(owners) >= 2, "the trials should be spread over the workers"
    client = MlflowClient(tracking)
    experiment = client.get_experiment_by_name("shared")
    runs = client.search_runs([experiment.experiment_id])
    parents = [r for r in runs if r.data.tags.get("rltune.role") == "study"]
    nested = [r for r in runs if r.data.tags.get("rltune.role") == "trial"]
    assert len(parents) == 1
    assert len(nested) == 12
    assert {r.data.tags["mlflow.parentRunId"] for r in nested} == {parents[0].info.run_id}
    assert sorted(int(r.data.tags["rltune.trial"]) for r in nested) == list(range(12))


def test_a_worker_killed_mid_trial_is_retried_from_its_checkpoint_by_another(tmp_path, pg_url):
    path = study_file(tmp_path, a=(1, 2), b=(0, 1), n_trials=4)
    env = {"ITERATIONS": "12", "SLEEP": "0.3"}
    victim = worker(path, pg_url, tmp_path / "results", extra_env=env)
    study = None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # wait until the victim has checkpointed a few iterations of a trial
        try:
            study = load(pg_url)
            running = [t for t in study.get_trials(deepcopy=False) if t.state.name == "RUNNING"]
            if running and len(running[0].intermediate_values) >= 4 and running[0].user_attrs.get("checkpoint"):
                break
        except KeyError:
            pass
        time.sleep(0.2)
    else:
        victim.kill()
        pytest.fail("the first worker never got going: " + victim.communicate()[1][-2000:])
    killed_trial = running[0].number
    victim.send_signal(signal.SIGKILL)
    victim.communicate()
    survivor = worker(path, pg_url, tmp_path / "results", extra_env=env)
    [(code, _, stderr)] = finish([survivor])
    assert code == 0, stderr
    trials = load(pg_url).get_trials(deepcopy=False)
    complete = [t for t in trials if t.state.name == "COMPLETE"]
    failed = [t for t in trials if t.state.name == "FAIL"]
    assert len(complete) == 4, [(t.number, t.state.name) for t in trials]
    assert grid_points(complete) == [(1, 0), (1, 1), (2, 0), (2, 1)]
    assert [t.number for t in failed] == [killed_trial]  # the stale trial, failed by heartbeat
    retry = next(t for t in complete if t.system_attrs.get("failed_trial") == killed_trial)
    assert retry.params == failed[0].params
    restored_from = int((Path(retry.user_attrs["trial_dir"]) / "restored_from.txt").read_text())
    assert restored_from >= 3  # continued from the killed trial's checkpoint, not from scratch
    assert sorted(retry.intermediate_values) == list(range(1, 13))  # every iteration once, old and new


def test_a_worker_with_a_different_search_space_is_refused(tmp_path, pg_url):
    first = worker(study_file(tmp_path, n_trials=2), pg_url, tmp_path / "results")
    assert finish([first])[0][0] == 0
    other = tmp_path / "other"
    other.mkdir()
    changed = study_file(other, a=(1, 2, 5))  # same study name, another grid for a
    code, _, stderr = finish([worker(changed, pg_url, tmp_path / "results")])[0]
    assert code == 2
    assert "config.a: the study searches grid_search(1, 2, 3, 4), but this study file has grid_search(1, 2, 5)" in stderr
    assert "Traceback" not in stderr
    assert len(load(pg_url).get_trials(deepcopy=False)) == 2  # nothing of the study was touched


@pytest.mark.skipif(not CLUSTER, reason="restarting PostgreSQL needs RLTUNE_TEST_POSTGRES_CLUSTER "
                                        "('<version> <name>' of pg_ctlcluster; set by .ci/run)")
def test_workers_survive_a_postgresql_restart_mid_study_and_lose_nothing(tmp_path, pg_url):
    """The server is down for seconds while trials run: they wait (saying for what), reconnect, lose no result."""
    path = study_file(tmp_path, a=(1, 2, 3), b=(0, 1), n_trials=6, grace_s=None)  # the default grace: no stale trials
    env = {"ITERATIONS": "8", "SLEEP": "0.25"}
    procs = [worker(path, pg_url, tmp_path / "results", extra_env=env) for _ in range(2)]
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # a trial complete, and trials halfway
        try:
            trials = load(pg_url).get_trials(deepcopy=False)
            if any(t.state.name == "COMPLETE" for t in trials) and any(
                    t.state.name == "RUNNING" and len(t.intermediate_values) >= 3 for t in trials):
                break
        except KeyError:
            pass
        time.sleep(0.2)
    else:
        for p in procs:
            p.kill()
        pytest.fail("the study never got halfway: " + "\n".join(p.communicate()[1][-2000:] for p in procs))
    cluster = CLUSTER.split()
    subprocess.run(["pg_ctlcluster", *cluster, "stop", "--", "-m", "fast"], check=True, timeout=120)
    time.sleep(5)  # trials report and heartbeat meanwhile
    subprocess.run(["pg_ctlcluster", *cluster, "start"], check=True, timeout=120)
    results = finish(procs)
    assert all(code == 0 for code, _, _ in results), [r[2][-3000:] for r in results]
    waited = [stderr for _, _, stderr in results if "the study's database is unreachable" in stderr]
    assert waited, "no worker said what it waited for: " + results[0][2][-2000:]
    assert re.search(r"unreachable \(\w+: .*connection.*\); retrying RDBStorage\.\w+ for up to 60 s", waited[0],
                     re.IGNORECASE), waited[0]
    assert re.search(r"the study's database is back: RDBStorage\.\w+ went through after", waited[0]), waited[0]
    trials = load(pg_url).get_trials(deepcopy=False)
    assert [t.state.name for t in trials] == ["COMPLETE"] * 6, [(t.number, t.state.name) for t in trials]
    assert grid_points(trials) == [(a, b) for a in (1, 2, 3) for b in (0, 1)]
    for t in trials:  # every result recorded once, in Optuna as in the trial's result file
        lines = (Path(t.user_attrs["trial_dir"]) / "result.json").read_text().splitlines()
        scores = {r["training_iteration"]: r["score"] for r in map(json.loads, lines)}
        assert len(scores) == len(lines) == 8, t.number
        assert t.intermediate_values == scores and t.value == scores[8], t.number
        assert t.user_attrs["last_result"]["score"] == scores[8], t.number
