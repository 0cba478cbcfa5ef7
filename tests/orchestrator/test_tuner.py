"""Ray Tune 2.x's Tuner on the orchestrator: fit, ResultGrid, kill -9 and Tuner.restore, bad settings."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rltune import air, train, tune
from rltune.errors import CheckpointError, ConfigError

from .test_resume import _iterations, _wait_for_results, module_path
from .tuner_trainables import crashing_once, dict_stepper, failing, stepper

HERE = Path(__file__).parent
REPO = HERE.parents[1]

SCRIPT = """
from rltune import train, tune
from tuner_trainables import stepper

tune.Tuner(
    stepper,
    param_space={{"x": tune.grid_search([1, 2, 3]), "steps": 12, "sleep": 0.1}},
    tune_config=tune.TuneConfig(metric="score", mode="max", max_concurrent_trials=2),
    run_config=train.RunConfig(name="killed", storage_path={results!r}, verbose=0),
).fit()
"""


def test_a_killed_tuner_is_restored_and_its_trials_continue_from_their_checkpoints(tmp_path):
    shutil.copy(HERE / "tuner_trainables.py", tmp_path / "tuner_trainables.py")
    results = tmp_path / "results"
    (tmp_path / "study.py").write_text(SCRIPT.format(results=str(results)))
    proc = subprocess.Popen([sys.executable, str(tmp_path / "study.py")], cwd=tmp_path, env=module_path(tmp_path),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_for_results(results / "killed" / "trial_00000", 4)
    proc.kill()  # kill -9 of the orchestrator (its trials die with it)
    proc.communicate(timeout=30)
    path = results / "killed"
    assert tune.Tuner.can_restore(path) and not tune.Tuner.can_restore(results)
    with pytest.raises(ConfigError, match="trainable: required"):
        tune.Tuner.restore(path)  # a function is not stored: it is given again
    sys.path.insert(0, str(tmp_path))  # the trainable as the script imported it
    try:
        from tuner_trainables import stepper as script_stepper

        grid = tune.Tuner.restore(str(path), trainable=script_stepper).fit()
    finally:
        sys.path.remove(str(tmp_path))
    assert len(grid) == 3 and grid.num_errors == 0 and grid.num_terminated == 3
    assert sorted(r.config["x"] for r in grid) == [1, 2, 3]  # every grid point exactly once
    assert sorted(r.metrics["score"] for r in grid) == [12, 24, 36]
    starts = []
    for result in grid:
        assert _iterations(Path(result.path)) == list(range(1, 13))  # no iteration lost or run twice
        assert result.checkpoint.path.endswith("checkpoint_000012")
        starts.append([int(s) for s in (Path(result.path) / "starts.txt").read_text().split()])
    assert all(s[0] == 0 for s in starts)
    assert any(len(s) == 2 and s[0] == 0 and s[1] > 0 for s in starts)  # continued from train.get_checkpoint()
    assert grid.get_best_result().config["x"] == 3


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    results = tmp_path_factory.mktemp("grid")
    return tune.Tuner(
        tune.with_parameters(_scaled, scale=10),
        param_space={"x": tune.grid_search([1, 2, 3]), "steps": 4},
        tune_config=tune.TuneConfig(metric="score", mode="max"),
        run_config=train.RunConfig(name="grid", storage_path=str(results), verbose=0,
                                   checkpoint_config=train.CheckpointConfig(num_to_keep=2)),
    ).fit()


def _scaled(config, scale):
    """``stepper``'s scores, but x = 2 falls at its last step; ``scale`` comes from tune.with_parameters."""
    if config["x"] != 2:
        return stepper(config)
    for step in range(config["steps"]):
        train.report({"score": scale * (5 - step) if step < 3 else -1.0})


def test_result_grid_sequence_counts_and_results(grid):
    assert len(grid) == 3 and [r.config["x"] for r in grid] == [1, 2, 3] and grid[1].config["x"] == 2
    assert grid.num_errors == 0 and grid.errors == [] and grid.num_terminated == 3
    first = grid[0]
    assert first.metrics["score"] == 4 and first.metrics["training_iteration"] == 4
    assert first.config == {"x": 1, "steps": 4, "seed": 0}  # the trial's seed, as a trainer's config has it (issue 27)
    assert Path(first.path).name == "trial_00000" and first.error is None
    assert first.checkpoint.path.endswith("checkpoint_000004")
    with first.checkpoint.as_directory() as d:
        assert json.loads((Path(d) / "state.json").read_text()) == {"step": 4}
    assert [c.path[-6:] for c, _ in first.best_checkpoints] == ["000003", "000004"]  # num_to_keep=2
    assert [m["score"] for _, m in first.best_checkpoints] == [3, 4]
    frame = first.metrics_dataframe
    assert list(frame["score"]) == [1, 2, 3, 4] and list(frame["training_iteration"]) == [1, 2, 3, 4]
    assert grid[1].checkpoint is None  # it reported no checkpoint


