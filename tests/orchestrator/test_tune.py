"""tune.run: grid points, pruning, crash isolation, timeouts, retries, analysis; counted in Optuna's storage."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import optuna
import pytest
import yaml

from rltune import tune
from rltune.errors import ConfigError

from .trainables import counter, misbehaving


def _states(analysis) -> dict[int, str]:
    return {t.number: t.state for t in analysis.trials}


def test_import_rltune_is_cheap_and_tune_is_lazy():
    code = (
        "import sys, rltune; before = {'optuna', 'torch', 'rltune.tune'} & set(sys.modules);"
        "from rltune import tune; import rltune as r; assert r.tune is tune;"
        "print(sorted(before), 'torch' in sys.modules)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.stdout.split() == ["[]", "False"], proc.stderr


def test_grid_points_each_run_exactly_once_with_two_jobs(tmp_path):
    analysis = tune.run(
        counter,
        config={"x": tune.grid_search([1, 2, 3]), "sleep": 0.05, "y": tune.grid_search(["a", "b"]), "steps": 3},
        metric="score",
        n_jobs=2,
        results_dir=str(tmp_path),
        name="grid",
        verbose=0,
    )
    points = sorted((t.config["x"], t.config["y"]) for t in analysis.trials)
    assert points == [(x, y) for x in (1, 2, 3) for y in ("a", "b")]
    assert set(_states(analysis).values()) == {"COMPLETE"}
    assert len(analysis.study.trials) == 6
    assert analysis.best_config["x"] == 3 and analysis.best_result["score"] == 9
    # two at a time: some trials overlapped in time
    spans = []
    for t in analysis.trials:
        lines = [json.loads(line) for line in (Path(t.trial_dir) / "result.json").read_text().splitlines()]
        spans.append((lines[0]["timestamp"] - lines[0]["time_this_iter_s"], lines[-1]["timestamp"]))
    assert any(a[0] < b[1] and b[0] < a[1] for i, a in enumerate(spans) for b in spans[i + 1:])
    assert max(sum(1 for s in spans if s[0] <= t0 < s[1]) for t0, _ in spans) <= 2


def test_grid_times_num_samples_and_nested_choice_of_lists(tmp_path):
    analysis = tune.run(
        counter,
        config={"x": tune.grid_search([1, 2]), "model": {"hiddens": tune.choice([[64, 64], [256, 256]])}, "steps": 2},
        num_samples=2,
        metric="score",
        search_alg="random",
        seed=3,
        results_dir=str(tmp_path),
        name="samples",
        verbose=0,
    )
    assert sorted(t.config["x"] for t in analysis.trials) == [1, 1, 2, 2]
    assert all(t.config["model"]["hiddens"] in ([64, 64], [256, 256]) for t in analysis.trials)
    stored = {t.number: (t.user_attrs["grid_index"], t.user_attrs["sample_index"]) for t in analysis.study.trials}
    assert sorted(stored.values()) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert sorted(t.seed for t in analysis.trials) == [3, 4, 5, 6]  # seed + trial number, recorded


def test_tpe_with_median_pruner_prunes_the_clearly_bad_trial(tmp_path):
    # three good trials (score 10 * step) complete first, then a bad one (score ~0) is pruned at its first report
    analysis = tune.run(
        counter,
        config={"x": tune.grid_search([10, 10, 10, 0]), "noise": tune.uniform(0.0, 0.1), "steps": 8},
        metric="score",
        search_alg={"type": "tpe", "n_startup_trials": 2},
        scheduler={"type": "median", "n_startup_trials": 3},
        checkpoint_freq=1,
        seed=0,
        results_dir=str(tmp_path),
        name="prune",
        verbose=0,
    )
    states = {t.config["x"]: [] for t in analysis.trials}
    for t in analysis.trials:
        states[t.config["x"]].append(t.state)
    assert states == {10: ["COMPLETE"] * 3, 0: ["PRUNED"]}
    bad = next(t for t in analysis.trials if t.config["x"] == 0)
    assert bad.training_iteration == 1
    assert bad.checkpoint is not None and bad.checkpoint.endswith("checkpoint_000001")  # a pruned trial keeps its checkpoint
    assert analysis.study.trials[bad.number].state == optuna.trial.TrialState.PRUNED
    assert analysis.study.trials[0].intermediate_values == {s: 10.0 * s + analysis.trials[0].config["noise"] for s in range(1, 9)}


def test_asha_prunes_bad_trials_too(tmp_path):
    analysis = tune.run(
        counter,
        config={"x": tune.grid_search([5, 6, 7, 0, 0]), "steps": 9},
        metric="score",
        scheduler={"type": "asha", "min_resource": 1, "reduction_factor": 2},
        results_dir=str(tmp_path),
        name="asha",
        verbose=0,
    )
    assert [t.state for t in analysis.trials if t.config["x"] == 0] == ["PRUNED", "PRUNED"]
    assert analysis.best_config["x"] in (5, 6, 7)


def test_a_raising_and_an_exiting_trial_fail_and_the_study_goes_on(tmp_path):
    analysis = tune.run(
        misbehaving,
        config={"mode": tune.grid_search(["ok", "raise", "exit", "ok"])},
        metric="score",
        n_jobs=2,
        results_dir=str(tmp_path),
        name="crash",
        verbose=0,
    )
    by_mode = {}
    for t in analysis.trials:
        by_mode.setdefault(t.config["mode"], []).append(t)
    assert [t.state for t in by_mode["ok"]] == ["COMPLETE", "COMPLETE"]
    raised, exited = by_mode["raise"][0], by_mode["exit"][0]
    assert raised.state == exited.state == "FAIL"
    error = (Path(raised.trial_dir) / "error.txt").read_text()
    assert "Traceback" in error and "ValueError: boom at step 2" in error and "misbehaving" in error
    assert "ValueError: boom at step 2" in analysis.study.trials[raised.number].user_attrs["error"]
    assert "exited with code 3" in exited.error and "exited with code 3" in (Path(exited.trial_dir) / "error.txt").read_text()
    assert raised.last_result["training_iteration"] == 2


def test_trial_timeout_kills_a_hung_trial(tmp_path):
    analysis = tune.run(
        misbehaving,
        config={"mode": tune.grid_search(["hang", "ok"])},
        metric="score",
        trial_timeout_s=2.0,
        n_jobs=2,
        results_dir=str(tmp_path),
        name="hang",
        verbose=0,
    )
    hung, ok = sorted(analysis.trials, key=lambda t: t.config["mode"] != "hang")
    assert hung.state == "FAIL" and "trial_timeout_s = 2s" in hung.error
    assert ok.state == "COMPLETE"


def test_max_failures_restarts_a_failed_trial_from_its_checkpoint(tmp_path):
    analysis = tune.run(
        misbehaving,
        config={"mode": "flaky", "steps": 5},
        metric="score",
        max_failures=1,
        checkpoint_freq=1,
        results_dir=str(tmp_path),
        name="retry",
        verbose=0,
    )
    (trial,) = analysis.trials
    assert trial.state == "COMPLETE" and trial.value == 5.0
    lines = [json.loads(x)["training_iteration"] for x in (Path(trial.trial_dir) / "result.json").read_text().splitlines()]
    assert lines == [1, 2, 3, 4, 5]  # restarted at the checkpoint of iteration 2, no iteration twice
    assert "RuntimeError: flaky failure" in (Path(trial.trial_dir) / "error.txt").read_text()
    assert analysis.study.trials[0].user_attrs["num_failures"] == 1


def test_stop_criteria_end_trials_and_results_reach_optuna(tmp_path):
    analysis = tune.run(
        counter,
        config={"x": 2.0, "steps": 100},
        stop={"score": 7},
        metric="score",
        results_dir=str(tmp_path),
        name="stop",
        verbose=0,
    )
    (trial,) = analysis.trials
    assert trial.state == "COMPLETE" and trial.value == 8.0 and trial.training_iteration == 4
    assert analysis.study.trials[0].intermediate_values == {1: 2.0, 2: 4.0, 3: 6.0, 4: 8.0}
    assert trial.checkpoint.endswith("checkpoint_000004")  # checkpoint_at_end


def test_a_metric_missing_from_results_is_named_with_the_closest_key(tmp_path):
    with pytest.raises(ConfigError, match="'scor' is not a key of the trial's results; did you mean 'score'"):
        tune.run(counter, config={"steps": 2}, metric="scor", results_dir=str(tmp_path), name="m", verbose=0)


def test_an_existing_study_needs_resume(tmp_path):
    kwargs = dict(config={"steps": 1}, metric="score", results_dir=str(tmp_path), name="twice", verbose=0)
    tune.run(counter, **kwargs)
    with pytest.raises(ConfigError, match="already exists.*--resume"):
        tune.run(counter, **kwargs)
    again = tune.run(counter, resume=True, **kwargs)  # nothing left to run
    assert len(again.trials) == 1


def test_best_config_file_reruns_with_rltune_train(tmp_path):
    analysis = tune.run(
        "PPO",
        config={"env": "CartPole-v1", "num_workers": 0, "train_batch_size": 128, "rollout_fragment_length": 64,
                "sgd_minibatch_size": 64, "num_sgd_iter": 1, "model": {"fcnet_hiddens": [8]},
                "lr": tune.grid_search([1e-3, 1e-2])},
        stop={"training_iteration": 2},
        results_dir=str(tmp_path),
        name="ppo",
        verbose=0,
    )
    assert [t.state for t in analysis.trials] == ["COMPLETE", "COMPLETE"]
    path = analysis.study_dir / "best_config.yaml"
    spec = yaml.safe_load(path.read_text())
    assert spec["run"] == "PPO" and spec["config"]["seed"] == analysis.best_trial.seed
    rltune = Path(sys.executable).parent / "rltune"
    proc = subprocess.run([str(rltune), "train", "-f", str(path), "--results-dir", str(tmp_path / "again")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    rerun = [json.loads(x) for x in next((tmp_path / "again").glob("*/result.json")).read_text().splitlines()]
    assert rerun[-1]["episode_reward_mean"] == pytest.approx(analysis.best_result["episode_reward_mean"])


def test_a_study_tuned_on_the_evaluation_of_its_trials(tmp_path):
    """metric on evaluation/episode_reward_mean (evaluation_interval); the trials stop before their 2nd evaluation."""
    analysis = tune.run(
        "PPO",
        metric="evaluation/episode_reward_mean",
        stop={"training_iteration": 3},
        config={"env": "CartPole-v1", "num_workers": 0, "train_batch_size": 100, "rollout_fragment_length": 50,
                "num_envs_per_worker": 2, "sgd_minibatch_size": 100, "num_sgd_iter": 1, "seed": 0,
                "evaluation_interval": 5, "evaluation_duration": 2,
                "lr": tune.grid_search([0.01, 0.001])},
        scheduler="median",
        results_dir=str(tmp_path),
        verbose=0,
    )
    assert [t.state for t in analysis.trials] == ["COMPLETE"] * 2
    for t in analysis.trials:
        evaluation = t.last_result["evaluation"]
        assert evaluation["episodes_this_iter"] == 0  # iteration 3 carries iteration 1's evaluation
        assert t.value == evaluation["episode_reward_mean"] >= 8  # CartPole: at least 8 steps an episode
        frozen = analysis.study.trials[t.number]
        assert sorted(frozen.intermediate_values) == [1, 2, 3]
        assert frozen.intermediate_values[3] == frozen.intermediate_values[2] == t.value
    assert analysis.best_trial.value == max(t.value for t in analysis.trials)


def test_envs_the_users_script_registers_reach_the_trial_processes(tmp_path):
    """register_env (a lambda) and gymnasium.register run in this process only; every trial builds the env."""
    import gymnasium as gym

    from rltune.trainers import register_env

    register_env("rltune-test-short-cartpole", lambda ctx: gym.make("CartPole-v1", max_episode_steps=5))
    gym_id = "RltuneTestScriptCartPole-v0"
    gym.register(gym_id, entry_point="gymnasium.envs.classic_control.cartpole:CartPoleEnv", max_episode_steps=5)
    try:
        analysis = tune.run(
            "PPO",
            stop={"training_iteration": 1},
            config={"env": tune.grid_search(["rltune-test-short-cartpole", gym_id]),
                    "train_batch_size": 40, "rollout_fragment_length": 40, "sgd_minibatch_size": 40,
                    "num_sgd_iter": 1, "model": {"fcnet_hiddens": [8]}},
            metric="episode_len_mean",
            results_dir=str(tmp_path),
            verbose=0,
        )
    finally:
        gym.registry.pop(gym_id, None)
    assert [t.state for t in analysis.trials] == ["COMPLETE"] * 2
    assert all(t.last_result["episode_len_mean"] <= 5 for t in analysis.trials)  # the registered limits


def test_an_env_creator_that_cannot_reach_the_trial_process_is_a_config_error(tmp_path):
    import threading

    import gymnasium as gym

    from rltune.trainers import register_env

    lock = threading.Lock()  # cannot be pickled, so neither can a creator holding it
    register_env("rltune-test-unpicklable", lambda ctx, lock=lock: gym.make("CartPole-v1"))
    with pytest.raises(ConfigError, match="env 'rltune-test-unpicklable' cannot be sent to the trial process"):
        tune.run("PPO", config={"env": "rltune-test-unpicklable"}, stop={"training_iteration": 1},
                 results_dir=str(tmp_path), verbose=0)


def test_the_seed_example_as_written(tmp_path):
    """The issue's example, with a tiny budget: stop after one iteration of a small batch."""
    analysis = tune.run(
        "PPO",
        stop={"training_iteration": 1},
        config={"env": "CartPole-v1", "num_gpus": 0, "num_workers": 1, "train_batch_size": 200,
                "rollout_fragment_length": 100, "sgd_minibatch_size": 100, "num_sgd_iter": 1,
                "lr": tune.grid_search([0.01, 0.001, 0.0001])},
        results_dir=str(tmp_path),
        verbose=0,
    )
    assert sorted(t.config["lr"] for t in analysis.trials) == [0.0001, 0.001, 0.01]
    assert [t.state for t in analysis.trials] == ["COMPLETE"] * 3
    assert all(t.last_result["training_iteration"] == 1 and t.last_result["timesteps_total"] == 200 for t in analysis.trials)
    assert analysis.best_config["lr"] in (0.01, 0.001, 0.0001)
    assert analysis.best_result["episode_reward_mean"] == analysis.best_trial.value
    assert Path(analysis.best_checkpoint, "rltune_checkpoint.json").exists()
    assert isinstance(analysis.study, optuna.Study) and analysis.study.study_name.startswith("PPO_")


