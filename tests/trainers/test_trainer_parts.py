"""The trainer's parts on their own: each collaborator works on a TrainerParts, none needs a Trainer.

Trainer was a class with three mixins (checkpoints, evaluation, policy set)
sharing its attributes; now each is a collaborator with an explicit
interface (``TrainerPolicies``, ``TrainerEvaluation``, ``TrainerCheckpoints``
over the shared ``TrainerParts`` and ``TrainingProgress``), driven here over
a WorkerSet and an Algorithm built by hand.
"""

from __future__ import annotations

import math
from typing import Any, Iterator

import numpy as np
import pytest

from rltune.errors import CheckpointError, ConfigError
from rltune.env._registry import resolve_env
from rltune.trainers import PPO, PolicySpec
from rltune.trainers._trainer_evaluation import TrainerEvaluation
from rltune.trainers._trainer_policies import TrainerPolicies
from rltune.trainers.algorithms._algorithm import StepOutcome
from rltune.trainers._trainer_parts import (
    TrainerParts,
    TrainingProgress,
    episode_stats,
    most_common,
    trainer_callbacks,
)
from rltune.trainers.checkpoints._trainer_checkpoints import TrainerCheckpoints
from rltune.trainers.sampling._sample_batch import EpisodeMetrics
from rltune.trainers.sampling._worker_set import WorkerSet

from .multi_agent_envs import TurnGame

TINY = {"train_batch_size": 16, "rollout_fragment_length": 8, "sgd_minibatch_size": 8, "num_sgd_iter": 1,
        "model": {"fcnet_hiddens": [8]}, "num_workers": 0, "seed": 3}


def by_player(agent_id: Any, *args: Any, **kwargs: Any) -> str:
    return f"pol_{agent_id}"


MULTI = {"env": TurnGame, "multiagent": {"policies": ["pol_x", "pol_o"], "policy_mapping_fn": by_player}, **TINY}


def make_parts(config: dict[str, Any]) -> TrainerParts:
    """A trainer's parts without a Trainer: PPO's validated config, the rollout workers and the algorithm."""
    cfg = PPO.validate(config)
    env_spec = resolve_env(cfg.env)
    workers = WorkerSet(env_spec, cfg, PPO.policy_class, "cpu")
    local = workers.local_worker
    rng = np.random.default_rng(0)
    algorithm = PPO.algorithm_class(cfg, local.policy_set, workers, rng)  # the algorithm owns the set the local worker acts with
    return TrainerParts("PPO", cfg, cfg.model_dump(by_alias=True), env_spec, PPO.policy_class, workers, algorithm,
                        trainer_callbacks(cfg), rng, TrainingProgress(cfg.metrics_num_episodes_for_smoothing))


@pytest.fixture
def parts() -> Iterator[TrainerParts]:
    made = make_parts({"env": "CartPole-v1", **TINY})
    yield made
    made.workers.stop()


@pytest.fixture
def multi_parts() -> Iterator[TrainerParts]:
    made = make_parts(MULTI)
    yield made
    made.workers.stop()


def episode(reward: float, length: int = 5, agent_rewards: list | None = None) -> EpisodeMetrics:
    return EpisodeMetrics(episode_reward=reward, episode_length=length, agent_rewards=agent_rewards or [])


# -- TrainingProgress ---------------------------------------------------------------------------
def test_progress_counts_iterations_and_keeps_a_window_of_episodes() -> None:
    progress = TrainingProgress(window_size=2)
    progress.record(StepOutcome(env_steps=10, episodes=[episode(1.0), episode(2.0)]))
    progress.record(StepOutcome(env_steps=6, episodes=[episode(4.0)], agent_steps=12))
    assert (progress.iteration, progress.timesteps_total, progress.agent_timesteps_total) == (2, 16, 22)
    assert progress.episodes_total == 3
    result = progress.result(StepOutcome(env_steps=6, episodes=[episode(4.0)]), 2.0, num_nonfinite_updates=0)
    assert result["episode_reward_mean"] == 3.0  # the window holds the last two episodes only
    assert result["training_iteration"] == 2 and result["env_steps_per_s"] == 3.0