def test_get_best_result_by_metric_mode_and_scope(grid):
    assert grid.get_best_result().config["x"] == 3  # the TuneConfig's metric and mode, last result
    assert grid.get_best_result(metric="score", mode="min").config["x"] == 2  # -1 at its end
    assert grid.get_best_result(scope="all").config["x"] == 2  # 50 at its first step
    assert grid.get_best_result(scope="avg").config["x"] == 2  # (50 + 40 + 30 - 1) / 4
    assert grid.get_best_result(scope="last-5-avg").config["x"] == 2
    assert grid.get_best_result(metric="step", mode="max").config["x"] in (1, 3)
    with pytest.raises(ConfigError, match="scope must be one of"):
        grid.get_best_result(scope="best")
    with pytest.raises(ConfigError, match="no trial reported a finite value of 'nothing'"):
        grid.get_best_result(metric="nothing")


def test_get_dataframe_last_or_best_rows(grid):
    last = grid.get_dataframe()
    assert list(last["score"]) == [4, -1, 12] and list(last["config/x"]) == [1, 2, 3]
    assert list(last["logdir"]) == [r.path for r in grid]
    best = grid.get_dataframe(filter_metric="score", filter_mode="max")
    assert list(best["score"]) == [4, 50, 12]
    with pytest.raises(ConfigError, match="filter_metric and filter_mode go together"):
        grid.get_dataframe(filter_metric="score")


def test_failed_trials_are_errors_and_the_grid_is_returned(tmp_path):
    grid = tune.Tuner(failing, param_space={"x": tune.grid_search([1, 2])},
                      tune_config=tune.TuneConfig(metric="score"),
                      run_config=train.RunConfig(name="fails", storage_path=str(tmp_path), verbose=0,
                                                 failure_config=train.FailureConfig(max_failures=1))).fit()
    assert grid.num_errors == 1 and grid.num_terminated == 1
    assert "ValueError: x is 2" in str(grid.errors[0]) and grid[1].error is grid.errors[0]
    assert (Path(grid[1].path) / "error.txt").read_text().count("ValueError: x is 2") == 2  # retried once
    all_fail = tune.Tuner(failing, param_space={"x": 2}, tune_config=tune.TuneConfig(metric="score"),
                          run_config=train.RunConfig(name="all_fail", storage_path=str(tmp_path), verbose=0)).fit()
    assert all_fail.num_errors == 1 and len(all_fail) == 1  # not a StudyFailedError: Ray returns the grid


def test_dict_checkpoints_through_air_session(tmp_path):
    grid = tune.Tuner(dict_stepper, param_space={"x": 2, "steps": 3},
                      tune_config=tune.TuneConfig(metric="score", mode="max"),
                      run_config=air.RunConfig(name="dicts", local_dir=str(tmp_path), verbose=0)).fit()
    assert grid[0].checkpoint.to_dict() == {"step": 3} and grid[0].metrics["score"] == 6


def test_checkpoint_score_attribute_keeps_the_best_and_the_latest(tmp_path):
    grid = tune.Tuner(
        _scaled, param_space={"x": 2, "steps": 4},
        tune_config=tune.TuneConfig(metric="score", mode="max"),
        run_config=train.RunConfig(name="scored", storage_path=str(tmp_path), verbose=0,
                                   checkpoint_config=train.CheckpointConfig(
                                       num_to_keep=1, checkpoint_score_attribute="score")),
    )
    grid = grid.fit()  # x = 2 reports no checkpoints: nothing to keep
    assert grid[0].best_checkpoints == []
    scored = tune.Tuner(
        stepper, param_space={"x": -1, "steps": 4},
        tune_config=tune.TuneConfig(metric="score", mode="max"),
        run_config=train.RunConfig(name="scored_min", storage_path=str(tmp_path), verbose=0,
                                   checkpoint_config=train.CheckpointConfig(
                                       num_to_keep=1, checkpoint_score_attribute="score",
                                       checkpoint_score_order="max")),
    ).fit()
    kept = [(c.path[-6:], m["score"]) for c, m in scored[0].best_checkpoints]
    assert kept == [("000001", -1), ("000004", -4)]  # the best score, then the latest (kept for a resume)