def test_the_seed_example_as_a_study_file(tmp_path, capsys):
    from rltune.orchestrator.cli import main

    repo = Path(__file__).resolve().parents[2]
    code = main(["tune", str(repo / "studies" / "cartpole-ppo-grid.yaml"), "--results-dir", str(tmp_path), "--quiet",
                 "--stop", '{"training_iteration": 1}', "--config", '{"train_batch_size": 200, "num_sgd_iter": 1, "num_workers": 0}'])
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.count(" COMPLETE after 1 iterations") == 3
    assert "best config: " + str(tmp_path / "cartpole-ppo-grid" / "best_config.yaml") in out


def test_keep_checkpoints_num_and_an_sqlite_storage(tmp_path):
    analysis = tune.run(
        counter,
        config={"steps": 5},
        metric="score",
        checkpoint_freq=1,
        keep_checkpoints_num=2,
        storage=f"sqlite:///{tmp_path / 'studies.db'}",
        results_dir=str(tmp_path),
        name="sqlite",
        verbose=0,
    )
    (trial,) = analysis.trials
    assert sorted(p.name for p in Path(trial.trial_dir).glob("checkpoint_*")) == ["checkpoint_000004", "checkpoint_000005"]
    assert optuna.load_study(study_name="sqlite", storage=f"sqlite:///{tmp_path / 'studies.db'}").trials[0].value == 5.0
    from rltune.orchestrator.cli import main

    assert main(["show", "sqlite", "--results-dir", str(tmp_path)]) == 0


