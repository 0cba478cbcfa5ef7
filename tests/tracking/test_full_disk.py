"""MLflow and full disks: a store on a full disk says so (and nothing raises); a retried trial has its own
run, linked with the failed trial's (tags ``rltune.retry_of`` / ``rltune.retried_by``).

The disks are real tmpfs mounts filled with a ballast file (tests/mounts.py).
"""

from __future__ import annotations

import logging
import shutil

import pytest
from mlflow import MlflowClient

from mounts import fill, mount_problem, tmpfs
from rltune.tracking import StudyTracker

pytestmark = [pytest.mark.skipif(mount_problem() is not None, reason=str(mount_problem())), pytest.mark.tracked]


def test_a_store_on_a_full_disk_is_named_with_no_space_left_and_nothing_raises(tmp_path, template_db, caplog):
    with tmpfs(tmp_path / "disk", "2m") as disk:
        shutil.copy(template_db, disk / "mlflow.db")
        study = StudyTracker(None, disk, "full", "tpe", "none")
        run = study.open_trial(0, {"lr": 0.1}, {"lr": 0.1})
        fill(disk)
        with caplog.at_level(logging.WARNING, logger="rltune.tracking"):
            for i in range(1, 40):  # each result a few pages of the store: the disk's last free bytes go at once
                run.log_result({"training_iteration": i, **{f"metric_{k}": float(k) for k in range(200)}})
            study.close()
        warnings = [r.getMessage() for r in caplog.records if "no space left on device" in r.getMessage()]
        assert warnings and f"(the MLflow store sqlite:///{disk / 'mlflow.db'})" in warnings[0], caplog.text
        assert study.failure_counts


def test_a_retry_has_its_own_run_linked_with_the_failed_trials_run(tmp_path, template_db):
    shutil.copy(template_db, tmp_path / "mlflow.db")
    study = StudyTracker(None, tmp_path, "retried", "grid", "none")
    failed = study.open_trial(0, {"x": 1}, {"x": 1})
    study.end_trial(failed, "FAIL", error="DiskError: cannot write checkpoint ...: no space left on device")
    retry = study.open_trial(2, {"x": 1}, {"x": 1}, retry_of=0, metric="score")
    study.end_trial(retry, "COMPLETE")
    study.close()
    client = MlflowClient(study.tracking_uri)
    failed_run, retry_run = client.get_run(failed.run_id), client.get_run(retry.run_id)
    assert failed_run.info.run_id != retry_run.info.run_id  # each Optuna trial its own run, in its own state
    assert (failed_run.info.status, failed_run.data.tags["rltune.retried_by"]) == ("FAILED", "2")
    assert (retry_run.info.status, retry_run.data.tags["rltune.retry_of"]) == ("FINISHED", "0")
