"""Observation and action spaces: what trains as-is, what is refused with a clear SpaceError.

Observation spaces are every trainer's (``trainer_cls``: PPO and DQN); action spaces differ
by algorithm (DQN takes Discrete only: tests/trainers/test_dqn.py), so their tests are PPO's.
"""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces

from rltune.errors import SpaceError
from rltune.trainers import PPO
from trainer_params import iteration_config
from rltune.trainers.policies._preprocessors import get_preprocessor as ObsPreprocessor

from .envs import BoxActionEnv, GridWorld, SpaceEnv, make_space

TINY = {
    "rollout_fragment_length": 12,
    "num_envs_per_worker": 2,
    "train_batch_size": 24,
    "sgd_minibatch_size": 12,
    "num_sgd_iter": 2,
    "model": {"fcnet_hiddens": [16]},
    "seed": 0,
}


def tiny(trainer_cls, steps: int = 24, **config) -> dict:
    """TINY for ``trainer_cls`` (``steps`` env steps per iteration), ``config`` on top."""
    if trainer_cls is PPO:
        return {**TINY, "train_batch_size": steps, **config}
    shared = {k: v for k, v in TINY.items() if k not in ("train_batch_size", "sgd_minibatch_size", "num_sgd_iter")}
    return {**shared, **iteration_config(trainer_cls, steps), **config}


@pytest.mark.parametrize(
    "name, flat_size",
    [
        ("box", 4),
        ("box_2d", 6),
        ("discrete", 5),  # one-hot
        ("discrete_start", 4),
        ("multi_discrete", 3 + 4),
        ("multi_binary", 3),
        ("tuple", 3 + 2),
        ("dict", 3 + 2 + 2 + 2),
    ],
)
def test_observation_space_trains(trainer_cls, name, flat_size):
    with trainer_cls(config=tiny(trainer_cls, env_config={"space": name}), env=SpaceEnv) as trainer:
        policy = trainer.get_policy()
        assert policy.preprocessor.size == flat_size
        for i in (1, 2):
            result = trainer.train()
            assert result["training_iteration"] == i
            assert np.isfinite(result["info"]["learner"]["default_policy"]["total_loss"])
        assert result["episode_len_mean"] == 6
        obs = make_space(name).sample()
        assert trainer.compute_single_action(obs) in (0, 1)


def test_a_box_obs_is_copied_so_an_env_may_reuse_its_array():
    obs = np.zeros((2, 2), np.float32)
    vec = ObsPreprocessor(spaces.Box(-1.0, 1.0, (2, 2), np.float32))(obs)
    obs[0, 0] = 1.0
    np.testing.assert_array_equal(vec, [0, 0, 0, 0])


def test_discrete_obs_is_one_hot():
    pre = ObsPreprocessor(spaces.Discrete(4, start=2))
    np.testing.assert_array_equal(pre(3), [0, 1, 0, 0])
    np.testing.assert_array_equal(pre(np.int64(5)), [0, 0, 0, 1])
    pre = ObsPreprocessor(spaces.MultiDiscrete([2, 3]))
    np.testing.assert_array_equal(pre(np.array([1, 2])), [0, 1, 0, 0, 1])
    batch = ObsPreprocessor(spaces.Discrete(3)).batch([0, 2])
    np.testing.assert_array_equal(batch, [[1, 0, 0], [0, 0, 1]])
    assert batch.dtype == np.float32


def test_grid_world_with_discrete_cell_obs_trains_as_is(trainer_cls):
    size = 4
    config = tiny(trainer_cls, 64, env_config={"size": size}, num_envs_per_worker=4, rollout_fragment_length=16)
    with trainer_cls(config=config, env=GridWorld) as trainer:
        assert trainer.get_policy().preprocessor.size == size * size
        for _ in range(3):
            result = trainer.train()
        assert result["timesteps_total"] == 3 * 64
        assert result["episodes_total"] > 0
        action = trainer.compute_single_action(0)
        assert spaces.Discrete(4).contains(action)


@pytest.mark.parametrize("name, space_name", [("text", "Text"), ("sequence", "Sequence"), ("graph", "Graph")])
def test_unsupported_observation_space_gives_space_error_naming_it(trainer_cls, name, space_name):
    with pytest.raises(SpaceError) as info:
        trainer_cls(config=tiny(trainer_cls, env_config={"space": name}), env=SpaceEnv)
    message = str(info.value)
    assert space_name in message
    assert "not supported" in message


def test_unsupported_observation_space_from_a_remote_worker():
    with pytest.raises(SpaceError, match="Sequence"):
        PPO(config={**TINY, "num_workers": 1, "env_config": {"space": "sequence"}}, env=SpaceEnv)


@pytest.mark.parametrize("action_space, space_name", [("text", "Text"), ("sequence", "Sequence")])
def test_unsupported_action_space_gives_space_error(action_space, space_name):
    with pytest.raises(SpaceError) as info:
        PPO(config={**TINY, "env_config": {"space": "box", "action_space": action_space}}, env=SpaceEnv)
    message = str(info.value)
    assert space_name in message and "PPO" in message and "MultiDiscrete, MultiBinary, Box" in message


def test_box_action_space_trains_and_actions_stay_in_bounds():
    with PPO(config=TINY, env=BoxActionEnv) as trainer:
        for _ in range(2):
            result = trainer.train()
        assert np.isfinite(result["info"]["learner"]["default_policy"]["total_loss"])
        stats = trainer.foreach_env(lambda env: (env.num_actions, env.out_of_bounds, env.max_abs_action))
        assert all(n > 0 for n, _, _ in stats)
        assert [bad for _, bad, _ in stats] == [0, 0], f"env received out-of-bounds actions: {stats}"
        space = spaces.Box(-0.5, 0.5, (2,), np.float32)
        obs = np.zeros(3, dtype=np.float32)
        for explore in (False, True):
            for _ in range(20):
                action = trainer.compute_single_action(obs, explore=explore)
                assert np.shape(action) == (2,)
                assert space.contains(np.asarray(action, dtype=np.float32)), action


def test_clip_actions_false_passes_raw_gaussian_actions():
    # With a std of 1 and bounds of +-0.5, unclipped samples leave the box often.
    with PPO(config={**TINY, "clip_actions": False}, env=BoxActionEnv) as trainer:
        trainer.train()
        out_of_bounds = trainer.foreach_env(lambda env: env.out_of_bounds)
    assert sum(out_of_bounds) > 0


def test_pendulum_trains():
    config = {**TINY, "num_envs_per_worker": 1, "rollout_fragment_length": 50, "train_batch_size": 100, "sgd_minibatch_size": 50}
    with PPO(config=config, env="Pendulum-v1") as trainer:
        result = trainer.train()
        assert result["timesteps_total"] == 100
        action = trainer.compute_single_action(np.array([1.0, 0.0, 0.0], dtype=np.float32), explore=True)
        assert spaces.Box(-2.0, 2.0, (1,), np.float32).contains(np.asarray(action, dtype=np.float32))
