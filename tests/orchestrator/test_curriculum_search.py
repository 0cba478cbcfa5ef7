"""Tunable curricula: search-space entries inside a ``curriculum:`` block (its phases are a list of dicts)."""

from __future__ import annotations

import textwrap

import pytest

from rltune.errors import ConfigError
from rltune.orchestrator._run_study import run_plan
from rltune.orchestrator._search_space import resolve_config
from rltune.orchestrator._spec import load_study_file, make_plan

PHASES = {"phases": [
    {"task": {"choice": [1, 2]}, "threshold": {"uniform": [0.5, 0.9]}, "patience": {"randint": [1, 3]},
     "min_iterations": {"grid_search": [1, 4]}},
    {"task": 3},
]}


def test_entries_in_curriculum_phases_are_search_parameters_named_by_index():
    plan = make_plan({"run": "PPO", "env": "CartPole-v1", "curriculum": PHASES})
    names = {p.name: p.kind for p in plan.space.params}
    assert names == {"curriculum.phases.0.task": "choice", "curriculum.phases.0.threshold": "uniform",
                     "curriculum.phases.0.patience": "randint", "curriculum.phases.0.min_iterations": "grid_search"}
    assert plan.total_trials == 2  # the grid entry's two values
    values = {"curriculum.phases.0.task": 2, "curriculum.phases.0.threshold": 0.7,
              "curriculum.phases.0.patience": 2, "curriculum.phases.0.min_iterations": 4}
    config = resolve_config(plan.config, plan.space, values)
    assert config["curriculum"]["phases"] == [{"task": 2, "threshold": 0.7, "patience": 2, "min_iterations": 4},
                                              {"task": 3}]
    assert plan.config["curriculum"]["phases"][0]["threshold"] == {"uniform": [0.5, 0.9]}  # the plan is not changed


def test_automatic_curriculum_options_and_task_ranges_are_searched_too():
    block = {"type": "learning_progress", "fast_alpha": {"uniform": [0.3, 0.9]},
             "task_range": {"low": 2, "high": {"randint": [10, 21]}, "step": 2}}
    plan = make_plan({"run": "PPO", "env": "CartPole-v1", "curriculum": block})
    assert {p.name for p in plan.space.params} == {"curriculum.fast_alpha", "curriculum.task_range.high"}


def test_a_sampled_value_the_curriculum_refuses_is_reported_before_the_study_starts():
    block = {"phases": [{"task": 1, "threshold": 1, "patience": {"randint": [0, 3]}}, {"task": 2}]}
    with pytest.raises(ConfigError) as info:
        make_plan({"run": "PPO", "env": "CartPole-v1", "curriculum": block})
    assert "config.curriculum.phases.0.patience: Input should be greater than or equal to 1" in str(info.value)


def test_an_entry_in_a_list_of_numbers_is_still_refused():
    with pytest.raises(ConfigError, match=r"config.curriculum.phases.0.task.1: a search-space entry inside a list"):
        make_plan({"run": "PPO", "env": "CartPole-v1",
                   "curriculum": {"phases": [{"task": [1, {"choice": [2, 3]}]}]}})


STUDY = """\
    run: PPO
    env: callbacks.envs:TaskEnv
    metric: episode_reward_mean
    stop: {training_iteration: 3}
    curriculum:
      phases:
        - {task: 1, threshold: {grid_search: [4, 100]}}   # returns are 4 x task: 4 promotes, 100 never does
        - {task: 2}
    config:
      env_config: {episode_len: 4}
      num_workers: 0
      num_envs_per_worker: 2
      rollout_fragment_length: 8
      train_batch_size: 16
      sgd_minibatch_size: 16
      num_sgd_iter: 1
      model: {fcnet_hiddens: [8]}
      metrics_num_episodes_for_smoothing: 4
    """


def test_two_trials_with_different_sampled_thresholds_follow_different_curricula(tmp_path):
    path = tmp_path / "curriculum-search.yaml"
    path.write_text(textwrap.dedent(STUDY))
    plan = load_study_file(path, {"results_dir": str(tmp_path / "results"), "tracking": False})
    analysis = run_plan(plan, verbose=0, quiet=True)
    by_threshold = {t.config["curriculum"]["phases"][0]["threshold"]: t for t in analysis.trials}
    assert set(by_threshold) == {4, 100}
    low, high = by_threshold[4].last_result, by_threshold[100].last_result
    assert (low["curriculum_phase"], low["curriculum_task"], low["episode_reward_mean"]) == (1, 2, 8.0)
    assert (high["curriculum_phase"], high["curriculum_task"], high["episode_reward_mean"]) == (0, 1, 4.0)
