"""A PBT schedule replayed: best_config.yaml holds the best member's schedule through its ancestors, and
``rltune train -f`` applies each segment at its iteration (the learner's effective lr changes there)."""

from __future__ import annotations

import json
from pathlib import Path

import optuna
import pytest
import yaml

from rltune import tune
from rltune.orchestrator._pbt import LINEAGE
from rltune.orchestrator._pbt_schedule import pbt_schedule
from rltune.orchestrator._replay import ScheduleReplay, ScheduleSegment
from rltune.orchestrator._spec import make_plan
from rltune.orchestrator.cli import main
from rltune.tracking._pbt_plot import pbt_series

optuna.logging.set_verbosity(optuna.logging.WARNING)
TINY = {"env": "CartPole-v1", "num_workers": 0, "train_batch_size": 64, "rollout_fragment_length": 64,
        "sgd_minibatch_size": 32, "num_sgd_iter": 1, "model": {"fcnet_hiddens": [16]}}


def _results(trial_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (trial_dir / "result.json").read_text().splitlines()]


def _lr_by_iteration(trial_dir: Path) -> dict[int, tuple[float, float]]:
    """Iteration -> (lr in result["config"], the learner's effective cur_lr)."""
    return {r["training_iteration"]: (r["config"]["lr"], r["info"]["learner"]["default_policy"]["cur_lr"])
            for r in _results(trial_dir)}


def test_train_f_replays_a_schedule_the_learners_lr_changes_at_the_named_iteration(tmp_path, capsys):
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump({
        "name": "replay", "run": "PPO", "stop": {"training_iteration": 4}, "config": {**TINY, "lr": 0.01},
        "schedule": [{"at_iteration": 0, "config": {"lr": 0.001}},
                     {"at_iteration": 2, "config": {"lr": 0.0005, "clip_param": 0.1}}]}))
    assert main(["train", "-f", str(path), "--results-dir", str(tmp_path), "--no-tensorboard"]) == 0
    results = _results(tmp_path / "replay")
    seen = [(r["training_iteration"], r["info"]["learner"]["default_policy"]["cur_lr"],
             r["info"]["learner"]["default_policy"]["cur_clip_param"]) for r in results]
    assert seen == [(1, pytest.approx(0.001), pytest.approx(0.3)), (2, pytest.approx(0.001), pytest.approx(0.3)),
                    (3, pytest.approx(0.0005), pytest.approx(0.1)), (4, pytest.approx(0.0005), pytest.approx(0.1))]
    assert [r["config"]["lr"] for r in results] == [0.001, 0.001, 0.0005, 0.0005]  # the config in force
    assert [r["timesteps_total"] for r in results] == [64, 128, 192, 256]  # the restore kept the counters


def test_a_timesteps_schedule_is_due_once_timesteps_total_reaches_each_start_and_skips_passed_ones():
    segments = [ScheduleSegment(at_timesteps=0, config={}), ScheduleSegment(at_timesteps=100, config={}),
                ScheduleSegment(at_timesteps=150, config={}), ScheduleSegment(at_timesteps=500, config={})]
    replay = ScheduleReplay(segments, [{"lr": 1}, {"lr": 2}, {"lr": 3}, {"lr": 4}])
    assert replay.due({"timesteps_total": 64}) is None
    assert replay.due({"timesteps_total": 192}) == {"lr": 3}  # 100 and 150 both passed: the later one
    assert replay.due({"timesteps_total": 256}) is None
    assert replay.due({"timesteps_total": 512}) == {"lr": 4}


def _trial(study, lineage=None):
    """A finished trial with a sampled lr and a PBT lineage; its lr."""
    trial = study.ask({"lr": optuna.distributions.FloatDistribution(1e-4, 1e-1, log=True)})
    if lineage:
        trial.set_user_attr(LINEAGE, lineage)
    study.tell(trial, 0.0)
    return trial.params["lr"]


