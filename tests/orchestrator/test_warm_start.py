"""A study's trials under warm start (rltune._warm): every guarantee of the cold start holds.

``RLTUNE_WARM_START=wait`` makes each trial wait for the template rather
than start cold while it imports, so that these trials are all warm.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from processes import process_alive, wait_gone

from rltune import tune
from rltune.errors import StudyFailedError

from .warm_trainables import crash, describe, with_workers

TEMPLATE = "rltune._warm_server"


@pytest.fixture
def warm(monkeypatch):
    monkeypatch.setenv("RLTUNE_WARM_START", "wait")


def _run(trainable, tmp_path: Path, name: str, **kwargs):
    return tune.run(trainable, metric="score", results_dir=str(tmp_path / "results"), name=name, verbose=0, **kwargs)


def test_a_warm_trial_has_its_session_environment_cwd_output_and_threads(warm, tmp_path, monkeypatch):
    monkeypatch.setenv("RLTUNE_TEST_VALUE", "set by the user")
    monkeypatch.chdir(tmp_path)
    analysis = _run(describe, tmp_path, "warm", config={"x": tune.grid_search([1, 2])})
    for trial in analysis.trials:
        r = trial.last_result
        assert TEMPLATE in r["parent"], "the trial was not forked from the warm template"
        assert r["sid"] == r["pgid"] == r["pid"]  # its own session: Ctrl-C reaches the orchestrator only
        assert r["trial_number"] == str(trial.number) and r["value"] == "set by the user"
        assert r["cwd"] == str(tmp_path) and not r["optuna"] and not r["mlflow"] and r["matmul"]
        log = (Path(trial.trial_dir) / "output.log").read_text()
        for line in ("trial stdout of python", "trial stderr of python", "trial stdout of C puts"):
            assert line in log, log
    threads = analysis.trials[0].last_result["threads"]
    monkeypatch.setenv("RLTUNE_WARM_START", "0")
    cold = _run(describe, tmp_path, "cold", config={"x": 1}).trials[0].last_result
    assert TEMPLATE not in cold["parent"] and cold["threads"] == threads  # torch's pools: as a cold process's


@pytest.mark.parametrize("how, error", [("segfault", "was killed by signal SIGSEGV"), ("exit", "exited with code 5")])
def test_a_warm_trial_that_crashes_is_a_crashed_trial(warm, tmp_path, how, error):
    with pytest.raises(StudyFailedError) as failed:
        _run(crash, tmp_path, how, config={"how": how})
    (trial,) = failed.value.analysis.trials
    assert trial.state == "FAIL" and trial.failure_kind == "crash", (trial.state, trial.failure_kind)
    assert error in trial.error and "without reporting an error" in trial.error


def test_a_warm_trial_s_workers_start_warm_in_its_group_with_its_env_registrations_and_die_with_it(warm, tmp_path):
    import gymnasium as gym

    from rltune.trainers import register_env

    register_env("rltune-warm-cartpole", lambda ctx: gym.make("CartPole-v1"))  # after the template started
    with pytest.raises(StudyFailedError) as failed:
        _run(with_workers, tmp_path, "workers", config={"env": "rltune-warm-cartpole"})
    (trial,) = failed.value.analysis.trials
    result = trial.last_result
    assert trial.state == "FAIL" and trial.failure_kind == "crash", (trial.state, trial.failure_kind)
    (worker,) = result["workers"]
    assert TEMPLATE in worker["parent"], "the rollout worker was not forked from the trial's template"
    assert worker["pgid"] == result["pid"]  # in the trial's process group: killing the trial kills it
    assert worker["threads"] == 1  # torch_num_threads
    assert wait_gone([result["pid"], worker["pid"]], 30) == []
    assert not process_alive(worker["pid"])


def test_with_warm_start_off_a_trial_is_the_orchestrator_s_child(tmp_path, monkeypatch):
    monkeypatch.setenv("RLTUNE_WARM_START", "0")
    r = _run(describe, tmp_path, "off", config={"x": 1}).trials[0].last_result
    assert TEMPLATE not in r["parent"] and r["sid"] == r["pid"]
    assert "trial stdout of C puts" in (tmp_path / "results" / "off" / "trial_00000" / "output.log").read_text()
