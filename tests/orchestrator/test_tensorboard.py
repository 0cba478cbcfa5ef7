"""TensorBoard event files: every result's numbers at step timesteps_total, read back with TensorBoard's own loader.

``rltune train`` writes them by default, studies when asked (``tensorboard``
field, ``--tensorboard``, ``tune.run(tensorboard=True)``); one run per trial
under the results dir; closed on every exit path; a restarted trial hides
the steps its earlier attempt wrote after the checkpoint it restarts from.
"""

from __future__ import annotations

import inspect
import json
import math
import os
import threading
from pathlib import Path

import numpy as np
import pytest

from tensorboard.backend.event_processing import event_accumulator  # the test extra: TensorBoard's own reader
from tensorboard.backend.event_processing.plugin_event_multiplexer import EventMultiplexer

from rltune import tune
from rltune._ipc import TrialInit
from rltune.errors import ConfigError
from rltune.orchestrator import _trial_process
from rltune.orchestrator._spec import FIELDS, StudySpec
from rltune.orchestrator._tensorboard import flatten_numbers, tensorboard_step
from rltune.orchestrator.cli import main

TINY = {"train_batch_size": 200, "rollout_fragment_length": 50, "sgd_minibatch_size": 100, "num_sgd_iter": 2,
        "model": {"fcnet_hiddens": [16]}, "seed": 0}


# -- reading event files back, as TensorBoard does ------------------------------------------------------
def read_run(run_dir: Path) -> tuple[dict[str, dict[int, float]], dict[str, dict[int, int]]]:
    """``({tag: {step: value}}, {histogram tag: {step: count}})`` of a run directory; each step at most once."""
    acc = event_accumulator.EventAccumulator(str(run_dir), size_guidance={"scalars": 0, "histograms": 0})
    acc.Reload()
    scalars: dict[str, dict[int, float]] = {}
    for tag in acc.Tags()["scalars"]:
        events = acc.Scalars(tag)
        steps = [e.step for e in events]
        assert len(steps) == len(set(steps)), f"{tag}: a step written twice: {steps}"
        scalars[tag] = {e.step: e.value for e in events}
    histograms = {tag: {e.step: int(e.histogram_value.num) for e in acc.Histograms(tag)}
                  for tag in acc.Tags()["histograms"]}
    return scalars, histograms


def leaves(result: dict, prefix: str = "") -> dict[str, object]:
    """Every leaf of a nested result as ``a/b/c`` (written independently of the code under test)."""
    out = {}
    for key, value in result.items():
        if isinstance(value, dict):
            out.update(leaves(value, f"{prefix}{key}/"))
        else:
            out[f"{prefix}{key}"] = value
    return out


def results_of(trial_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (trial_dir / "result.json").read_text().splitlines()]


def event_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.rglob("*") if ".tfevents." in p.name)


def assert_scalars_match_results(trial_dir: Path) -> dict[str, dict[int, float]]:
    """Each finite number of each result.json line is a scalar at step timesteps_total (else training_iteration)."""
    scalars, histograms = read_run(trial_dir)
    results = results_of(trial_dir)
    assert results
    for result in results:
        step = result["timesteps_total"] if "timesteps_total" in result else result["training_iteration"]
        for tag, value in leaves(result).items():
            if tag in ("timestamp", "trial_number"):
                assert tag not in scalars
            elif isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                assert scalars[tag][step] == pytest.approx(np.float32(value), rel=1e-6), (tag, step)
            elif isinstance(value, list) and value and all(isinstance(v, (int, float)) for v in value):
                assert histograms[tag][step] == len(value), (tag, step)
            else:
                assert step not in scalars.get(tag, {}), (tag, value)
    return scalars


# -- rltune train -------------------------------------------------------------------------------------------
def test_rltune_train_writes_every_number_of_every_result_at_timesteps_total(tmp_path, capsys):
    config = json.dumps({**TINY, "evaluation_interval": 1, "evaluation_duration": 2})
    code = main(["train", "--run", "PPO", "--env", "CartPole-v1", "--config", config, "--results-dir", str(tmp_path),
                 "--name", "t", "--stop", '{"training_iteration": 3}'])
    out = capsys.readouterr().out
    assert code == 0
    assert f"TensorBoard: tensorboard --logdir {tmp_path}" in out
    trial = tmp_path / "t"
    assert len(event_files(trial)) == 1
    scalars = assert_scalars_match_results(trial)
    assert sorted(scalars["episode_reward_mean"]) == [200, 400, 600]  # timesteps_total, not training_iteration
    for tag in ("info/learner/default_policy/policy_loss", "evaluation/episode_reward_mean", "training_iteration"):
        assert len(scalars[tag]) == 3, tag
    _, histograms = read_run(trial)
    assert sorted(histograms["hist_stats/episode_reward"]) == [200, 400, 600]