def test_the_schedule_follows_the_exploited_checkpoints_back_to_iteration_zero():
    plan = make_plan({"run": "PPO", "config": {"env": "CartPole-v1"}, "scheduler": {
        "type": "pbt", "hyperparam_mutations": {"lr": {"loguniform": [1e-4, 1e-1]}}}})
    study = optuna.create_study(direction="maximize")
    first = _trial(study)
    _trial(study, [{"iteration": 4, "source": 0, "checkpoint": "/r/trial_00000/checkpoint_000004",
                          "changed": {"lr": 0.02}},
                         {"iteration": 9, "source": 0, "checkpoint": "/r/trial_00000/checkpoint_000009",
                          "changed": {"lr": 0.05}}])  # after trial 2 took its checkpoint of iteration 6
    _trial(study, [{"iteration": 2, "source": 0, "checkpoint": "/r/trial_00000/checkpoint_000002",
                          "changed": {"lr": 0.001}},
                         {"iteration": 7, "source": 1, "checkpoint": "/r/trial_00001/checkpoint_000006",
                          "changed": {"lr": 0.03}}])
    assert pbt_schedule(plan, study, 2) == [  # trial 2's first exploit is not its weights' past: the second is
        {"at_iteration": 0, "config": {"lr": first}},  # trial 0's own lr, then trial 1's exploit of it at 4
        {"at_iteration": 4, "config": {"lr": 0.02}},
        {"at_iteration": 6, "config": {"lr": 0.03}},
    ]
    assert pbt_schedule(plan, study, 0) == []  # never exploited: its config holds throughout


def test_a_pbt_studys_best_config_holds_its_best_members_schedule_and_train_f_replays_it(tmp_path, capsys):
    # synch: trial 1 waits at each interval for trial 0's checkpoint of it, so it exploits at 2 and 4 whatever the
    # order the members get there in (asynchronous, it exploited only if trial 0 had checkpointed first)
    pbt = tune.PopulationBasedTraining(perturbation_interval=2, quantile_fraction=0.5, resample_probability=0.0,
                                       hyperparam_mutations={"lr": tune.loguniform(1e-4, 1e-2)}, synch=True)
    config = {**TINY, "callbacks": "orchestrator.pbt_callbacks:OvertakingMember"}
    analysis = tune.run("PPO", config=config, stop={"training_iteration": 6}, num_samples=2, n_jobs=2,
                        max_concurrent=2, metric="member_rank", mode="max", scheduler=pbt, seed=0,
                        results_dir=str(tmp_path), name="pbt", tracking=False, verbose=0)
    best = analysis.best_trial
    assert best.number == 1
    lineage = analysis.study.trials[1].user_attrs[LINEAGE]
    written = yaml.safe_load(analysis.best_config_path.read_text())
    schedule = written["schedule"]
    assert schedule[0] == {"at_iteration": 0, "config": {"lr": analysis.study.trials[0].params["lr"]}}
    last = lineage[-1]  # its weights: trial 0's up to the checkpoint its last exploit took, then its explored lr
    assert schedule[-1]["at_iteration"] == int(last["checkpoint"].rpartition("_")[2])
    assert schedule[-1]["config"]["lr"] == pytest.approx(best.config["lr"]) == pytest.approx(last["changed"]["lr"])
    series = pbt_series(analysis.study.trials)["lr"]  # what the parent run's plots/pbt_hyperparams.png draws
    assert series[0][0] == (0, analysis.study.trials[0].params["lr"], False)
    assert [p[1] for p in series[1] if p[2]] == [pytest.approx(s["changed"]["lr"]) for s in lineage]
    assert main(["train", "-f", str(analysis.best_config_path), "--results-dir", str(tmp_path / "replay"),
                 "--name", "r", "--no-tensorboard"]) == 0
    seen = _lr_by_iteration(tmp_path / "replay" / "r")
    for i, segment in enumerate(schedule):
        end = schedule[i + 1]["at_iteration"] if i + 1 < len(schedule) else 6
        for iteration in range(segment["at_iteration"] + 1, end + 1):
            assert seen[iteration] == (pytest.approx(segment["config"]["lr"]),) * 2, (iteration, seen)
