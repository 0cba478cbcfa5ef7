"""A 3-trial study driven through the trackers as the orchestrator would, and the checks of what MLflow holds.

Trial 0 COMPLETE: a real short PPO training (``_trial_side.run_complete_trial``,
in this process or in another one). Trial 1 PRUNED: synthetic results with
a curriculum phase change. Trial 2 FAIL: one result, then a traceback.
Optuna sees the same trials (ask, report, tell), so the parent run's plots
and CSV come from a real ``optuna.Study``.
"""

from __future__ import annotations

import csv
import io
import json
import math
import traceback
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ._trial_side import ITERATIONS, KEEP_CHECKPOINTS, PPO_CONFIG, probe_observations

STUDY = "cartpole-tracking"
PARAMS = [
    {"lr": 1e-3, "num_sgd_iter": 2},  # the values trial 0 really trains with (PPO_CONFIG)
    {"lr": 3e-4, "num_sgd_iter": 4},
    {"lr": 1e-2, "num_sgd_iter": 8},
]
PRUNED_RESULTS = [
    {"training_iteration": i, "timesteps_total": 128 * i, "episode_reward_mean": 9.0 + i, "episode_reward_max": 20,
     "curriculum_phase": phase, "curriculum_task": task, "done": i == 3, "note": "text is not a metric",
     "custom_metrics": {"pole_angle_mean": 0.05 * i, "pole_angle_max": float("nan")},
     "info": {"learner": {"default_policy": {"entropy": 0.69 - 0.01 * i, "kl": 0.001}}},
     "hist_stats": {"episode_reward": [9.0, 10.0]}}
    for i, phase, task in ((1, 0, 1), (2, 0, 1), (3, 1, 2))
]


def distributions() -> dict[str, Any]:
    import optuna

    return {"lr": optuna.distributions.FloatDistribution(1e-4, 1e-1, log=True),
            "num_sgd_iter": optuna.distributions.IntDistribution(1, 10)}


def simulate_study(results_dir: Path, tracking_uri: str | None,
                   run_complete: Callable[[dict[str, Any], Path], dict[str, Any]], *,
                   open_trials: bool = False) -> dict[str, Any]:
    """Run the study; ``run_complete(trial_tracker_args, trial_dir)`` runs trial 0's trial side and returns its summary.

    ``open_trials``: trials 1 and 2 log through ``open_trial`` trackers (as
    the study's tracking process does).
    """
    import optuna

    from rltune.tracking import StudyTracker

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize", study_name=STUDY)
    for params in PARAMS:
        study.enqueue_trial(params)
    tracker = StudyTracker(tracking_uri, results_dir, STUDY, "tpe", "median",
                           study_params={"metric": "episode_reward_mean", "mode": "max", "n_trials": 3})

    def start(number: int) -> tuple[Any, Any]:
        trial = study.ask(distributions())
        assert trial.number == number and trial.params == PARAMS[number]
        config = {**PPO_CONFIG, **trial.params}
        if open_trials and number > 0:
            return trial, tracker.open_trial(number, config, trial.params)
        return trial, tracker.trial(tracker.start_trial(number, config, trial.params))

    # trial 0: COMPLETE, real training (its trial side logs results, checkpoints, files, curve, model)
    trial, side = start(0)
    summary = run_complete(tracker.trial_tracker_args(side.run_id), results_dir / STUDY / "trial_00000")
    study.tell(trial, summary["last_result"]["episode_reward_mean"])
    tracker.end_trial(side.run_id, "COMPLETE", reason=f"training_iteration >= {ITERATIONS}")
    tracker.refresh_study_plots(study, final=False)

    # trial 1: PRUNED after 3 results, with a curriculum phase change
    trial, side = start(1)
    for result in PRUNED_RESULTS:
        side.log_result(result)
        trial.report(result["episode_reward_mean"], result["training_iteration"])
    side.log_learning_curve()
    study.tell(trial, state=optuna.trial.TrialState.PRUNED)
    tracker.end_trial(side, "PRUNED", reason="pruned at iteration 3")
    tracker.refresh_study_plots(study, final=False)  # throttled: plot_interval_s

    # trial 2: FAIL with a traceback (written to error.txt by the orchestrator)
    trial, side = start(2)
    side.log_result({"training_iteration": 1, "episode_reward_mean": 8.0})
    trial.report(8.0, 1)
    try:
        _ = 1 / 0
    except ZeroDivisionError:
        error = traceback.format_exc()
    trial_dir = results_dir / STUDY / "trial_00002"
    trial_dir.mkdir(parents=True, exist_ok=True)
    (trial_dir / "error.txt").write_text(error)
    side.log_files(trial_dir / "error.txt", trial_dir / "missing-file.txt")
    (trial_dir / "error.txt").unlink()
    study.tell(trial, state=optuna.trial.TrialState.FAIL)
    tracker.end_trial(side, "FAIL", reason="ZeroDivisionError: division by zero", error=error)

    tracker.refresh_study_plots(study)  # final
    tracker.close()
    return {
        "results_dir": results_dir,
        "tracking_uri": tracker.tracking_uri,
        "experiment_id": tracker.experiment_id,
        "parent_run_id": tracker.parent_run_id,
        "run_ids": dict(tracker.trial_runs),
        "summary": summary,
        "best_value": study.best_value,
        "unrecorded": list(tracker.unrecorded) + [u for u in summary["unrecorded"]],
    }