@pytest.mark.parametrize("file_field, flag, writes", [
    (None, "--no-tensorboard", False),
    ("false", None, False),
    ("false", "--tensorboard", True),
])
def test_rltune_train_tensorboard_flag_and_train_file_field(tmp_path, capsys, file_field, flag, writes):
    train = tmp_path / "train.yaml"
    train.write_text("run: PPO\nenv: CartPole-v1\nname: t\n" + (f"tensorboard: {file_field}\n" if file_field else "")
                     + f"config: {json.dumps(TINY)}\nstop: {{training_iteration: 1}}\n")
    code = main(["train", "-f", str(train), "--results-dir", str(tmp_path / "r")] + ([flag] if flag else []))
    out = capsys.readouterr().out
    assert code == 0
    assert bool(event_files(tmp_path / "r" / "t")) is writes
    assert ("TensorBoard:" in out) is writes


# -- studies ------------------------------------------------------------------------------------------------
def nested_results(config, reporter):
    """Results shaped like a multi-agent trainer's: custom metrics, per-policy rewards, evaluation, a NaN."""
    for i in range(1, config.get("steps", 3) + 1):
        reporter(score=config["x"] * i, timesteps_total=100 * i, custom_metrics={"pole_angle_mean": 0.5 / i},
                 policy_reward_mean={"p0": float(i), "p1": -float(i)}, evaluation={"episode_reward_mean": 2.0 * i},
                 not_yet=float("nan"), label="a string", hist_stats={"episode_reward": [1.0] * i})


def test_a_study_with_tensorboard_writes_one_run_per_trial_under_the_results_dir(tmp_path):
    analysis = tune.run(nested_results, config={"x": tune.grid_search([1, 2])}, metric="score",
                        results_dir=str(tmp_path), name="tb", tensorboard=True, verbose=0)
    assert {t.state for t in analysis.trials} == {"COMPLETE"}
    multiplexer = EventMultiplexer()  # what `tensorboard --logdir RESULTS_DIR` does to find runs
    multiplexer.AddRunsFromDirectory(str(tmp_path))
    assert sorted(multiplexer.Runs()) == ["tb/trial_00000", "tb/trial_00001"]
    for trial in analysis.trials:
        scalars = assert_scalars_match_results(Path(trial.trial_dir))
        x = trial.config["x"]
        assert scalars["score"] == {100: x, 200: 2 * x, 300: 3 * x}
        assert scalars["policy_reward_mean/p1"] == {100: -1.0, 200: -2.0, 300: -3.0}
        assert set(scalars["custom_metrics/pole_angle_mean"]) == set(scalars["evaluation/episode_reward_mean"])
        assert "not_yet" not in scalars and "label" not in scalars


def study_file(tmp_path: Path, extra: str = "") -> Path:
    """A one-trial study of ``nested_results`` (imported from this directory: run from it)."""
    study = tmp_path / "s.yaml"
    study.write_text(f"run: orchestrator.{Path(__file__).stem}:nested_results\nmetric: score\nconfig: {{x: 1, steps: 1}}\n{extra}")
    return study


def test_studies_write_no_event_files_by_default_and_rltune_tune_tensorboard_turns_them_on(tmp_path):
    # benchmarks/README.md: more than 2% of a cheap function trainable's iteration
    assert StudySpec.model_fields["tensorboard"].default is False
    study = study_file(tmp_path)
    assert main(["tune", str(study), "--quiet", "--results-dir", str(tmp_path / "default")]) == 0
    assert (tmp_path / "default" / "s" / "trial_00000" / "result.json").exists()
    assert event_files(tmp_path / "default") == []
    assert main(["tune", str(study), "--quiet", "--results-dir", str(tmp_path / "flag"), "--tensorboard"]) == 0
    assert [p.parent.name for p in event_files(tmp_path / "flag")] == ["trial_00000"]


def test_the_study_file_field_turns_them_on(tmp_path):
    assert main(["tune", str(study_file(tmp_path, "tensorboard: true\n")), "--quiet", "--results-dir", str(tmp_path)]) == 0
    assert [p.parent.name for p in event_files(tmp_path)] == ["trial_00000"]


