"""Custom metrics and histograms: from the episode hooks of every worker into one result.

``WorkerMetrics`` (tests/callbacks/envs.py) sets metrics with known values
per worker and env; ``RandomRewardEnv`` gives every episode a different
return, which ``WorkerMetrics`` copies into metric ``ret``: its mean, min and
max must equal ``episode_reward_mean/min/max``, i.e. summarise the same
window of episodes.
"""

from __future__ import annotations

import math

import pytest

from rltune.callbacks._metrics import merge_hist_data, summarize_custom_metrics
from rltune.trainers import PPO
from trainer_params import iteration_config

from .envs import RandomRewardEnv, WorkerMetrics

TINY = {
    "rollout_fragment_length": 8,
    "model": {"fcnet_hiddens": [8]},
    "callbacks": WorkerMetrics,
    "seed": 1,
}


def assert_same_window_as_episode_stats(result: dict) -> None:
    metrics = result["custom_metrics"]
    assert metrics["ret_mean"] == pytest.approx(result["episode_reward_mean"], rel=1e-9)
    assert metrics["ret_min"] == pytest.approx(result["episode_reward_min"], rel=1e-9)
    assert metrics["ret_max"] == pytest.approx(result["episode_reward_max"], rel=1e-9)
    assert metrics["len_mean"] == pytest.approx(result["episode_len_mean"], rel=1e-9)


# --- 2 rollout workers x 3 envs ---------------------------------------------------------------


@pytest.fixture(scope="module")
def remote_results(tmp_path_factory):
    """Two iterations of 12 episodes (4 steps each, 2 per env); the metrics window is the last 12.

    PPO only (worker processes cost seconds): DQN's custom metrics from remote workers are
    tested in test_callbacks.py (``remote``), across sampling rounds in ``local_run`` below.
    """
    trainer = PPO(
        config={
            **TINY,
            **iteration_config(PPO, 48),
            "num_workers": 2,
            "num_envs_per_worker": 3,
            "metrics_num_episodes_for_smoothing": 12,
            "env_config": {"episode_len": 4},
        },
        env=RandomRewardEnv,
        results_dir=tmp_path_factory.mktemp("results"),
    )
    try:
        results = [trainer.train() for _ in range(2)]
        pids = {w.worker_index: w.pid for w in trainer.workers.remote_workers}
    finally:
        trainer.stop()
    return results, pids


def test_custom_metric_of_remote_workers_is_aggregated_with_mean_min_max(remote_results):
    results, _ = remote_results
    for result in results:
        assert result["episodes_this_iter"] == 12
        metrics = result["custom_metrics"]
        # w = worker_index * 10 + env_index: 10, 11, 12, 20, 21, 22, two episodes each.
        assert (metrics["w_mean"], metrics["w_min"], metrics["w_max"]) == (16, 10, 22)
        assert (metrics["len_mean"], metrics["len_min"], metrics["len_max"]) == (4, 4, 4)


def test_nan_values_are_left_out_and_an_all_nan_metric_is_nan(remote_results):
    metrics = remote_results[0][-1]["custom_metrics"]
    assert (metrics["nan_on_w1_mean"], metrics["nan_on_w1_min"], metrics["nan_on_w1_max"]) == (20, 20, 20)
    assert all(math.isnan(metrics[f"always_nan_{stat}"]) for stat in ("mean", "min", "max"))


def test_custom_metrics_summarise_the_same_episodes_as_episode_reward(remote_results):
    for result in remote_results[0]:
        assert result["episode_reward_min"] < result["episode_reward_max"]  # returns differ
        assert_same_window_as_episode_stats(result)


def test_episode_hooks_run_in_the_worker_processes_and_see_every_step(remote_results):
    results, pids = remote_results
    metrics = results[-1]["custom_metrics"]
    assert {metrics["pid_min"], metrics["pid_max"]} == set(pids.values())
    assert metrics["steps_ok_min"] == 1.0


def test_hist_data_of_this_iteration_goes_to_hist_stats(remote_results):
    for result in remote_results[0]:
        hist = result["hist_stats"]
        assert sorted(hist["worker"]) == [1] * 6 + [2] * 6
        assert len(set(hist["episode_id"])) == 12
    first, second = (r["hist_stats"]["episode_id"] for r in remote_results[0])
    assert not set(first) & set(second)


# --- the window, in one process ---------------------------------------------------------------

# 2 envs, episodes of 12 steps, 8 steps per iteration in 2 rounds of 4: episodes end in iterations
# 2, 3, 5, 6 (two each), none in iterations 1 and 4. The metrics window is the last 3 episodes.
LOCAL = {
    **TINY,
    "num_envs_per_worker": 2,
    "rollout_fragment_length": 4,
    "metrics_num_episodes_for_smoothing": 3,
    "env_config": {"episode_len": 12},
}


@pytest.fixture(scope="module")
def local_run(trainer_cls, tmp_path_factory):
    """Six iterations of the local trainer, with a checkpoint after iteration 3."""
    tmp = tmp_path_factory.mktemp("local")
    with trainer_cls(config={**LOCAL, **iteration_config(trainer_cls, 16)}, env=RandomRewardEnv, results_dir=tmp) as trainer:
        results = []
        for _ in range(6):
            results.append(trainer.train())
            if trainer.iteration == 3:
                path = trainer.save(tmp / "checkpoint")
    return results, path


def test_metrics_window_spans_iterations_like_episode_reward_mean(local_run):
    results, _ = local_run
    assert [r["episodes_this_iter"] for r in results] == [0, 2, 2, 0, 2, 2]
    for result in results[1:]:
        assert_same_window_as_episode_stats(result)
        assert result["custom_metrics"]["len_max"] == 12


def test_an_iteration_without_finished_episodes_keeps_the_custom_metrics(local_run):
    results, _ = local_run
    assert results[3]["episodes_this_iter"] == 0
    assert results[3]["custom_metrics"] == results[2]["custom_metrics"]


def test_custom_metrics_window_survives_a_checkpoint(trainer_cls, local_run, tmp_path):
    """After from_checkpoint, the custom metrics summarise the restored window, like episode_reward_mean does."""
    results, path = local_run
    with trainer_cls.from_checkpoint(path, results_dir=tmp_path) as trainer:
        result = trainer.train()  # fresh envs: no episode ends in this iteration
    assert result["episodes_this_iter"] == 0
    assert result["episode_reward_mean"] == pytest.approx(results[2]["episode_reward_mean"], rel=1e-9)
    assert result["custom_metrics"] == pytest.approx(results[2]["custom_metrics"], rel=1e-9, nan_ok=True)


# --- the aggregation functions ------------------------------------------------------------------


def test_summarize_custom_metrics():
    summary = summarize_custom_metrics([{"a": 1, "b": math.nan}, {"a": 3.0, "b": 2}, {"a": "n/a"}, {}])
    assert summary == {"a_mean": 2.0, "a_min": 1.0, "a_max": 3.0, "b_mean": 2.0, "b_min": 2.0, "b_max": 2.0}
    assert summarize_custom_metrics([]) == {}
    only_nan = summarize_custom_metrics([{"c": math.nan}])
    assert set(only_nan) == {"c_mean", "c_min", "c_max"} and all(math.isnan(v) for v in only_nan.values())


def test_merge_hist_data():
    assert merge_hist_data([{"x": [1, 2]}, {"x": [3], "y": [0.5]}, {}]) == {"x": [1, 2, 3], "y": [0.5]}
