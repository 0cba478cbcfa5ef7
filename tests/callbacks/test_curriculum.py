"""Curriculum: every way of changing the task reaches every env of every worker, and the task survives
env crashes, recreated workers, checkpoints and evaluation; CurriculumCallback's phase rules.

The end-to-end tests run 2 rollout workers x 3 envs of ``TaskEnv``, whose
every step pays the task and reports it in ``info``. ``TaskMetrics`` turns
the task of each finished episode (``episode.last_info()["task"]``) into a
custom metric, so ``custom_metrics.task_min == task_max == T`` means every
episode in the metrics window ran with task T. With episodes of 4 steps,
fragments of 8 and ``metrics_num_episodes_for_smoothing`` 12, the window is
exactly the 12 episodes (2 per env) of the last iteration.
"""

from __future__ import annotations

import json
import math
import os
import signal
import time

import gymnasium as gym
import pytest

from rltune.callbacks import CurriculumCallback
from rltune.errors import CheckpointError, ConfigError
from rltune.trainers import PPO, register_env
from trainer_params import iteration_config

from .envs import MODULE, IterationTaskFn, PhaseSchedule, TaskEnv, TaskMetrics, find_callbacks, task_from_iteration

PLACES = [(w, v) for w in (1, 2) for v in (0, 1, 2)]
EPISODE_LEN = 4
BASE = {
    "num_workers": 2,
    "num_envs_per_worker": 3,
    "rollout_fragment_length": 8,
    "model": {"fcnet_hiddens": [8]},
    "metrics_num_episodes_for_smoothing": 12,
    "env_config": {"episode_len": EPISODE_LEN},
    "seed": 0,
}


def base(trainer_cls) -> dict:
    """BASE for ``trainer_cls``: 48 env steps (one round) per iteration."""
    return {**BASE, **iteration_config(trainer_cls, 48)}


def train(trainer, iterations: int) -> dict:
    """Train ``iterations`` times; return the last result (whose window holds that iteration's 12 episodes)."""
    for _ in range(iterations):
        result = trainer.train()
    assert result["episodes_this_iter"] == 12
    return result


def assert_every_env_has(trainer, task: int, result: dict | None = None, places: list = PLACES) -> None:
    """Asked through foreach_env and get_tasks, and (with ``result``) seen by every episode of the window."""
    assert trainer.foreach_env(lambda env: env.place()) == places
    assert trainer.foreach_env(lambda env: env.get_task()) == [task] * len(places)
    assert trainer.get_tasks() == {place: task for place in places}
    if result is not None:
        metrics = result["custom_metrics"]
        assert (metrics["task_min"], metrics["task_max"]) == (task, task)
        assert metrics["place_ok_min"] == 1.0
        assert result["curriculum_task"] == task


# --- one trainer for ways 1-3 and for crashes, recreated workers, restore, evaluation ----------
# PPO only: a dozen iterations on 2 worker processes, one killed. DQN runs ways 3 and 4, set_task
# and tasks across checkpoints below (the task is pushed by the Trainer, not the algorithm).


@pytest.fixture(scope="module")
def task_fn():
    return IterationTaskFn()


@pytest.fixture(scope="module")
def trainer(task_fn, tmp_path_factory):
    t = PPO(
        config={
            **base(PPO),
            "callbacks": [TaskMetrics, PhaseSchedule],
            "env_task_fn": task_fn,
            "restart_failed_sub_environments": True,
            "recreate_failed_workers": True,
        },
        env=TaskEnv,
        results_dir=tmp_path_factory.mktemp("results"),
    )
    yield t
    t.stop()


def test_envs_start_with_their_config_task_and_report_it(trainer):
    assert_every_env_has(trainer, 0)
    result = train(trainer, 1)
    assert result["custom_metrics"]["task_max"] == 0
    assert result["curriculum_task"] == 0


def test_way1_a_loop_calling_foreach_env_reaches_every_env(trainer):
    trainer.foreach_env(lambda env: env.set_phase(11))
    assert_every_env_has(trainer, 11)
    assert_every_env_has(trainer, 11, train(trainer, 2))