# -- checks -------------------------------------------------------------------------------------
def check_runs(client: Any, info: dict[str, Any]) -> None:
    """One experiment named after the study, one parent run and three nested runs with their states."""
    experiment = client.get_experiment_by_name(STUDY)
    assert experiment is not None and experiment.experiment_id == info["experiment_id"]
    assert experiment.tags["rltune.study"] == STUDY
    runs = client.search_runs([experiment.experiment_id])
    parents = [r for r in runs if r.data.tags.get("rltune.role") == "study"]
    trials = [r for r in runs if r.data.tags.get("rltune.role") == "trial"]
    assert len(runs) == 4 and len(parents) == 1 and len(trials) == 3
    parent = parents[0]
    assert parent.info.run_id == info["parent_run_id"] and "mlflow.parentRunId" not in parent.data.tags
    assert parent.info.status == "FINISHED"
    assert parent.data.params["study.metric"] == "episode_reward_mean"
    by_number = {int(r.data.tags["rltune.trial"]): r for r in trials}
    assert {n: r.info.run_id for n, r in by_number.items()} == info["run_ids"]
    expected = {0: ("COMPLETE", "FINISHED"), 1: ("PRUNED", "KILLED"), 2: ("FAIL", "FAILED")}
    for number, run in by_number.items():
        tags = run.data.tags
        assert tags["mlflow.parentRunId"] == parent.info.run_id
        assert (tags["rltune.state"], run.info.status) == expected[number]
        assert tags["rltune.sampler"] == "tpe" and tags["rltune.pruner"] == "median"
        assert run.info.run_name.startswith(f"trial_{number:05d} lr=")
        assert f"num_sgd_iter={PARAMS[number]['num_sgd_iter']}" in run.info.run_name
    assert by_number[1].data.tags["rltune.reason"] == "pruned at iteration 3"
    assert by_number[2].data.tags["rltune.error"].endswith("ZeroDivisionError: division by zero")
    # the best trial on the parent run
    assert parent.data.tags["rltune.best_trial"] == "0"
    assert parent.data.tags["rltune.best_run_id"] == info["run_ids"][0]
    assert float(parent.data.tags["rltune.best_value"]) == info["best_value"]
    assert parent.data.tags["best.lr"] == "0.001"
    assert [m.step for m in client.get_metric_history(parent.info.run_id, "best_value")] != []


def check_params(client: Any, info: dict[str, Any]) -> None:
    """The trial's full config, flattened with dotted keys, values as text."""
    params = client.get_run(info["run_ids"][1]).data.params
    assert params["env"] == "CartPole-v1"
    assert params["lr"] == "0.0003" and params["num_sgd_iter"] == "4"
    assert params["model.fcnet_hiddens"] == "[32, 32]"
    assert params["train_batch_size"] == "128"
    assert "model" not in params


def check_metrics(client: Any, info: dict[str, Any]) -> None:
    """Per-iteration histories at steps 1..N; learner stats and custom metrics with '/' keys; no NaN or text."""
    complete = info["run_ids"][0]
    for key in ("episode_reward_mean", "timesteps_total", "info/learner/default_policy/entropy",
                "custom_metrics/pole_angle_mean"):
        history = sorted(client.get_metric_history(complete, key), key=lambda m: m.step)
        assert [m.step for m in history] == list(range(1, ITERATIONS + 1)), key
        assert all(math.isfinite(m.value) for m in history)
    assert "custom_metrics/pole_angle_mean" in [f"custom_metrics/{k}" for k in info["summary"]["custom_metric_keys"]]
    timesteps = sorted(client.get_metric_history(complete, "timesteps_total"), key=lambda m: m.step)
    assert timesteps[-1].value == info["summary"]["last_result"]["timesteps_total"]
    pruned = client.get_run(info["run_ids"][1]).data.metrics
    assert pruned["curriculum_phase"] == 1 and pruned["curriculum_task"] == 2
    assert "done" not in pruned  # a bool is not a number (rltune._metrics)
    assert "note" not in pruned and "custom_metrics/pole_angle_max" not in pruned  # text and NaN left out
    assert not any(k.startswith("hist_stats") for k in pruned)
    phases = sorted(client.get_metric_history(info["run_ids"][1], "curriculum_phase"), key=lambda m: m.step)
    assert [(m.step, m.value) for m in phases] == [(1, 0.0), (2, 0.0), (3, 1.0)]
    failed = client.get_metric_history(info["run_ids"][2], "episode_reward_mean")
    assert [(m.step, m.value) for m in failed] == [(1, 8.0)]