def test_episode_stats_of_no_episodes_are_nan_and_per_policy_when_multi_agent() -> None:
    assert math.isnan(episode_stats([])["episode_reward_mean"])
    stats = episode_stats([episode(3.0, agent_rewards=[("x", "pol_x", 1.0), ("o", "pol_o", 2.0)])])
    assert stats["policy_reward_mean"] == {"pol_x": 1.0, "pol_o": 2.0}


def test_the_most_common_task_needs_no_hashable_tasks() -> None:
    assert most_common([]) is None
    assert most_common([{"level": 1}, {"level": 2}, {"level": 2}]) == {"level": 2}


# -- TrainerPolicies ----------------------------------------------------------------------------
def test_the_policy_set_adds_and_removes_policies_with_their_learners(multi_parts: TrainerParts) -> None:
    policies = TrainerPolicies(multi_parts)
    added = policies.add_policy("snapshot", PolicySpec(), policy=multi_parts.workers.local_worker.policy_map["pol_x"])
    assert set(multi_parts.algorithm.learners) == {"pol_x", "pol_o", "snapshot"}
    source = multi_parts.workers.local_worker.policy_map["pol_x"].get_weights()
    for key, value in added.get_weights().items():  # a frozen snapshot: pol_x's weights
        np.testing.assert_array_equal(value, source[key])
    state = policies.specs_state()
    assert state["snapshot"]["observation_space"] == state["pol_x"]["observation_space"]
    policies.remove_policy("snapshot", policy_mapping_fn=by_player)
    assert "snapshot" not in multi_parts.algorithm.learners
    with pytest.raises(ConfigError, match="no policy 'snapshot'"):
        policies.remove_policy("snapshot")


def test_the_policy_set_adds_a_checkpoints_policies_and_takes_them_back(multi_parts: TrainerParts) -> None:
    saved = TrainerPolicies(multi_parts).specs_state()
    saved["league_1"] = dict(saved["pol_x"])
    policies = TrainerPolicies(multi_parts)
    assert policies.add_saved("ckpt", saved) == ["league_1"]
    assert "league_1" in multi_parts.workers.local_worker.policy_map
    policies.remove_saved(["league_1"])
    assert "league_1" not in multi_parts.workers.local_worker.policy_map
    assert "league_1" not in multi_parts.algorithm.learners


def test_a_single_agent_policy_set_refuses_add_policy(parts: TrainerParts) -> None:
    with pytest.raises(ConfigError, match="single-agent"):
        TrainerPolicies(parts).add_policy("other", PolicySpec())
    assert TrainerPolicies(parts).specs_state() == {}


# -- TrainerEvaluation --------------------------------------------------------------------------
def test_evaluation_runs_episodes_in_its_own_worker_with_the_task_it_is_given(parts: TrainerParts) -> None:
    asked: list[str] = []
    evaluation = TrainerEvaluation(parts, PPO.validate, lambda: asked.append("task") or None)
    try:
        stats = evaluation.evaluate(2)["evaluation"]
        assert stats["episodes_this_iter"] == 2 and stats["episode_reward_mean"] > 0
        assert asked == ["task"]  # no task given: the training envs' current one was asked for
        assert list(evaluation.workers) == [1]  # num_envs_per_worker 1: one evaluation worker of one env
    finally:
        evaluation.stop()


def test_periodic_evaluation_carries_the_latest_stats_between_intervals(parts: TrainerParts) -> None:
    parts.cfg = parts.cfg.model_copy(update={"evaluation_interval": 2, "evaluation_duration": 1})
    evaluation = TrainerEvaluation(parts, PPO.validate, lambda: None)
    try:
        parts.progress.iteration = 1
        first = evaluation.periodic()
        assert first["episodes_this_iter"] == 1 and parts.progress.last_evaluation == first
        parts.progress.iteration = 3
        carried = evaluation.periodic()
        assert carried["episodes_this_iter"] == 0 and carried["episode_reward_mean"] == first["episode_reward_mean"]
    finally:
        evaluation.stop()