def test_way2_an_on_train_result_callback_calling_foreach_env_reaches_every_env(trainer):
    schedule = find_callbacks(trainer.callbacks, PhaseSchedule)
    schedule.schedule[trainer.iteration + 1] = 12
    pushed = trainer.train()
    assert pushed["phase_pushed"] == 12
    assert pushed["curriculum_task"] == 12  # the result of the iteration that changed it already says so
    assert_every_env_has(trainer, 12)
    assert_every_env_has(trainer, 12, train(trainer, 2))


def test_way3_env_task_fn_reaches_every_env(trainer, task_fn):
    task_fn.schedule[trainer.iteration + 1] = 13
    assert trainer.train()["curriculum_task"] == 13
    assert_every_env_has(trainer, 13)
    assert_every_env_has(trainer, 13, train(trainer, 2))


def test_env_task_fn_may_give_each_env_its_own_task(trainer, task_fn):
    iteration = trainer.iteration + 1
    task_fn.schedule[iteration] = 20
    task_fn.per_env.add(iteration)
    trainer.train()
    expected = {(w, v): 20 + 10 * w + v for w, v in PLACES}
    assert trainer.get_tasks() == expected
    assert trainer.foreach_env_with_context(
        lambda env, ctx: env.get_task() == 20 + 10 * ctx.worker_index + ctx.vector_index
    ) == [True] * 6
    result = train(trainer, 2)
    assert sorted(result["curriculum_task"]) == sorted(expected.values())  # no single task: all of them
    metrics = result["custom_metrics"]
    assert (metrics["task_min"], metrics["task_max"], metrics["task_mean"]) == (30, 42, 36)


def test_set_task_is_only_called_when_the_task_changes(trainer, task_fn):
    trainer.set_task(14)
    calls = trainer.foreach_env(lambda env: env.set_task_calls)
    trainer.set_task(14)  # the same task again
    iteration = trainer.iteration
    task_fn.schedule.update({iteration + 1: 14, iteration + 2: 14})  # env_task_fn returning the current task
    train(trainer, 3)  # + one iteration where env_task_fn returns env.get_task()
    assert trainer.foreach_env(lambda env: env.set_task_calls) == calls
    task_fn.schedule[trainer.iteration + 1] = 15
    train(trainer, 2)
    assert trainer.foreach_env(lambda env: env.set_task_calls) == [c + 1 for c in calls]
    assert_every_env_has(trainer, 15)


def test_task_survives_an_env_rebuilt_after_a_crash(trainer):
    trainer.set_task(21)
    restarts = sum(trainer.foreach_worker(lambda w: w.num_env_restarts()))
    crashed = [(1, 0), (2, 2)]
    trainer.foreach_env(lambda env: env.arm_crash() if env.place() in crashed else None)
    result = train(trainer, 2)
    assert sum(trainer.foreach_worker(lambda w: w.num_env_restarts())) == restarts + 2
    rebuilt = trainer.foreach_env_with_context(lambda env, ctx: (env.place(), ctx.recreated, env.set_task_calls))
    for place, recreated, set_task_calls in rebuilt:
        if place in crashed:
            assert recreated and set_task_calls == 1, place  # a new env, given the task once
    assert_every_env_has(trainer, 21, result)


