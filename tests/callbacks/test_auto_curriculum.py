"""Automatic curricula end to end: envs draw their tasks, statistics come back with the episodes, the
distribution reaches every worker, and the curriculum's state survives checkpoints.

``SpaceTaskEnv`` declares the tasks 1, 2, 3 (``task_space``); every step pays the task, episodes
last 4 steps, so an episode's return is 4 x its task, and ``TaskMetrics`` reports each episode's task.
"""

from __future__ import annotations

import numpy as np
import pytest

from rltune.callbacks import AutoCurriculumCallback
from rltune.callbacks._auto_curriculum import find_picker
from rltune.errors import CallbackError, ConfigError
from rltune.trainers import PPO
from trainer_params import iteration_config

from .envs import MODULE, TaskEnv, find_callbacks

TASKS = [1, 2, 3]


def config(trainer_cls, curriculum: dict, **extra) -> dict:
    return {
        "env": f"{MODULE}:SpaceTaskEnv",
        "callbacks": f"{MODULE}:TaskMetrics",
        "num_workers": 1,
        "num_envs_per_worker": 3,
        "rollout_fragment_length": 8,
        "model": {"fcnet_hiddens": [8]},
        "env_config": {"episode_len": 4},
        "seed": 0,
        "curriculum": curriculum,
        **iteration_config(trainer_cls, 48),
        **extra,
    }


def worker_distributions(trainer) -> list:
    return trainer.foreach_worker(lambda w: (list(find_picker(w.callbacks).tasks), find_picker(w.callbacks).cdf))


@pytest.mark.parametrize("kind", ["learning_progress", "plr"])
def test_envs_draw_their_tasks_and_the_distribution_is_learned_from_every_workers_episodes(kind, tmp_path):
    with PPO(config=config(PPO, {"type": kind}), results_dir=tmp_path) as trainer:
        assert set(trainer.foreach_env(lambda env: env.get_task())) <= set(TASKS)  # drawn at start, not the env's 0
        seen = set()
        for _ in range(4):
            result = trainer.train()
            metrics = result["custom_metrics"]
            seen.update({metrics["task_min"], metrics["task_max"]})
            curriculum = result["curriculum"]
            assert set(curriculum["task_probs"]) == {"1", "2", "3"}
            assert np.isclose(sum(curriculum["task_probs"].values()), 1.0)
            assert sum(curriculum["task_episodes"].values()) == result["episodes_total"]
            assert not any(key.startswith("curriculum_") for key in result["hist_stats"])
            assert result["curriculum_task"] in TASKS
            # Every worker (the local one and the process) has the distribution of this result.
            probs = [curriculum["task_probs"][str(t)] for t in TASKS]
            for tasks, cdf in worker_distributions(trainer):
                assert tasks == TASKS and np.allclose(cdf, np.cumsum(probs))
        assert seen >= {1.0, 3.0}  # the envs ran several tasks
        if kind == "plr":
            assert set(curriculum["task_score"]) == {"1", "2", "3"}  # every task scored from the fragments


def test_learning_progress_state_survives_a_restore_into_a_fresh_trainer(tmp_path):
    curriculum = {"type": "learning_progress", "epsilon": 0.2}
    with PPO(config=config(PPO, curriculum), results_dir=tmp_path) as trainer:
        for _ in range(3):
            result = trainer.train()
        callback = find_callbacks(trainer.callbacks, AutoCurriculumCallback)
        state = callback.get_state()
        path = trainer.save(tmp_path / "checkpoint")
    assert state["tasks"] == TASKS and sum(state["sampler"]["episodes"]) == result["episodes_total"]
    with PPO(config=config(PPO, curriculum), results_dir=tmp_path) as fresh:
        fresh.restore(path)
        restored = find_callbacks(fresh.callbacks, AutoCurriculumCallback)
        assert restored.get_state() == state
        assert set(fresh.foreach_env(lambda env: env.get_task())) <= set(TASKS)  # redrawn, not the saved draws
        probs = [result["curriculum"]["task_probs"][str(t)] for t in TASKS]
        for tasks, cdf in worker_distributions(fresh):
            assert tasks == TASKS and np.allclose(cdf, np.cumsum(probs))
        after = fresh.train()
        assert sum(after["curriculum"]["task_episodes"].values()) == after["episodes_total"]


def test_tasks_from_the_block_and_a_task_range(tmp_path):
    curriculum = {"type": "plr", "task_range": {"low": 2, "high": 6, "step": 2}}
    cfg = config(PPO, curriculum, env=TaskEnv, num_workers=0)
    with PPO(config=cfg, results_dir=tmp_path) as trainer:
        assert set(trainer.foreach_env(lambda env: env.get_task())) <= {2, 4, 6}
        assert set(trainer.train()["curriculum"]["task_probs"]) == {"2", "4", "6"}


def test_evaluation_keeps_the_task_it_is_given(tmp_path):
    with PPO(config=config(PPO, {"type": "learning_progress"}, num_workers=0), results_dir=tmp_path) as trainer:
        trainer.train()
        assert trainer.evaluate(4, task=3)["evaluation"]["episode_reward_mean"] == 12.0


def test_an_env_without_tasks_is_named(tmp_path):
    with pytest.raises(CallbackError, match="curriculum.tasks or task_range, or a task_space on the env"):
        PPO(config=config(PPO, {"type": "plr"}, env=TaskEnv, num_workers=0), results_dir=tmp_path)


@pytest.mark.parametrize("block, expected", [
    ({"type": "curriculum"}, "curriculum.type: must be one of phases, learning_progress, plr, but got 'curriculum'"),
    ({"type": "plr", "temprature": 0.3}, "curriculum.temprature: unknown key"),
    ({"type": "plr", "temperature": 0}, "curriculum.temperature: Input should be greater than 0"),
    ({"type": "plr", "score": "value"}, "curriculum.score: Input should be 'positive_value_loss' or 'value_l1'"),
    ({"type": "learning_progress", "fast_alpha": 0.1, "slow_alpha": 0.5}, "slow_alpha (0.5) must be <= fast_alpha (0.1)"),
    ({"type": "learning_progress", "tasks": [1], "task_range": {"low": 1, "high": 2}}, "give tasks or task_range, not both"),
    ({"type": "learning_progress", "task_range": {"low": 3, "high": 1}}, "curriculum.task_range: high (1) must be >= low (3)"),
    ({"type": "learning_progress", "tasks": []}, "curriculum.tasks: List should have at least 1 item"),
])
def test_bad_automatic_curriculum_options_are_a_config_error_naming_the_key(block, expected, tmp_path):
    with pytest.raises(ConfigError) as info:
        PPO(config={"env": "CartPole-v1", "curriculum": block}, results_dir=tmp_path)
    assert expected in str(info.value)
    with pytest.raises(ConfigError):
        AutoCurriculumCallback(block)