def test_a_stop_key_missing_from_results_exits_2_from_the_cli(tmp_path, capsys, monkeypatch):
    from rltune.orchestrator.cli import main

    (tmp_path / "study_trainables.py").write_text((Path(__file__).parent / "trainables.py").read_text())
    study = tmp_path / "s.yaml"
    study.write_text("run: study_trainables:counter\nmetric: score\nstop: {scroe: 3}\nconfig: {steps: 3}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    code = main(["tune", str(study), "--results-dir", str(tmp_path / "r"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and "'scroe' is not a key of the training results; did you mean 'score'?" in err


def test_cpu_budget_caps_concurrency_unless_max_concurrent(tmp_path):
    from rltune.orchestrator._runner import StudyRunner
    from rltune.orchestrator._spec import make_plan

    plan = make_plan({"run": "PPO", "config": {"env": "CartPole-v1", "num_workers": 1}, "n_jobs": 4,
                      "results_dir": str(tmp_path)})

    class Stub:
        cpus = 2

    runner = StudyRunner(plan, cpu_count=4)
    assert plan.cpus_per_trial(plan.config) == 2
    runner.active = [Stub()]
    assert runner._fits(Stub())
    runner.active = [Stub(), Stub()]
    assert not runner._fits(Stub())  # 2 trials x 2 CPUs fill 4 CPUs
    runner = StudyRunner(plan, cpu_count=4, max_concurrent=3)
    runner.active = [Stub(), Stub()]
    assert runner._fits(Stub())
    runner.active = [Stub(), Stub(), Stub()]
    assert not runner._fits(Stub())


def _reports_with_tune_report(config):
    for i in range(3):
        tune.report(score=config["x"] + i)
    return {"score": 100.0}


def test_a_function_of_config_alone_reports_with_tune_report_and_may_return_its_last_result(tmp_path):
    analysis = tune.run(_reports_with_tune_report, config={"x": tune.grid_search([1, 2])}, metric="score",
                        results_dir=str(tmp_path), name="report", verbose=0)
    assert [t.state for t in analysis.trials] == ["COMPLETE", "COMPLETE"]
    assert [t.value for t in analysis.trials] == [100.0, 100.0]
    assert analysis.study.trials[0].intermediate_values == {1: 1.0, 2: 2.0, 3: 3.0, 4: 100.0}


def test_default_study_names_never_join_another_study(tmp_path):
    first = tune.run(counter, config={"steps": 1}, metric="score", results_dir=str(tmp_path), verbose=0)
    second = tune.run(counter, config={"steps": 1}, metric="score", results_dir=str(tmp_path), verbose=0)
    assert first.study.study_name.startswith("counter_") and first.study_dir != second.study_dir
    assert len(first.trials) == len(second.trials) == 1


def test_study_timeout_starts_no_new_trial_and_lets_running_ones_finish(tmp_path):
    analysis = tune.run(counter, config={"x": tune.uniform(0, 1), "steps": 4, "sleep": 0.1}, metric="score",
                        n_trials=100, timeout_s=0.5, results_dir=str(tmp_path), name="timeout", verbose=0)
    assert 1 <= len(analysis.trials) < 5
    assert all(t.state == "COMPLETE" and t.training_iteration == 4 for t in analysis.trials)


def test_optuna_sampler_and_pruner_instances_are_accepted(tmp_path):
    analysis = tune.run(counter, config={"x": tune.uniform(0, 1), "steps": 2}, metric="score", n_trials=3,
                        search_alg=optuna.samplers.RandomSampler(seed=5), scheduler=optuna.pruners.MedianPruner(),
                        results_dir=str(tmp_path), name="instances", verbose=0)
    assert isinstance(analysis.study.sampler, optuna.samplers.RandomSampler)
    assert isinstance(analysis.study.pruner, optuna.pruners.MedianPruner)
    assert analysis.counts() == {"COMPLETE": 3}


def test_a_study_whose_every_trial_failed_raises_study_failed_with_its_analysis(tmp_path):
    from rltune.errors import StudyFailedError

    with pytest.raises(StudyFailedError, match=r"every trial of study 'allfail' failed \(2\): trial 0: ValueError: "
                                               r"boom at step 2") as raised:
        tune.run(misbehaving, config={"mode": tune.grid_search(["raise", "exit"])}, metric="score",
                 results_dir=str(tmp_path), name="allfail", verbose=0)
    assert raised.value.failed == [0, 1]
    assert [t.state for t in raised.value.analysis.trials] == ["FAIL", "FAIL"]
    with pytest.raises(StudyFailedError, match=r"trials \[1\] failed"):  # some failed, on request
        tune.run(misbehaving, config={"mode": tune.grid_search(["ok", "raise"])}, metric="score",
                 results_dir=str(tmp_path), name="somefail", verbose=0, raise_on_failed_trial=True)


def test_the_cli_exits_1_when_every_trial_failed_and_says_so(tmp_path, capsys):
    from rltune.orchestrator.cli import main

    (tmp_path / "s.yaml").write_text(
        "name: allfail\nrun: orchestrator.trainables:misbehaving\nmetric: score\n"
        "config: {mode: {grid_search: [raise, raise]}}\n")
    code = main(["tune", str(tmp_path / "s.yaml"), "--results-dir", str(tmp_path), "--quiet"])
    out, err = capsys.readouterr()
    assert code == 1, out + err
    assert "every trial failed, first trial 0: ValueError: boom at step 2" in out
    assert err == "rltune tune: every trial of study 'allfail' failed (2 FAIL): exit status 1\n"
    (tmp_path / "ok.yaml").write_text(
        "name: somefail\nrun: orchestrator.trainables:misbehaving\nmetric: score\n"
        "config: {mode: {grid_search: [raise, ok]}}\n")
    assert main(["tune", str(tmp_path / "ok.yaml"), "--results-dir", str(tmp_path), "--quiet"]) == 0