def test_with_resources_holds_cpus_of_the_budget(tmp_path):
    seen = []
    tuner = tune.Tuner(tune.with_resources(stepper, {"cpu": 2}), param_space={"x": 1, "steps": 1},
                       tune_config=tune.TuneConfig(metric="score"),
                       run_config=train.RunConfig(name="resources", storage_path=str(tmp_path), verbose=0))
    from rltune.orchestrator import _runner

    original = _runner.StudyRunner._launch

    def launch(self, a):
        seen.append(a.cpus)
        return original(self, a)

    _runner.StudyRunner._launch = launch
    try:
        grid = tuner.fit()
    finally:
        _runner.StudyRunner._launch = original
    assert seen == [2] and grid[0].metrics["score"] == 1


def test_the_1x_reporter_style_still_runs_in_a_tuner(tmp_path):
    from .trainables import counter

    grid = tune.Tuner(counter, param_space={"x": 3, "steps": 2}, tune_config=tune.TuneConfig(metric="score"),
                      run_config=train.RunConfig(name="old_style", storage_path=str(tmp_path), verbose=0)).fit()
    assert grid[0].metrics["score"] == 6 and grid[0].metrics["training_iteration"] == 2


@pytest.mark.parametrize("make, message", [
    (lambda: tune.TuneConfig(num_sample=2), "invalid TuneConfig: num_sample: unknown argument; did you mean "
                                            "'num_samples'?"),
    (lambda: tune.TuneConfig(num_samples="many"), "invalid TuneConfig: num_samples: Input should be a valid integer"),
    (lambda: tune.TuneConfig(mode="maximize"), "invalid TuneConfig: mode: Input should be 'max' or 'min'"),
    (lambda: tune.TuneConfig(trial_name_creator=str), "invalid TuneConfig: trial_name_creator: not supported"),
    (lambda: train.RunConfig(storage="x"), "invalid RunConfig: storage: unknown argument; did you mean "
                                           "'storage_path'?"),
    (lambda: train.RunConfig(stop=lambda trial_id, result: False), "invalid RunConfig: stop: Input should be a valid "
                                                                   "dictionary"),
    (lambda: train.RunConfig(verbose=True), "invalid RunConfig: verbose: a bool is not a number here"),
    (lambda: train.CheckpointConfig(num_to_keep=0), "invalid CheckpointConfig: num_to_keep: Input should be greater "
                                                    "than or equal to 1"),
    (lambda: train.CheckpointConfig(checkpoint_score_order="best"), "invalid CheckpointConfig: checkpoint_score_order"),
    (lambda: train.FailureConfig(fail_fast=True), "invalid FailureConfig: fail_fast: not supported"),
    (lambda: tune.Tuner(stepper, tune_config={"metric": "score"}), "invalid Tuner: tune_config: must be a "
                                                                   "tune.TuneConfig, but got dict"),
    (lambda: tune.Tuner(stepper, param_space=[1]), "invalid Tuner: param_space: must be a dict"),
    (lambda: tune.Tuner(), "invalid Tuner: trainable: required"),
    (lambda: tune.with_parameters(stepper, data=1), "invalid tune.with_parameters: 'stepper' takes no argument data"),
    (lambda: tune.with_resources(stepper, 2), "invalid tune.with_resources resources: must be a dict"),
])
def test_bad_settings_raise_a_config_error_naming_them(make, message):
    with pytest.raises(ConfigError) as caught:
        make()
    assert str(caught.value).startswith(message), str(caught.value)


def test_bad_settings_found_by_the_study_name_their_field(tmp_path):
    tuner = tune.Tuner(stepper, param_space={"x": tune.uniform(1, 0)},
                       run_config=train.RunConfig(name="bad", storage_path=str(tmp_path), verbose=0,
                                                  callbacks=[object()]))
    with pytest.raises(ConfigError, match="callbacks: object is not a tune.Callback"):
        tuner.fit()
    with pytest.raises(ConfigError, match="config.x.uniform"):
        tune.Tuner(stepper, param_space={"x": tune.uniform(1, 0)},
                   run_config=train.RunConfig(name="bad", storage_path=str(tmp_path), verbose=0)).fit()
    with pytest.raises(ConfigError, match="resume_errored: must be True or False"):
        tune.Tuner.restore(tmp_path, stepper, resume_errored="yes")
    (tmp_path / "study.json").write_text("{}")
    (tmp_path / "tuner.json").write_text('{"tune_config": ')  # cut short
    with pytest.raises(ConfigError, match="tuner.json' cannot be read"):
        tune.Tuner.restore(tmp_path, stepper)