@pytest.mark.parametrize("command, text", [
    ("tune", "run: PPO\nconfig: {env: CartPole-v1}\ntensorboard: maybe\n"),
    ("train", "run: PPO\nenv: CartPole-v1\ntensorboard: [1]\n"),
])
def test_a_bad_tensorboard_field_is_one_message_and_exit_2(tmp_path, capsys, command, text):
    path = tmp_path / "f.yaml"
    path.write_text(text)
    code = main([command, str(path) if command == "tune" else "-f", *([] if command == "tune" else [str(path)]),
                 "--results-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "line 3: tensorboard: Input should be a valid boolean" in err, err
    assert event_files(tmp_path) == []


def test_tune_run_rejects_a_bad_tensorboard_value_and_passes_every_field():
    with pytest.raises(ConfigError, match="tensorboard: Input should be a valid boolean"):
        tune.run("PPO", config={"env": "CartPole-v1"}, tensorboard="sometimes", verbose=0)
    not_fields = {"run_or_experiment", "resume", "retry_failed", "verbose", "raise_on_failed_trial", "local_dir",
                  "callbacks"}  # local_dir, callbacks: passed as they are (the planner translates them)
    assert set(inspect.signature(tune.run).parameters) - not_fields <= set(FIELDS)  # run() passes them by name


# -- every exit path closes the file; a restart hides the steps after its checkpoint -----------------------
def raises_at_step_3(config, reporter):
    for i in range(1, 4):
        reporter(score=float(i), timesteps_total=10 * i)
    raise ValueError("boom after 3 results")


def test_the_event_file_is_complete_and_closed_after_a_trial_that_raised(tmp_path):
    before = {t.ident for t in threading.enumerate()}
    code = _trial_process.run(None, TrialInit("function", raises_at_step_3, {}, str(tmp_path), tensorboard=True))
    assert code == 1  # the trainable raised: Failed
    writers = [t for t in threading.enumerate() if t.ident not in before and t.name == "rltune-tensorboard"]
    assert writers == []  # joined by close()
    (path,) = event_files(tmp_path)
    open_files = {os.path.realpath(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd")
                  if os.path.exists(f"/proc/self/fd/{fd}")}
    assert str(path.resolve()) not in open_files
    scalars = assert_scalars_match_results(tmp_path)
    assert scalars["score"] == {10: 1.0, 20: 2.0, 30: 3.0}


def fails_once_after_its_checkpoint(config, reporter):
    """Checkpoints at iteration 2 (checkpoint_freq 2), reports 3, then fails once; the retry goes on to 4."""
    start = 0
    if reporter.restored_checkpoint:
        start = json.loads((Path(reporter.restored_checkpoint) / "state.json").read_text())["step"]
    attempt = 2 if (reporter.trial_dir / "failed").exists() else 1
    for step in range(start + 1, 5):
        reporter(score=float(step), attempt=attempt)
        if reporter.should_checkpoint:
            with reporter.checkpoint_dir() as d:
                (Path(d) / "state.json").write_text(json.dumps({"step": step}))
        if step == 3 and attempt == 1:
            (reporter.trial_dir / "failed").write_text("1")
            raise RuntimeError("fails once")


def test_a_trial_retried_from_its_checkpoint_hides_the_steps_its_first_attempt_wrote_after_it(tmp_path):
    analysis = tune.run(fails_once_after_its_checkpoint, metric="score", results_dir=str(tmp_path), name="retry",
                        checkpoint_freq=2, max_failures=1, tensorboard=True, verbose=0)
    trial = analysis.trials[0]
    assert trial.state == "COMPLETE"
    trial_dir = Path(trial.trial_dir)
    assert len(event_files(trial_dir)) == 2  # one per attempt
    scalars = assert_scalars_match_results(trial_dir)  # each step once (read_run checks it)
    assert scalars["attempt"] == {1: 1.0, 2: 1.0, 3: 2.0, 4: 2.0}  # step 3 of the first attempt is hidden


# -- what is written ----------------------------------------------------------------------------------------
def test_numbers_are_flattened_with_slashes_and_the_rest_left_out():
    values, lists = flatten_numbers({
        "a": 1, "b": {"c": 2.5, "d": {"e": np.float32(3.0)}}, "nan": float("nan"), "inf": float("inf"),
        "flag": True, "text": "x", "none": None, "timestamp": 1.7e9, "trial_number": 3,
        "hist": [1.0, float("nan"), 2.0], "mixed": [1, "x"], "empty": [], "nested_list": [[1, 2]],
    })
    assert values == {"a": 1, "b/c": 2.5, "b/d/e": 3.0}
    assert list(lists) == ["hist"] and lists["hist"].tolist() == [1.0, 2.0]
    assert tensorboard_step({"timesteps_total": 500, "training_iteration": 2}) == 500
    assert tensorboard_step({"training_iteration": 2}) == 2
    assert tensorboard_step({"timesteps_total": float("nan"), "training_iteration": 2}) == 2


def test_record_checksums_are_computed_in_c():
    """tensorboardX uses the crc32c package when it imports; its pure-Python fallback is the main cost of an event."""
    from tensorboardX import crc32c

    assert crc32c._crc32c_native is not None


def test_a_function_trial_opening_the_writer_does_not_import_torch(tmp_path):
    """tensorboardX's package imports torch when it can; a trial that never needs torch must not pay for it."""
    import subprocess
    import sys

    code = ("import sys; from rltune._ipc import TrialInit; from rltune.orchestrator._trial_process import _observers;"
            "(w,) = _observers(TrialInit('function', None, {}, sys.argv[1], tensorboard=True)); w.close();"
            "before = 'torch' in sys.modules; import torch; print(before, torch.__name__)")
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert proc.stdout.split() == ["False", "torch"], proc.stderr
    assert len(event_files(tmp_path)) == 1