def _names(client: Any, run_id: str, path: str | None = None) -> set[str]:
    return {Path(a.path).name for a in client.list_artifacts(run_id, path)}


def check_checkpoints(client: Any, info: dict[str, Any]) -> None:
    """keep_checkpoints_num = 1: the last checkpoint and the best one (by episode_reward_mean) stay in the run."""
    run_id = info["run_ids"][0]
    checkpoints = info["summary"]["checkpoints"]
    assert len(checkpoints) == ITERATIONS and KEEP_CHECKPOINTS == 1
    best = max(checkpoints, key=lambda c: c[1])[0]
    assert _names(client, run_id, "checkpoints") == {checkpoints[-1][0], best}
    for name in {checkpoints[-1][0], best}:
        assert _names(client, run_id, f"checkpoints/{name}") >= {"rltune_checkpoint.json", "state.pt"}


def check_files(client: Any, info: dict[str, Any], tmp_path: Path) -> None:
    """params.json and result.json of the complete trial; error.txt (with the traceback) of the failed one."""
    assert {"params.json", "result.json"} <= _names(client, info["run_ids"][0])
    lines = Path(client.download_artifacts(info["run_ids"][0], "result.json", str(tmp_path))).read_text().splitlines()
    assert len(lines) == ITERATIONS
    error = Path(client.download_artifacts(info["run_ids"][2], "error.txt", str(tmp_path))).read_text()
    assert error.startswith("Traceback") and "ZeroDivisionError" in error
    assert "missing-file.txt" not in _names(client, info["run_ids"][2])


def _png(path: str) -> bytes:
    data = Path(path).read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 2000, path
    return data


def check_plots_and_csv(client: Any, info: dict[str, Any], tmp_path: Path) -> None:
    """Optuna's plots and trials.csv on the parent run; learning curves on the trials' runs."""
    parent = info["parent_run_id"]
    plots = _names(client, parent, "plots")
    # one complete trial: no param importances yet (and no failure for it)
    assert plots == {"optimization_history.png", "intermediate_values.png", "parallel_coordinate.png"}
    for name in plots:
        _png(client.download_artifacts(parent, f"plots/{name}", str(tmp_path)))
    for number in (0, 1):
        _png(client.download_artifacts(info["run_ids"][number], "plots/learning_curve.png", str(tmp_path / str(number))))
    table = Path(client.download_artifacts(parent, "trials.csv", str(tmp_path))).read_text()
    rows = list(csv.DictReader(io.StringIO(table)))
    assert [(r["number"], r["state"]) for r in rows] == [("0", "COMPLETE"), ("1", "PRUNED"), ("2", "FAIL")]
    assert [r["mlflow_run_id"] for r in rows] == [info["run_ids"][n] for n in range(3)]
    assert [float(r["params_lr"]) for r in rows] == [p["lr"] for p in PARAMS]
    assert float(rows[0]["value"]) == info["best_value"]
    assert float(rows[1]["value"]) == PRUNED_RESULTS[-1]["episode_reward_mean"]  # Optuna: a pruned trial's last report
    assert rows[2]["value"] == ""


def check_model(client: Any, info: dict[str, Any], tmp_path: Path) -> None:
    """The policy as a pyfunc model: loads, has a tensor signature, predicts the trainer's own actions."""
    import mlflow.pyfunc

    run_id = info["run_ids"][0]
    assert info["summary"]["model_uri"] == f"runs:/{run_id}/policy_model"
    local = client.download_artifacts(run_id, "policy_model", str(tmp_path))
    model = mlflow.pyfunc.load_model(local)
    signature = model.metadata.signature
    assert signature.inputs.to_dict()[0]["tensor-spec"] == {"dtype": "float32", "shape": (-1, 4)}
    assert signature.outputs.to_dict()[0]["tensor-spec"] == {"dtype": "int64", "shape": (-1,)}
    actions = model.predict(probe_observations())
    assert isinstance(actions, np.ndarray) and actions.dtype == np.int64 and actions.shape == (16,)
    assert set(actions.tolist()) <= {0, 1}
    assert actions.tolist() == info["summary"]["expected_actions"]  # the trained policy, deterministic
    explored = model.predict(probe_observations(), params={"explore": True})
    assert explored.shape == (16,) and set(explored.tolist()) <= {0, 1}
    assert json.loads(Path(local, "artifacts", "policy", "policy.json").read_text())["algorithm"] == "PPO"