def test_task_survives_a_recreated_worker(trainer):
    trainer.set_task(31)
    worker = trainer.workers.remote_workers[0]
    old_pid = worker.pid
    restarts = train(trainer, 1)["num_worker_restarts"]
    os.kill(old_pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while worker.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    result = train(trainer, 2)
    assert result["num_worker_restarts"] == restarts + 1
    new_pid = trainer.workers.remote_workers[0].pid
    assert new_pid != old_pid
    assert trainer.foreach_env(lambda env: env.pid)[:3] == [new_pid] * 3
    assert trainer.foreach_env(lambda env: env.set_task_calls)[:3] == [1, 1, 1]  # new envs, given the task once
    assert find_callbacks(trainer.callbacks, TaskMetrics).recreated[-1] == 1
    assert_every_env_has(trainer, 31, result)


def test_tasks_survive_save_and_restore(trainer, task_fn, tmp_path):
    iteration = trainer.iteration + 1
    task_fn.schedule[iteration] = 40
    task_fn.per_env.add(iteration)
    trainer.train()
    expected = {(w, v): 40 + 10 * w + v for w, v in PLACES}
    assert trainer.get_tasks() == expected
    path = trainer.save(tmp_path / "checkpoint")
    saved = json.loads((tmp_path / "checkpoint" / "rltune_checkpoint.json").read_text())["env_tasks"]
    assert sorted(map(tuple, saved)) == sorted((w, v, t) for (w, v), t in expected.items())

    trainer.set_task(99)
    assert_every_env_has(trainer, 99)
    trainer.restore(path)
    assert trainer.get_tasks() == expected
    assert trainer.foreach_env(lambda env: env.get_task()) == [expected[p] for p in PLACES]
    metrics = train(trainer, 2)["custom_metrics"]
    assert (metrics["task_min"], metrics["task_max"], metrics["task_mean"]) == (50, 62, 56)


def test_evaluation_env_gets_the_task_of_every_way(trainer, task_fn):
    def eval_return() -> float:
        return trainer.evaluate(2)["evaluation"]["episode_reward_mean"]

    trainer.set_task(5)
    assert eval_return() == 5 * EPISODE_LEN
    trainer.set_task(6)  # the evaluation env exists now: set_task reaches it too
    assert eval_return() == 6 * EPISODE_LEN
    trainer.foreach_env(lambda env: env.set_phase(7))
    assert eval_return() == 7 * EPISODE_LEN
    task_fn.schedule[trainer.iteration + 1] = 8
    trainer.train()
    assert eval_return() == 8 * EPISODE_LEN


# --- way 4: CurriculumCallback end to end, and its state across from_checkpoint ----------------

CURRICULUM = {
    "metric": "episode_reward_mean",  # = task * 4 here
    "phases": [
        {"task": 1, "threshold": 4, "min_iterations": 2},
        {"task": 2, "threshold": 8, "patience": 2},
        {"task": 3, "demote_below": 12.5, "patience": 2},  # always demoted (returns are 12), after 2 iterations
    ],
}
# Phase after each iteration: promoted after min_iterations 2, after patience 2,
# demoted after patience 2, promoted again after patience 2, then 1 of 2 iterations towards a demotion.
EXPECTED_PHASES = [0, 1, 1, 2, 2, 1, 1, 2, 2]


@pytest.fixture(scope="module")
def curriculum_run(trainer_cls, tmp_path_factory):
    """Nine iterations of a CurriculumCallback run, then a checkpoint; the trainer is stopped."""
    results_dir = tmp_path_factory.mktemp("curriculum")
    trainer = trainer_cls(
        config={**base(trainer_cls), "env": f"{MODULE}:TaskEnv", "callbacks": f"{MODULE}:TaskMetrics", "curriculum": CURRICULUM},
        results_dir=results_dir,
    )
    try:
        initial = trainer.foreach_env(lambda env: env.get_task())
        results, tasks_seen = [], []
        for _ in EXPECTED_PHASES:
            results.append(train(trainer, 1))
            tasks_seen.append(trainer.foreach_env(lambda env: env.get_task()))
        tasks = trainer.get_tasks()
        path = trainer.save(results_dir / "checkpoint")
    finally:
        trainer.stop()
    return {"initial": initial, "results": results, "tasks_seen": tasks_seen, "tasks": tasks, "path": path}


def test_curriculum_callback_sets_the_first_task_at_start(curriculum_run):
    assert curriculum_run["initial"] == [1] * 6


def test_curriculum_callback_promotes_and_demotes_every_env_of_every_worker(curriculum_run):
    results = curriculum_run["results"]
    phases = [r["curriculum_phase"] for r in results]
    assert phases == EXPECTED_PHASES
    expected_tasks = [CURRICULUM["phases"][p]["task"] for p in phases]
    assert [r["curriculum_task"] for r in results] == expected_tasks
    assert curriculum_run["tasks_seen"] == [[task] * 6 for task in expected_tasks]
    # The episodes of each iteration ran with the task set after the previous one.
    ran_with = [1] + expected_tasks[:-1]
    for result, task in zip(results, ran_with):
        metrics = result["custom_metrics"]
        assert (metrics["task_min"], metrics["task_max"]) == (task, task), result["training_iteration"]
        assert result["episode_reward_mean"] == task * EPISODE_LEN
    assert curriculum_run["tasks"] == {place: 3 for place in PLACES}


def test_curriculum_phase_and_tasks_survive_from_checkpoint(trainer_cls, curriculum_run, tmp_path):
    # Into 1 worker x 3 envs (2 rounds of 24 steps per iteration: still 12 episodes of 4 steps).
    trainer = trainer_cls.from_checkpoint(curriculum_run["path"], config_overrides={"num_workers": 1}, results_dir=tmp_path)
    places = [(1, v) for v in range(3)]
    try:
        assert_every_env_has(trainer, 3, places=places)
        assert trainer.evaluate(2)["evaluation"]["episode_reward_mean"] == 3 * EPISODE_LEN
        # The saved run was one iteration into its 2-iteration demotion: the next one demotes.
        result = train(trainer, 1)
        assert result["training_iteration"] == len(EXPECTED_PHASES) + 1
        assert (result["curriculum_phase"], result["curriculum_task"]) == (1, 2)
        assert result["custom_metrics"]["task_max"] == 3
        assert_every_env_has(trainer, 2, places=places)
    finally:
        trainer.stop()


# --- env_task_fn and set_task in one process ---------------------------------------------------

LOCAL = {
    "num_envs_per_worker": 2,
    "rollout_fragment_length": 8,
    "model": {"fcnet_hiddens": [8]},
}


def local(trainer_cls, **config) -> dict:
    """LOCAL for ``trainer_cls``: 16 env steps (one round) per iteration, ``config`` on top."""
    return {**LOCAL, **iteration_config(trainer_cls, 16), **config}


def test_env_task_fn_gets_result_env_and_context_and_sets_only_changes(trainer_cls, tmp_path):
    seen = []

    def env_task_fn(result, env, env_context):
        place = (env_context.worker_index, env_context.vector_index)
        seen.append((result["training_iteration"], type(env).__name__, *place))
        return 1 + result["training_iteration"] // 3

    with trainer_cls(
        config=local(trainer_cls, env_config={"task": 1}, env_task_fn=env_task_fn), env=TaskEnv, results_dir=tmp_path
    ) as trainer:
        tasks = [trainer.train()["curriculum_task"] for _ in range(7)]
        assert tasks == [1, 1, 2, 2, 2, 3, 3]
        assert trainer.foreach_env(lambda env: env.set_task_calls) == [2, 2]
        assert seen[:2] == [(1, "TaskEnv", 0, 0), (1, "TaskEnv", 0, 1)]
        assert len(seen) == 14


def test_set_task_reaches_a_task_env_under_gymnasium_wrappers(trainer_cls, tmp_path):
    register_env("wrapped_task_env", lambda ctx: gym.wrappers.TimeLimit(TaskEnv(ctx), max_episode_steps=100))
    with trainer_cls(config=local(trainer_cls, env="wrapped_task_env"), results_dir=tmp_path) as trainer:
        trainer.set_task(5)
        assert trainer.foreach_env(lambda env: env.unwrapped.get_task()) == [5, 5]
        assert trainer.get_tasks() == {(0, 0): 5, (0, 1): 5}
        assert trainer.train()["curriculum_task"] == 5


def test_from_checkpoint_runs_an_env_task_fn_only_when_the_caller_gives_it(trainer_cls, tmp_path):
    """A checkpoint is data: the env_task_fn it names is not run; given again in config_overrides, it is."""
    config = local(trainer_cls, env_task_fn=task_from_iteration)
    with trainer_cls(config=config, env=TaskEnv, results_dir=tmp_path) as trainer:
        trainer.train()
        trainer.train()
        assert trainer.get_tasks() == {(0, 0): 102, (0, 1): 102}
        path = trainer.save(tmp_path / "checkpoint")
    with pytest.raises(CheckpointError, match="config key 'env_task_fn'.*config_overrides"):
        trainer_cls.from_checkpoint(path, results_dir=tmp_path)
    restored = trainer_cls.from_checkpoint(path, {"env_task_fn": task_from_iteration}, results_dir=tmp_path)
    try:
        assert restored.get_tasks() == {(0, 0): 102, (0, 1): 102}
        assert restored.train()["curriculum_task"] == 103  # env_task_fn still runs after every iteration
    finally:
        restored.stop()


# --- CurriculumCallback's rules, with a fake trainer ---------------------------------------------


class FakeTrainer:
    """Records the tasks the callback sets."""

    def __init__(self) -> None:
        self.tasks: list = []

    def set_task(self, task) -> None:
        self.tasks.append(task)


def run(callback: CurriculumCallback, trainer: FakeTrainer, values, metric: str = "episode_reward_mean") -> list[int]:
    """Feed one result per value (None: the metric is missing); return the phase after each."""
    phases = []
    for value in values:
        result = {"training_iteration": len(phases) + 1}
        if value is not None:
            result[metric] = value
        callback.on_train_result(trainer=trainer, result=result)
        assert result["curriculum_task"] == callback.curriculum.phases[result["curriculum_phase"]].task
        phases.append(result["curriculum_phase"])
    return phases


def test_on_trainer_init_and_on_checkpoint_loaded_set_the_current_phase_task():
    callback = CurriculumCallback({"phases": [{"task": "easy", "threshold": 1}, {"task": "hard"}]})
    trainer = FakeTrainer()
    callback.on_trainer_init(trainer=trainer)
    assert trainer.tasks == ["easy"]
    callback.set_state({"phase": 1})
    callback.on_checkpoint_loaded(trainer=trainer)
    assert trainer.tasks == ["easy", "hard"]


def test_promotion_waits_for_min_iterations():
    callback = CurriculumCallback({"phases": [{"task": "a", "threshold": 1, "min_iterations": 3}, {"task": "b"}]})
    trainer = FakeTrainer()
    assert run(callback, trainer, [5, 5, 5, 5]) == [0, 0, 1, 1]
    assert trainer.tasks == ["b"]


def test_promotion_needs_patience_consecutive_results_over_the_threshold():
    callback = CurriculumCallback({"phases": [{"task": "a", "threshold": 1, "patience": 3}, {"task": "b"}]})
    trainer = FakeTrainer()
    assert run(callback, trainer, [5, 5, 0, 5, 5, 5]) == [0, 0, 0, 0, 0, 1]
    assert trainer.tasks == ["b"]


@pytest.mark.parametrize(
    "values, phases",
    [
        ([5, 5, 5], [0, 0, 1]),  # both hold at iteration 3
        ([0, 0, 5, 5], [0, 0, 0, 1]),  # min_iterations met at 3, patience only at 4
        ([5, 5, 0, 5], [0, 0, 0, 0]),  # the streak broke at 3
    ],
)
def test_min_iterations_and_patience_must_both_hold(values, phases):
    callback = CurriculumCallback(
        {"phases": [{"task": "a", "threshold": 1, "min_iterations": 3, "patience": 2}, {"task": "b"}]}
    )
    assert run(callback, FakeTrainer(), values) == phases


def test_threshold_is_inclusive_and_one_phase_per_iteration():
    phases = [{"task": i, "threshold": 10} for i in range(3)] + [{"task": 3}]
    callback = CurriculumCallback({"phases": phases})
    trainer = FakeTrainer()
    assert run(callback, trainer, [10, 1000, 1000, 1000, 1000]) == [1, 2, 3, 3, 3]
    assert trainer.tasks == [1, 2, 3]


def test_demotion_after_patience_results_below_demote_below():
    callback = CurriculumCallback(
        {
            "phases": [
                {"task": "a", "threshold": 1},
                {"task": "b", "threshold": 10, "demote_below": 0.5, "patience": 2},
                {"task": "c"},
            ]
        }
    )
    trainer = FakeTrainer()
    assert run(callback, trainer, [5, 0.2, 0.7, 0.2, 0.2, 5]) == [1, 1, 1, 1, 0, 1]
    assert trainer.tasks == ["b", "a", "b"]


def test_first_phase_is_never_demoted_and_last_never_promoted():
    callback = CurriculumCallback(
        {"phases": [{"task": "a", "threshold": 1, "demote_below": 0.5}, {"task": "b"}]}
    )
    trainer = FakeTrainer()
    assert run(callback, trainer, [0, 0, 0, 5, 1e9, 1e9]) == [0, 0, 0, 1, 1, 1]
    assert trainer.tasks == ["b"]


def test_a_threshold_on_the_last_phase_never_moves_past_it():
    """The last phase may carry a threshold (or the block is rejected, naming it): never an IndexError."""
    block = {"phases": [{"task": "a", "threshold": 1}, {"task": "b", "threshold": 1}]}
    try:
        callback = CurriculumCallback(block)
    except ConfigError as exc:
        assert "curriculum.phases.1.threshold" in str(exc)
        return
    trainer = FakeTrainer()
    assert run(callback, trainer, [5, 5, 5]) == [1, 1, 1]
    assert trainer.tasks == ["b"]


def test_missing_or_nan_metric_neither_moves_nor_keeps_a_streak():
    callback = CurriculumCallback({"phases": [{"task": "a", "threshold": 1, "patience": 2}, {"task": "b"}]})
    trainer = FakeTrainer()
    assert run(callback, trainer, [5, math.nan, 5, None, 5, 5]) == [0, 0, 0, 0, 0, 1]


def test_phase_metric_overrides_the_block_metric_and_nested_keys_are_read():
    callback = CurriculumCallback(
        {
            "metric": "custom_metrics/success_mean",
            "phases": [
                {"task": "a", "threshold": 0.9},
                {"task": "b", "threshold": 100, "metric": "evaluation.episode_reward_mean"},
                {"task": "c"},
            ],
        }
    )
    trainer = FakeTrainer()
    results = [
        {"custom_metrics": {"success_mean": 0.5}, "evaluation": {"episode_reward_mean": 500}},  # a stays
        {"custom_metrics": {"success_mean": 0.95}, "evaluation": {"episode_reward_mean": 0}},  # a -> b
        {"custom_metrics": {"success_mean": 1.0}, "evaluation": {"episode_reward_mean": 50}},  # b stays
        {"custom_metrics": {"success_mean": 0.0}, "evaluation": {"episode_reward_mean": 150}},  # b -> c
    ]
    phases = []
    for result in results:
        callback.on_train_result(trainer=trainer, result=result)
        phases.append(result["curriculum_phase"])
    assert phases == [0, 1, 1, 2]
    assert trainer.tasks == ["b", "c"]


def test_state_round_trip_continues_the_same_schedule():
    block = {
        "phases": [
            {"task": "a", "threshold": 1, "min_iterations": 2},
            {"task": "b", "threshold": 10, "patience": 3, "demote_below": 0.5},
            {"task": "c"},
        ]
    }
    values = [5, 5, 20, 20, 0.1, 20, 20, 20, 0]
    reference = run(CurriculumCallback(block), FakeTrainer(), values)
    assert reference == [0, 1, 1, 1, 1, 1, 1, 2, 2]
    for cut in range(1, len(values)):
        first = CurriculumCallback(block)
        head = run(first, FakeTrainer(), values[:cut])
        second = CurriculumCallback(block)
        second.set_state(json.loads(json.dumps(first.get_state())))  # as saved in a checkpoint
        assert head + run(second, FakeTrainer(), values[cut:]) == reference, cut


# --- invalid curriculum blocks ----------------------------------------------------------------


@pytest.mark.parametrize(
    "block, expected",
    [
        ({}, ["curriculum.phases"]),
        ({"phases": []}, ["curriculum.phases"]),
        ({"phases": [{"threshold": 1}, {"task": 2}]}, ["curriculum.phases.0.task"]),
        ({"phases": [{"task": 1, "threshold": 1, "patience": 0}, {"task": 2}]}, ["curriculum.phases.0.patience"]),
        (
            {"phases": [{"task": 1, "threshold": 1, "min_iterations": -1}, {"task": 2}]},
            ["curriculum.phases.0.min_iterations"],
        ),
        ({"phases": [{"task": 1, "threshold": "high"}, {"task": 2}]}, ["curriculum.phases.0.threshold"]),
        ({"phases": [{"task": 1, "treshold": 2}]}, ["curriculum.phases.0.treshold", "unknown key"]),
        ({"metrc": "x", "phases": [{"task": 1}]}, ["curriculum.metrc", "unknown key"]),
        ({"phases": [{"task": 1}, {"task": 2}]}, ["curriculum", "phases[0]", "threshold"]),
    ],
)
def test_invalid_curriculum_block_is_a_config_error_naming_the_path(trainer_cls, block, expected):
    start = time.monotonic()
    with pytest.raises(ConfigError) as info:
        trainer_cls(config={"env": "CartPole-v1", "num_workers": 2, "curriculum": block})
    assert time.monotonic() - start < 5  # rejected before any worker process starts
    message = str(info.value)
    for text in expected:
        assert text in message, message
    with pytest.raises(ConfigError) as direct:
        CurriculumCallback(block)
    for text in expected:
        assert text in str(direct.value)


def test_every_problem_of_a_curriculum_block_is_reported_at_once(trainer_cls):
    block = {"phases": [{"task": 1, "threshold": 1, "patience": 0}, {"task": 2, "colour": "red"}]}
    with pytest.raises(ConfigError) as info:
        trainer_cls(config={"env": "CartPole-v1", "curriculum": block})
    problems = "\n".join(info.value.problems)
    assert "curriculum.phases.0.patience" in problems
    assert "curriculum.phases.1.colour" in problems


def test_curriculum_must_be_a_mapping_and_env_task_fn_a_function(trainer_cls):
    with pytest.raises(ConfigError, match="curriculum"):
        trainer_cls(config={"env": "CartPole-v1", "curriculum": [{"task": 1}]})
    with pytest.raises(ConfigError, match="env_task_fn"):
        trainer_cls(config={"env": "CartPole-v1", "env_task_fn": 3})


def test_phase_and_task_survive_trainer_restore_into_a_fresh_trainer(tmp_path):
    """Resume, a retried trial and PBT's exploit all restore with ``trainer.restore`` into a new trainer."""
    block = {"phases": [{"task": 1, "threshold": 4}, {"task": 2, "threshold": 8}, {"task": 3}]}
    config = local(PPO, env=f"{MODULE}:TaskEnv", curriculum=block, metrics_num_episodes_for_smoothing=4)
    with PPO(config=config, results_dir=tmp_path) as trainer:
        phases = [trainer.train()["curriculum_phase"] for _ in range(3)]
        path = trainer.save(tmp_path / "checkpoint")
    assert phases == [1, 2, 2]
    saved = json.loads((tmp_path / "checkpoint" / "rltune_checkpoint.json").read_text())["callbacks_state"]
    assert saved["phase"] == 2
    with PPO(config=config, results_dir=tmp_path) as fresh:
        assert fresh.foreach_env(lambda env: env.get_task()) == [1, 1]  # a new trainer starts at phase 0
        fresh.restore(path)
        assert fresh.foreach_env(lambda env: env.get_task()) == [3, 3]
        result = fresh.train()
        assert (result["curriculum_phase"], result["curriculum_task"]) == (2, 3)
        assert result["episode_reward_mean"] == 3 * EPISODE_LEN  # the episodes ran with the restored task