def test_report_outside_a_trial_says_where_it_works(monkeypatch):
    from rltune.orchestrator import _reporter

    monkeypatch.setattr(_reporter, "_current", None)  # other tests run trials in this process
    for call in (lambda: train.report({"score": 1}), train.get_checkpoint, train.get_context):
        with pytest.raises(RuntimeError, match="only available inside a trial started by tune.run or Tuner.fit"):
            call()


PPO_CONFIG = {"env": "CartPole-v1", "num_workers": 0, "train_batch_size": 64, "sgd_minibatch_size": 32,
              "num_sgd_iter": 1, "rollout_fragment_length": 32, "model": {"fcnet_hiddens": [16]}}
MEDIAN = {"type": "median", "n_startup_trials": 1, "n_warmup_steps": 0}


def test_a_tuner_over_ppo_runs_the_study_tune_run_runs(tmp_path):
    space = {**PPO_CONFIG, "lr": tune.grid_search([1e-3, 1e-4]), "gamma": tune.choice([0.9, 0.99])}
    stop = {"training_iteration": 2}
    grid = tune.Tuner(
        "PPO", param_space=space,
        tune_config=tune.TuneConfig(metric="episode_reward_mean", mode="max", num_samples=2,
                                    search_alg={"type": "random", "seed": 3}, scheduler=MEDIAN),
        run_config=train.RunConfig(name="tuner", storage_path=str(tmp_path), stop=stop, verbose=0,
                                   checkpoint_config=train.CheckpointConfig(checkpoint_frequency=1, num_to_keep=1)),
    ).fit()
    analysis = tune.run("PPO", config=space, metric="episode_reward_mean", mode="max", num_samples=2,
                        search_alg={"type": "random", "seed": 3}, scheduler=MEDIAN, name="run",
                        results_dir=str(tmp_path), stop=stop, checkpoint_freq=1, keep_checkpoints_num=1, verbose=0)
    assert len(grid) == len(analysis.trials) == 4  # 2 grid points x num_samples 2
    assert [r.state for r in grid] == [t.state for t in analysis.trials]
    assert [r.config for r in grid] == [t.config for t in analysis.trials]  # same seeds, same draws
    assert [r.metrics["episode_reward_mean"] for r in grid] == [t.last_result["episode_reward_mean"]
                                                                 for t in analysis.trials]
    best = grid.get_best_result()
    assert best.config == analysis.best_config
    assert best.metrics["episode_reward_mean"] == analysis.best_result["episode_reward_mean"]
    assert Path(best.checkpoint.path).name == Path(analysis.best_checkpoint).name
    assert set(best.metrics) == set(analysis.best_result)
    for result in grid:
        assert len(result.best_checkpoints) == 1 and result.best_checkpoints[0][0] == result.checkpoint
    assert (tmp_path / "tuner" / "tuner.json").is_file() and tune.Tuner.can_restore(tmp_path / "tuner")


def test_checkpoints_of_directories_and_dicts(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "w.txt").write_text("weights")
    checkpoint = train.Checkpoint.from_directory(tmp_path / "d")
    assert os.fspath(checkpoint) == str(tmp_path / "d")
    copy = Path(checkpoint.to_directory(tmp_path / "copy"))
    assert (copy / "w.txt").read_text() == "weights"
    plain = train.Checkpoint.from_dict({"step": 3, "name": "a", "sizes": [1, 2]})
    with plain.as_directory() as d:
        assert json.loads((Path(d) / "dict_checkpoint.json").read_text())["step"] == 3
    assert train.Checkpoint(plain.to_directory(tmp_path / "plain")).to_dict() == {"step": 3, "name": "a",
                                                                                  "sizes": [1, 2]}
    import torch

    tensors = train.Checkpoint.from_dict({"w": torch.ones(2), "step": (1, 2)})
    read = train.Checkpoint(tensors.to_directory(tmp_path / "tensors")).to_dict()  # weights_only: no code runs
    assert torch.equal(read["w"], torch.ones(2)) and tuple(read["step"]) == (1, 2)
    with pytest.raises(CheckpointError, match="is not a directory"):
        train.Checkpoint.from_directory(tmp_path / "missing")
    with pytest.raises(CheckpointError, match="holds no dict"):
        checkpoint.to_dict()


