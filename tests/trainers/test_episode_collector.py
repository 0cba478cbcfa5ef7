"""One episode collector for every env: single-agent, VectorEnv and multi-agent envs sample through the same
EpisodeCollector, over the row layout of their kind, and a one-agent multi-agent env gives what its single-agent
form gives."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from rltune.env import make_multi_agent
from rltune.trainers import PPO
from rltune.trainers.sampling._agent_rows import AgentRows
from rltune.trainers.sampling._collector import EpisodeCollector
from rltune.trainers.sampling._env_rows import EnvRows
from rltune.trainers.sampling._sample_batch import REWARDS, TERMINATEDS, TRUNCATEDS
from rltune.trainers.sampling._vector_env_rows import VectorEnvRows


OneAgentCartPole = make_multi_agent("CartPole-v1")  # one agent (num_agents defaults to 1)


def _trainer(env: Any, **extra: Any) -> PPO:
    return PPO(config={"env": env, "num_workers": 0, "num_envs_per_worker": 3, "rollout_fragment_length": 40,
                       "train_batch_size": 120, "sgd_minibatch_size": 60, "model": {"fcnet_hiddens": [8]}, "seed": 3, **extra})


def _episodes(result: Any) -> list[tuple[float, int]]:
    return sorted((e.episode_reward, e.episode_length) for e in result.episodes)


@pytest.mark.parametrize("env, layout", [
    ("CartPole-v1", EnvRows),
    (lambda cfg: gym.make_vec("CartPole-v1", num_envs=3), VectorEnvRows),
    (OneAgentCartPole, AgentRows),
])
def test_every_env_kind_samples_through_the_one_collector(env: Any, layout: type) -> None:
    trainer = _trainer(env, num_envs_per_worker=1 if layout is VectorEnvRows else 3)
    try:
        worker = trainer.workers.local_worker
        assert isinstance(worker.sampler, EpisodeCollector) and type(worker.sampler.layout) is layout
        result = worker.sample(40)
        assert result.env_steps == 120 and len(result.fragments) == 1
        assert result.fragments[0].policy_id == "default_policy"
    finally:
        trainer.stop()


@pytest.mark.parametrize("batch_mode", ["truncate_episodes", "complete_episodes"])
def test_a_one_agent_multi_agent_env_samples_what_its_single_agent_form_does(batch_mode: str) -> None:
    """Same seeds, same weights, greedy actions: the per-agent layout ends the same episodes, with the same rows."""
    dense, per_agent = _trainer("CartPole-v1", batch_mode=batch_mode), _trainer(OneAgentCartPole, batch_mode=batch_mode)
    try:
        per_agent.set_weights(dense.get_weights())
        for _ in range(3):
            a = dense.workers.local_worker.sample(40, explore=False)
            b = per_agent.workers.local_worker.sample(40, explore=False)
            assert _episodes(a) == _episodes(b) and a.env_steps == b.env_steps
            rows_a, rows_b = (_kept_rows(r) for r in (a, b))
            assert len(rows_a) == len(rows_b)
            # (a trajectory cut by the fragment's end is marked truncated in a packed fragment, not in a [T, N] one)
            columns = (REWARDS, TERMINATEDS, TRUNCATEDS) if batch_mode == "complete_episodes" else (REWARDS, TERMINATEDS)
            for column in columns:
                assert np.array_equal(np.sort(rows_a[column]), np.sort(rows_b[column]))
            if batch_mode == "complete_episodes":  # whole episodes only: every kept trajectory ends done
                assert a.episodes and rows_a[TERMINATEDS].sum() + rows_a[TRUNCATEDS].sum() == len(a.episodes)
    finally:
        dense.stop()
        per_agent.stop()


def _kept_rows(result: Any) -> dict[str, np.ndarray]:
    """The fragment's kept rows, flat (a dense [T, N] fragment and a packed per-agent one alike)."""
    (fragment,) = result.fragments
    keep = fragment.keep if fragment.keep is not None else np.ones(fragment.shape, dtype=bool)
    return {name: fragment.columns[name][keep] for name in (REWARDS, TERMINATEDS, TRUNCATEDS)}