# -- TrainerCheckpoints -------------------------------------------------------------------------
class Hooks:
    """The algorithm state hooks of a trainer (AlgorithmStateHooks), recording what they were given."""

    def __init__(self, fail_set: bool = False) -> None:
        self.values: dict[str, Any] = {"updates": 7}
        self.fail_set = fail_set

    def get_algorithm_state(self) -> tuple[dict[str, Any], dict[str, Any]]:
        return dict(self.values), {}

    def set_algorithm_state(self, values: dict[str, Any], tensors: dict[str, Any]) -> None:
        if self.fail_set:
            raise ValueError("an optimizer state for other parameters")
        self.values = dict(values)

    def checkpoint_array_names(self) -> list[str]:
        return []

    def get_checkpoint_arrays(self) -> dict[str, dict[str, np.ndarray]]:
        return {}

    def set_checkpoint_arrays(self, arrays: dict[str, dict[str, np.ndarray] | None]) -> None:
        pass


def checkpoints_of(parts: TrainerParts, hooks: Hooks, logdir: Any) -> TrainerCheckpoints:
    return TrainerCheckpoints(parts, hooks, TrainerPolicies(parts), parts.workers.set_task, lambda: logdir)


def test_checkpoints_save_and_restore_the_progress_weights_and_algorithm_state(parts: TrainerParts, tmp_path) -> None:
    parts.progress.record(StepOutcome(env_steps=40, episodes=[episode(9.0)]))
    path = checkpoints_of(parts, Hooks(), tmp_path).save()
    assert path.endswith("checkpoint_000001")
    other = make_parts({"env": "CartPole-v1", **{**TINY, "seed": 4}})
    try:
        hooks = Hooks()
        hooks.values = {}
        checkpoints_of(other, hooks, tmp_path).restore(path)
        assert (other.progress.iteration, other.progress.timesteps_total) == (1, 40)
        assert [e.episode_reward for e in other.progress.episode_window] == [9.0]
        assert hooks.values == {"updates": 7}
        saved = parts.workers.local_worker.get_weights()["default_policy"]
        restored = other.workers.local_worker.get_weights()["default_policy"]
        for key in saved:
            np.testing.assert_array_equal(saved[key], restored[key])
    finally:
        other.workers.stop()


def test_a_restore_that_fails_in_a_hook_leaves_the_parts_as_they_were(parts: TrainerParts, tmp_path) -> None:
    parts.progress.record(StepOutcome(env_steps=40))
    path = checkpoints_of(parts, Hooks(), tmp_path).save(tmp_path / "ckpt")
    other = make_parts({"env": "CartPole-v1", **{**TINY, "seed": 4}})
    try:
        before = other.workers.local_worker.get_weights()["default_policy"]
        with pytest.raises(CheckpointError, match="algorithm state"):
            checkpoints_of(other, Hooks(fail_set=True), tmp_path).restore(path)
        assert (other.progress.iteration, other.progress.timesteps_total) == (0, 0)
        after = other.workers.local_worker.get_weights()["default_policy"]
        for key in before:
            np.testing.assert_array_equal(before[key], after[key])
    finally:
        other.workers.stop()


# -- the Trainer composes them ------------------------------------------------------------------
class CountingPPO(PPO):
    """A user's subclass overriding a checkpoint hook: the checkpoints collaborator calls the override."""

    def get_algorithm_state(self) -> tuple[dict[str, Any], dict[str, Any]]:
        values, tensors = super().get_algorithm_state()
        return {**values, "user": 1}, tensors


def test_the_trainer_delegates_to_its_collaborators_over_one_set_of_parts(tmp_path) -> None:
    with CountingPPO({"env": "CartPole-v1", **TINY}, results_dir=tmp_path) as trainer:
        assert trainer.checkpoints.parts is trainer.parts is trainer.evaluation.parts is trainer.policy_changes.parts
        trainer.train()
        assert trainer.iteration == trainer.progress.iteration == 1
        trainer.iteration = 5  # the counters are the progress's, settable as before
        assert trainer.progress.iteration == 5
        path = trainer.save()
        assert path.endswith("checkpoint_000005")
        values, _ = trainer.checkpoints.hooks.get_algorithm_state()
        assert values["user"] == 1