def test_the_tuner_example_runs_and_a_second_run_restores_it(tmp_path):
    script = REPO / "examples" / "tune_tuner_function.py"
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    runs = [subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                           env=env) for _ in range(2)]
    for proc in runs:
        assert proc.returncode == 0, proc.stderr
        assert "ResultGrid(12 results, 0 errors" in proc.stdout and "terminated: 12 errors: 0" in proc.stdout
    assert runs[0].stdout.splitlines()[-8:] == runs[1].stdout.splitlines()[-8:]  # the same study, nothing re-run
    assert "has run all its 12 trial(s)" in runs[1].stdout


def test_a_restarted_trial_gets_its_last_checkpoint_from_get_checkpoint(tmp_path):
    grid = tune.Tuner(crashing_once, param_space={"steps": 5, "crash_at": 3},
                      tune_config=tune.TuneConfig(metric="score", mode="max"),
                      run_config=train.RunConfig(name="retried", storage_path=str(tmp_path), verbose=0,
                                                 failure_config=train.FailureConfig(max_failures=1))).fit()
    assert grid.num_errors == 0 and grid[0].metrics["score"] == 5
    assert (Path(grid[0].path) / "starts.txt").read_text().split() == ["0", "3"]
    assert _iterations(Path(grid[0].path)) == [1, 2, 3, 4, 5]


def test_with_resources_of_a_trainer_name_is_planned_as_resources_per_trial():
    from rltune.orchestrator._spec import make_plan

    plan = make_plan({"run": tune.with_resources("PPO", {"cpu": 3}), "config": {"env": "CartPole-v1"}})
    assert plan.trainable.name == "PPO" and plan.cpus_per_trial(plan.config) == 3
    # RLlib's custom_experiment.py: with_resources(fn, PPO.default_resource_request(config)), or a function of the config
    from rltune.trainers import PPO

    plan = make_plan({"run": tune.with_resources(stepper, PPO.default_resource_request({"num_workers": 2})),
                      "config": {"x": 1}})
    assert plan.cpus_per_trial(plan.config) == 3
    plan = make_plan({"run": tune.with_resources(stepper, lambda config: {"cpu": config["x"] + 1}), "config": {"x": 1}})
    assert plan.cpus_per_trial(plan.config) == 2
    with pytest.raises(ConfigError, match="resources_per_trial: given both here and by tune.with_resources"):
        make_plan({"run": tune.with_resources("PPO", {"cpu": 3}), "config": {"env": "CartPole-v1"},
                   "resources_per_trial": {"cpu": 2}})


class Recorder(tune.Callback):
    """Every hook call, as ``(hook, trial number or None)``; ``on_trial_result`` raises on a result of 99."""

    def __init__(self):
        self.calls = []

    def setup(self, stop=None, num_samples=None, total_num_samples=None, **info):
        self.calls.append(("setup", total_num_samples))

    def on_trial_start(self, iteration, trials, trial, **info):
        self.calls.append(("start", trial.number))

    def on_trial_result(self, iteration, trials, trial, result, **info):
        self.calls.append(("result", trial.number, result["score"]))

    def on_checkpoint(self, iteration, trials, trial, checkpoint, **info):
        self.calls.append(("checkpoint", trial.number, Path(checkpoint.path).name))

    def on_trial_complete(self, iteration, trials, trial, **info):
        self.calls.append(("complete", trial.number, trial.status))

    def on_trial_error(self, iteration, trials, trial, **info):
        self.calls.append(("error", trial.number, trial.status))

    def on_experiment_end(self, trials, **info):
        self.calls.append(("end", sorted(t.trial_id for t in trials)))


class Raising(tune.Callback):
    def on_trial_result(self, iteration, trials, trial, result, **info):
        raise KeyError("a bug in a callback")


def test_run_config_callbacks_get_the_study_events_in_order(tmp_path):
    recorder = Recorder()
    grid = tune.Tuner(failing, param_space={"x": tune.grid_search([1, 2])}, tune_config=tune.TuneConfig(metric="score"),
                      run_config=train.RunConfig(name="called", storage_path=str(tmp_path), verbose=0,
                                                 callbacks=[Raising(), recorder])).fit()
    assert grid.num_errors == 1  # the raising callback was dropped; the study went on
    assert recorder.calls == [("setup", 2), ("start", 0), ("result", 0, 1), ("complete", 0, "TERMINATED"),
                              ("start", 1), ("result", 1, 2), ("error", 1, "ERROR"),
                              ("end", ["called_00000", "called_00001"])]
    recorder.calls.clear()
    tune.Tuner(stepper, param_space={"x": 1, "steps": 2}, tune_config=tune.TuneConfig(metric="score"),
               run_config=train.RunConfig(name="checkpointed", storage_path=str(tmp_path), verbose=0,
                                          callbacks=[recorder])).fit()
    assert ("checkpoint", 0, "checkpoint_000002") in recorder.calls
    assert recorder.calls.index(("checkpoint", 0, "checkpoint_000001")) < recorder.calls.index(("result", 0, 1))


