"""Full and read-only disks under a study or a trial: one clear message, nothing half-written, and a resume
that retries from their last checkpoints the trials that failed for lack of space.

The disks are real (tests/mounts.py): a small tmpfs filled with a ballast
file (the kernel's ENOSPC) and read-only bind mounts (EROFS); no fault is
injected.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import optuna
import pytest

from mounts import mount_problem, read_only, resize, tmpfs
from rltune import tune
from rltune.errors import DiskError, StudyFailedError
from rltune.orchestrator._listing import load_study
from rltune.orchestrator.cli import main

pytestmark = pytest.mark.skipif(mount_problem() is not None, reason=str(mount_problem()))

FULL_STUDY = """
name: full
run: orchestrator.trainables:filling_the_disk
metric: score
checkpoint_freq: 1
config: {{x: {{grid_search: [1, 2]}}, steps: 5, fill_at: 2, fill: {fill}}}
"""
TINY_PPO = {"num_workers": 0, "train_batch_size": 64, "rollout_fragment_length": 64, "sgd_minibatch_size": 32,
            "num_sgd_iter": 1, "model": {"fcnet_hiddens": [16]}}


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _one_error_line(err: str) -> str:
    assert "Traceback" not in err and err.count("\n") == 1 and err.count("error:") == 1, err
    return err


def _iterations(trial_dir: Path) -> list[int]:
    return [json.loads(line)["training_iteration"] for line in (trial_dir / "result.json").read_text().splitlines()]


# -- a full disk in a study ----------------------------------------------------------------------------------
def test_a_trial_that_finds_the_disk_full_fails_clearly_and_resume_retries_it_from_its_checkpoint(tmp_path, capsys):
    study_file = tmp_path / "full.yaml"
    study_file.write_text(FULL_STUDY.format(fill=tmp_path / "disk"))
    journal = tmp_path / "study.journal"  # beside the full disk: this test is about the trials' files
    flags = ("--results-dir", tmp_path / "disk", "--storage", journal, "--quiet")
    with tmpfs(tmp_path / "disk", "512k") as disk:
        code, out, err = _cli(capsys, "tune", study_file, *flags)
        assert code == 1 and "Traceback" not in err, out + err
        assert "no space left on device" in err and "--resume" in err
        study, _ = load_study(disk / "full", str(journal))
        [failed] = study.get_trials(states=[s for s in optuna.trial.TrialState if s.name != "WAITING"])
        # (the disk is full: the study started no other trial)
        assert failed.state == optuna.trial.TrialState.FAIL and failed.user_attrs["failure_kind"] == "no_space"
        trial_dir = disk / "full" / "trial_00000"
        assert f"cannot write checkpoint '{trial_dir / 'checkpoint_000003'}': no space left on device" in \
            failed.user_attrs["error"]
        # the last good checkpoint is kept whole; the one the disk refused left nothing behind
        assert sorted(p.name for p in trial_dir.iterdir() if "checkpoint" in p.name) == ["checkpoint_000001",
                                                                                        "checkpoint_000002"]
        assert json.loads((trial_dir / "checkpoint_000002" / "state.json").read_text()) == {"step": 2}

        (disk / "ballast").write_bytes(b"")  # space freed (the trainable fills a disk once)
        code, out, err = _cli(capsys, "tune", study_file, *flags, "--resume")
        assert code == 0, out + err
        assert "trial 2 retries trial 0 from its checkpoint at iteration 2" in out
        study, _ = load_study(disk / "full", str(journal))
        trials = study.get_trials()
        assert [(t.number, t.state.name, t.params["x"]) for t in trials] == [(0, "FAIL", 1), (1, "COMPLETE", 2),
                                                                            (2, "COMPLETE", 1)]
        retry = trials[2]
        assert retry.user_attrs["retry_of"] == 0 and retry.value == 5 and sorted(retry.intermediate_values) == [1, 2, 3,
                                                                                                               4, 5]
        retry_dir = disk / "full" / "trial_00002"
        assert (retry_dir / "starts.txt").read_text().split() == ["2"]  # restored from checkpoint 2, not from scratch
        assert _iterations(retry_dir) == [1, 2, 3, 4, 5]

        # the retried configuration is reported once: by its retry
        code, out, err = _cli(capsys, "show", "full", "--results-dir", disk)
        assert code == 0 and "2 trials" in out and "(retry of trial 0)" in out, out + err
        assert not any(line.split()[:2] == ["0", "FAIL"] for line in out.splitlines())
        code, out, err = _cli(capsys, "studies", "--results-dir", disk)
        assert [line.split()[:4] for line in out.splitlines()[1:]] == [["full", "2", "2", "0"]]
        analysis = tune.run("orchestrator.trainables:filling_the_disk", name="full", results_dir=str(disk),
                            storage=str(journal), metric="score", resume=True, verbose=0,
                            config={"x": tune.grid_search([1, 2]), "steps": 5, "fill_at": 2, "fill": str(disk)})
        assert [(t.number, t.state, t.retry_of) for t in analysis.trials] == [(1, "COMPLETE", None), (2, "COMPLETE", 0)]
        assert len(study.get_trials()) == 3  # nothing left to run: the budget counts the retried point once


def test_the_study_storage_on_a_full_disk_stops_the_study_resumable_and_the_journal_stays_readable(tmp_path, capsys):
    study_file = tmp_path / "long.yaml"
    study_file.write_text("name: long\nrun: orchestrator.trainables:counter\nmetric: score\ncheckpoint_freq: 10\n"
                          "config: {x: {grid_search: [1, 2, 3]}, steps: 300}\n")
    with tmpfs(tmp_path / "jdisk", "32k") as jdisk:  # room for a few hundred results' worth of journal
        flags = ("--results-dir", tmp_path / "results", "--storage", jdisk / "study.journal", "--quiet")
        code, out, err = _cli(capsys, "tune", study_file, *flags)
        assert code == 2, out + err
        assert f"cannot write the study's storage '{jdisk / 'study.journal'}': no space left on device" in \
            _one_error_line(err)
        assert "resumable" in err and "--resume" in err
        study, _ = load_study(tmp_path / "results" / "long", str(jdisk / "study.journal"))  # no half-written line
        assert study.get_trials()[0].state == optuna.trial.TrialState.RUNNING  # interrupted, not lost

        resize(jdisk, "4m")
        code, out, err = _cli(capsys, "tune", study_file, *flags, "--resume")
        assert code == 0, out + err
        study, _ = load_study(tmp_path / "results" / "long", str(jdisk / "study.journal"))
        trials = study.get_trials()
        assert sorted((t.params["x"], t.value, t.state.name) for t in trials) == [
            (1, 300, "COMPLETE"), (2, 600, "COMPLETE"), (3, 900, "COMPLETE")]
        starts = (tmp_path / "results" / "long" / "trial_00000" / "starts.txt").read_text().split()
        assert starts[0] == "0" and int(starts[1]) > 0  # the interrupted trial went on from its checkpoint


def _flaky_study(tmp_path: Path) -> tuple[Path, Path, tuple]:
    """A study file whose one trial raises at step 2 (after checkpoint 2) until the file ``until`` exists."""
    until = tmp_path / "fixed"
    study_file = tmp_path / "flaky.yaml"
    study_file.write_text(f"name: flaky\nrun: orchestrator.trainables:misbehaving\nmetric: mode_ok\ncheckpoint_freq: 1\n"
                          f"config: {{mode: until, until: {until}, steps: 4}}\n")
    return study_file, until, ("--results-dir", tmp_path / "results", "--quiet")


def test_retry_failed_retries_failed_trials_of_any_kind_from_their_checkpoints(tmp_path, capsys):
    study_file, until, flags = _flaky_study(tmp_path)
    code, out, err = _cli(capsys, "tune", study_file, *flags)
    assert code == 1, out + err
    code, out, err = _cli(capsys, "tune", study_file, *flags, "--resume")  # an error, not a full disk: kept FAIL
    assert code == 1 and "retries trial" not in out, out + err
    until.touch()
    code, out, err = _cli(capsys, "tune", study_file, *flags, "--retry-failed")
    assert code == 0 and "trial 1 retries trial 0 from its checkpoint at iteration 2" in out, out + err
    study, _ = load_study(tmp_path / "results" / "flaky")
    trials = study.get_trials()
    assert [(t.state.name, t.user_attrs.get("failure_kind"), t.user_attrs.get("retry_of")) for t in trials] == [
        ("FAIL", "error", None), ("COMPLETE", None, 0)]
    assert _iterations(tmp_path / "results" / "flaky" / "trial_00001") == [1, 2, 3, 4]
    code, out, err = _cli(capsys, "tune", study_file, *flags, "--retry-failed")  # a retried trial is retried once
    assert code == 0 and len(load_study(tmp_path / "results" / "flaky")[0].get_trials()) == 2


def test_a_retry_killed_as_it_started_goes_on_from_the_failed_trials_checkpoint(tmp_path, capsys):
    from rltune.orchestrator._retry import start_retry

    study_file, until, flags = _flaky_study(tmp_path)
    assert _cli(capsys, "tune", study_file, *flags)[0] == 1
    study, _ = load_study(tmp_path / "results" / "flaky")
    start_retry(study, study.get_trials()[0])  # the orchestrator was killed right after it took the retry
    until.touch()
    code, out, err = _cli(capsys, "tune", study_file, *flags, "--resume")
    assert code == 0 and "trial 1 retries trial 0 from its checkpoint at iteration 2" in out, out + err
    [retry] = [t for t in load_study(tmp_path / "results" / "flaky")[0].get_trials() if t.number == 1]
    assert retry.state.name == "COMPLETE" and retry.user_attrs["trial_dir"].endswith("trial_00001")
    assert _iterations(tmp_path / "results" / "flaky" / "trial_00001") == [1, 2, 3, 4]


def test_the_retry_is_opened_in_the_tracking_with_the_trial_it_retries(tmp_path):
    from unittest import mock

    from rltune.orchestrator._events import TrackingObserver
    from rltune.orchestrator._runner import StudyRunner
    from rltune.orchestrator._spec import make_plan

    fields = {"run": "orchestrator.trainables:misbehaving", "metric": "mode_ok", "checkpoint_freq": 1,
              "config": {"mode": "until", "until": str(tmp_path / "fixed"), "steps": 4},
              "results_dir": str(tmp_path), "name": "linked", "tracking": False}
    with pytest.raises(StudyFailedError):
        tune.run(**{("run_or_experiment" if k == "run" else k): v for k, v in fields.items()}, verbose=0)
    (tmp_path / "fixed").touch()
    runner = StudyRunner(make_plan(fields), resume=True, retry_failed=True)
    from rltune.tracking._process import Lag

    tracker = mock.MagicMock()
    tracker.lag.return_value = Lag(0.0, 0, {})
    runner.observers.append(TrackingObserver(tracker, runner))
    runner.open_study()
    try:
        runner.run()
    finally:
        runner.close()
    [(args, kwargs)] = tracker.open_trial.call_args_list
    assert args[0] == 1 and kwargs["retry_of"] == 0
    assert tracker.end_trial.call_args.args[1] == "COMPLETE"


def test_rltune_train_on_a_full_disk_names_the_path_and_the_last_good_checkpoint(tmp_path, capsys):
    with tmpfs(tmp_path / "disk", "2m") as disk:
        config = json.dumps({**TINY_PPO, "callbacks": "mounts:FillDiskAtIteration3"})
        code, out, err = _cli(capsys, "train", "--run", "PPO", "--env", "CartPole-v1", "--config", config,
                              "--results-dir", disk, "--name", "run", "--checkpoint-freq", "1",
                              "--stop", '{"training_iteration": 4}', "--no-tensorboard")
        assert code == 2, out + err
        line = _one_error_line(err)
        assert "no space left on device" in line and str(disk / "run") in line
        assert f"the last checkpoint saved is '{disk / 'run' / 'checkpoint_000002'}'" in line
        assert sorted(p.name for p in (disk / "run").iterdir() if "checkpoint" in p.name) == ["checkpoint_000001",
                                                                                             "checkpoint_000002"]


# -- read-only and missing results directories ---------------------------------------------------------------
def test_train_tune_and_resume_refuse_a_read_only_results_dir_at_once(tmp_path, capsys):
    study_file = tmp_path / "s.yaml"
    study_file.write_text("name: s\nrun: orchestrator.trainables:counter\nmetric: score\nconfig: {steps: 2}\n")
    assert _cli(capsys, "tune", study_file, "--results-dir", tmp_path / "ro", "--quiet")[0] == 0  # a study to resume
    with read_only(tmp_path / "ro") as ro:
        code, out, err = _cli(capsys, "train", "--run", "PPO", "--env", "CartPole-v1", "--results-dir", ro,
                              "--stop", '{"training_iteration": 1}')
        assert code == 2 and out == ""  # refused before the trainer and its workers started
        assert f"results directory '{ro}' cannot be written: it is read-only" in _one_error_line(err)
        code, out, err = _cli(capsys, "tune", study_file, "--results-dir", ro / "new", "--quiet", "--name", "t")
        assert code == 2
        assert f"the study directory '{ro / 'new' / 't'}' cannot be created: '{ro}' is read-only" in \
            _one_error_line(err)
        code, out, err = _cli(capsys, "tune", study_file, "--results-dir", ro, "--quiet", "--resume")
        assert code == 2
        assert f"the study directory '{ro / 's'}' cannot be written: it is read-only" in _one_error_line(err)
        with pytest.raises(DiskError, match="read-only") as raised:
            tune.run("orchestrator.trainables:counter", config={"steps": 2}, metric="score", name="s",
                     results_dir=str(ro), resume=True, verbose=0)
        assert raised.value.kind == "read_only" and raised.value.path == str(ro / "s")
        from rltune.trainers import PPO

        with pytest.raises(DiskError, match=re.escape(f"results_dir '{ro / 'x'}' cannot be created")):
            PPO(config={"env": "CartPole-v1", "num_workers": 1}, results_dir=str(ro / "x"))


def test_resume_of_a_study_that_is_not_there_is_refused_and_auto_starts_it(tmp_path, capsys):
    study_file = tmp_path / "s.yaml"
    study_file.write_text("run: orchestrator.trainables:counter\nmetric: score\nconfig: {steps: 2}\n")
    code, out, err = _cli(capsys, "tune", study_file, "--results-dir", tmp_path / "results", "--name", "typo",
                          "--quiet", "--resume")
    assert code == 2
    assert f"study 'typo' does not exist: its directory '{tmp_path / 'results' / 'typo'}' is missing" in \
        _one_error_line(err)
    assert not (tmp_path / "results" / "typo").exists()
    kwargs = dict(config={"steps": 2}, metric="score", name="fresh", results_dir=str(tmp_path / "results"), verbose=0)
    with pytest.raises(DiskError, match="does not exist") as raised:
        tune.run("orchestrator.trainables:counter", resume=True, **kwargs)
    assert raised.value.kind == "missing"
    assert len(tune.run("orchestrator.trainables:counter", resume="auto", **kwargs).trials) == 1
    assert len(tune.run("orchestrator.trainables:counter", resume="AUTO", **kwargs).trials) == 1


def test_a_function_study_failing_on_a_full_disk_is_a_study_failed_error_in_python(tmp_path):
    with tmpfs(tmp_path / "disk", "512k") as disk:
        with pytest.raises(StudyFailedError) as raised:
            tune.run("orchestrator.trainables:filling_the_disk", name="full", results_dir=str(disk),
                     storage=str(tmp_path / "study.journal"), metric="score", checkpoint_freq=1, verbose=0,
                     config={"x": tune.grid_search([1, 2]), "steps": 5, "fill_at": 2, "fill": str(disk)})
        analysis = raised.value.analysis
        assert analysis.no_space and "no space left on device" in analysis.no_space
        [trial] = analysis.trials
        assert trial.failure_kind == "no_space" and "no space left on device" in trial.error