@pytest.mark.parametrize("how, first_start", [("resume_errored", 3), ("restart_errored", 0)])
def test_restore_retries_failed_trials_from_their_checkpoint_or_from_scratch(tmp_path, how, first_start):
    settings = dict(param_space={"steps": 4, "crash_at": 3, "marker": str(tmp_path / "crashed")},
                    tune_config=tune.TuneConfig(metric="score", mode="max"))
    grid = tune.Tuner(crashing_once, **settings, run_config=train.RunConfig(
        name="errored", storage_path=str(tmp_path), verbose=0)).fit()
    assert grid.num_errors == 1
    grid = tune.Tuner.restore(grid.experiment_path, crashing_once, **{how: True}).fit()
    assert len(grid) == 1 and grid.num_errors == 0 and grid[0].metrics["score"] == 4  # the retry, counted once
    assert Path(grid[0].path).name == "trial_00001"
    assert (Path(grid[0].path) / "starts.txt").read_text().split() == [str(first_start)]
    assert _iterations(Path(grid[0].path)) == [1, 2, 3, 4]


def test_get_best_result_of_a_one_trial_study_needs_no_metric(tmp_path):
    """Ray's: the only trial is the best (RLlib's restore_1_of_n_agents_from_checkpoint.py reads it that way)."""
    one = tune.Tuner(stepper, param_space={"x": 1, "steps": 2},
                     run_config=train.RunConfig(name="one", storage_path=str(tmp_path), verbose=0)).fit()
    assert one.get_best_result().metrics["score"] == 2 and one.get_best_result().checkpoint is not None
    two = tune.Tuner(stepper, param_space={"x": tune.grid_search([1, 2]), "steps": 1},
                     run_config=train.RunConfig(name="two", storage_path=str(tmp_path), verbose=0)).fit()
    with pytest.raises(ConfigError, match="no metric"):
        two.get_best_result()


def test_a_tuner_over_ppo_with_ray_tunes_asha_and_optuna_search_runs_what_tune_run_does(tmp_path):
    """Issue 26's acceptance: Ray Tune's ASHAScheduler and OptunaSearch in a TuneConfig over "PPO" give the trials,
    pruning and best result the same objects give through tune.run."""
    space = {**PPO_CONFIG, "lr": tune.loguniform(1e-4, 1e-2), "gamma": tune.choice([0.9, 0.99])}
    stop = {"training_iteration": 3}

    def searcher_and_scheduler():
        return (tune.OptunaSearch(seed=7),
                tune.ASHAScheduler(time_attr="training_iteration", grace_period=1, reduction_factor=2, max_t=2))

    search, asha = searcher_and_scheduler()
    grid = tune.Tuner(
        "PPO", param_space=space,
        tune_config=tune.TuneConfig(metric="episode_reward_mean", mode="max", num_samples=4,
                                    search_alg=search, scheduler=asha),
        run_config=train.RunConfig(name="tuner_asha", storage_path=str(tmp_path), stop=stop, verbose=0),
    ).fit()
    search, asha = searcher_and_scheduler()
    analysis = tune.run("PPO", config=space, metric="episode_reward_mean", mode="max", num_samples=4,
                        search_alg=search, scheduler=asha, name="run_asha", results_dir=str(tmp_path), stop=stop,
                        verbose=0)
    assert len(grid) == len(analysis.trials) == 4
    assert [r.state for r in grid] == [t.state for t in analysis.trials]
    assert [r.config for r in grid] == [t.config for t in analysis.trials]  # the same TPE draws from the same seed
    iterations = [r.metrics["training_iteration"] for r in grid]
    assert iterations == [t.last_result["training_iteration"] for t in analysis.trials]
    # ASHA in force on both paths: its max_t (2) ends the trials before the study's stop (3), or a rung pruned one
    assert all(n == 2 or r.state == "PRUNED" for n, r in zip(iterations, grid))
    assert grid.get_best_result().config == analysis.best_config
