"""A gymnasium VectorEnv as ``env``: the worker's vectorization, stepped with one ``step(actions)`` per step."""

from __future__ import annotations

from collections import defaultdict

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from rltune.callbacks import DefaultCallbacks
from rltune.env import register_env
from rltune.errors import ConfigError
from rltune.trainers import PPO
from rltune.trainers.sampling._sample_batch import NEW_OBS, OBS, REWARDS, TERMINATEDS
from trainers.envs import CountingEnv

EPISODE = 7  # CountingEnv: obs t = 0..6, reward 1 a step, the episode ends after 7 steps


def cartpoles(n: int = 4, mode: AutoresetMode = AutoresetMode.NEXT_STEP) -> SyncVectorEnv:
    return SyncVectorEnv([lambda: gym.make("CartPole-v1")] * n, autoreset_mode=mode)


def counters(n: int = 3, mode: AutoresetMode = AutoresetMode.NEXT_STEP) -> SyncVectorEnv:
    return SyncVectorEnv([lambda: CountingEnv({"episode_len": EPISODE})] * n, autoreset_mode=mode)


class CartPoles(SyncVectorEnv):
    """A VectorEnv class built from env_config, as an env class is."""

    def __init__(self, config):
        super().__init__([lambda: gym.make("CartPole-v1")] * config.get("n", 4))


def ppo_config(env, **extra):
    return {"env": env, "seed": 3, "train_batch_size": 200, "sgd_minibatch_size": 100, "num_sgd_iter": 2,
            "rollout_fragment_length": 50, "model": {"fcnet_hiddens": [16]}, **extra}


register_env("vector_cartpoles", lambda ctx: cartpoles(4))


@pytest.mark.parametrize("env", [
    pytest.param(lambda: cartpoles(4), id="instance"),
    pytest.param(lambda: CartPoles, id="class"),
    pytest.param(lambda: "vector_cartpoles", id="registered-creator"),
    pytest.param(lambda: gym.make_vec("CartPole-v1", num_envs=4), id="make_vec"),
])
def test_ppo_trains_on_a_vector_env(env):
    with PPO(config=ppo_config(env())) as trainer:
        assert trainer.workers.local_worker.sampler.num_envs == 4
        for _ in range(2):
            result = trainer.train()
        assert result["timesteps_total"] == 400
        assert result["episodes_total"] > 0 and result["episode_reward_mean"] > 0
        assert trainer.evaluate(2)["evaluation"]["episodes_this_iter"] == 2


@pytest.mark.parametrize("mode", [AutoresetMode.SAME_STEP, AutoresetMode.DISABLED])
@pytest.mark.parametrize("obs_filter", ["NoFilter", "MeanStdFilter"])
def test_episodes_match_the_same_envs_as_a_list(mode, obs_filter):
    """Same seed, same sub-envs: the episodes of a vector env are those of the list of envs, step for step."""
    results = []
    for config in (ppo_config(cartpoles(4, mode), observation_filter=obs_filter),
                   ppo_config("CartPole-v1", num_envs_per_worker=4, observation_filter=obs_filter)):
        with PPO(config=config) as trainer:
            results.append([trainer.train() for _ in range(2)])
    for vector, listed in zip(*results):
        for key in ("episodes_total", "episode_reward_mean", "episode_len_mean", "timesteps_total"):
            assert vector[key] == listed[key], key


def kept_rows(result):
    """The sample's raw rows that go to training (its fragments' kept rows), flat."""
    (fragment,) = result.fragments
    keep = np.ones(fragment.shape, dtype=bool) if fragment.keep is None else fragment.keep
    return {key: fragment.columns[key][keep] for key in (OBS, NEW_OBS, REWARDS, TERMINATEDS)}


def assert_true_transitions(result):
    """Every kept row is a real step of CountingEnv (t -> t + 1), no reset row; every episode is whole."""
    rows = kept_rows(result)
    assert np.array_equal(rows[NEW_OBS][:, 0], rows[OBS][:, 0] + 1)
    assert set(rows[OBS][:, 0].tolist()) <= set(range(EPISODE))
    assert (rows[OBS][rows[TERMINATEDS], 0] == EPISODE - 1).all()
    assert (rows[REWARDS] == 1).all()
    assert result.episodes
    assert all(e.episode_length == EPISODE and e.episode_reward == EPISODE for e in result.episodes)


@pytest.mark.parametrize("mode", list(AutoresetMode))
@pytest.mark.parametrize("batch_mode", ["truncate_episodes", "complete_episodes"])
def test_autoreset_modes_give_whole_episodes_and_no_reset_rows(mode, batch_mode):
    config = ppo_config(counters(3, mode), batch_mode=batch_mode, rollout_fragment_length=10, train_batch_size=30,
                        sgd_minibatch_size=30)
    with PPO(config=config) as trainer:
        worker = trainer.workers.local_worker
        for _ in range(4):
            result = worker.sample()
            assert_true_transitions(result)
            batch = trainer.algorithm.postprocess(result)["default_policy"]
            assert len(batch[REWARDS]) == len(kept_rows(result)[REWARDS])
            if batch_mode == "complete_episodes":
                assert len(batch[REWARDS]) == EPISODE * len(result.episodes)


def test_a_remote_worker_steps_the_vector_env():
    with PPO(config=ppo_config(cartpoles(2), num_workers=1)) as trainer:
        result = trainer.train()
        assert result["timesteps_total"] == 200 and result["episodes_total"] > 0
        assert trainer.workers.local_worker.sampler is None  # the remote worker samples


class Recorder(DefaultCallbacks):
    def __init__(self):
        super().__init__()
        self.starts, self.steps, self.lengths = defaultdict(int), defaultdict(int), defaultdict(list)

    def on_episode_start(self, *, episode, env, env_index, **kwargs):
        self.starts[env_index] += 1

    def on_episode_step(self, *, episode, env, env_index, **kwargs):
        self.steps[env_index] += 1

    def on_episode_end(self, *, episode, env, env_index, **kwargs):
        self.lengths[env_index].append(episode.length)
        episode.custom_metrics["length"] = episode.length


@pytest.mark.parametrize("mode", list(AutoresetMode))
def test_callbacks_see_each_sub_envs_episodes(mode):
    with PPO(config=ppo_config(counters(3, mode), callbacks=Recorder, rollout_fragment_length=20)) as trainer:
        result = trainer.workers.local_worker.sample()
        recorder = trainer.workers.local_worker.callbacks
    assert sorted(recorder.lengths) == [0, 1, 2]
    assert all(lengths == [EPISODE] * 2 for lengths in recorder.lengths.values())  # 20 steps: 2 whole episodes each
    assert all(recorder.starts[i] == 3 for i in range(3))  # and the third started
    assert sum(recorder.steps.values()) == sum(e.episode_length for e in result.episodes) + 3 * (20 - 2 * EPISODE
                                                                                                 - (mode is AutoresetMode.NEXT_STEP) * 2)
    assert [e.custom_metrics["length"] for e in result.episodes] == [EPISODE] * 6


def test_an_async_vector_env_works():
    def make(ctx):
        return gym.vector.AsyncVectorEnv([lambda: CountingEnv({"episode_len": EPISODE})] * 2)

    config = ppo_config(make, rollout_fragment_length=20, train_batch_size=40, sgd_minibatch_size=40)
    with PPO(config=config) as trainer:
        worker = trainer.workers.local_worker
        result = worker.sample()
        assert_true_transitions(result)
        env = worker.envs[0]
    assert env.closed


@pytest.mark.parametrize("extra, option", [
    ({"num_envs_per_worker": 3}, "num_envs_per_worker=3"),
    ({"restart_failed_sub_environments": True}, "restart_failed_sub_environments"),
])
def test_options_that_do_not_fit_a_vector_env_are_one_clear_error(extra, option):
    with pytest.raises(ConfigError, match=option):
        PPO(config=ppo_config(cartpoles(4), **extra))


def test_num_envs_per_worker_may_name_the_vector_envs_size():
    with PPO(config=ppo_config(cartpoles(4), num_envs_per_worker=4)) as trainer:
        assert trainer.workers.local_worker.sampler.num_envs == 4


def test_a_curriculum_sets_the_task_of_every_sub_env():
    from callbacks.envs import TaskEnv

    from rltune.env import EnvContext

    env = SyncVectorEnv([lambda: TaskEnv(EnvContext())] * 3)
    with PPO(config=ppo_config(env, rollout_fragment_length=8)) as trainer:
        trainer.set_task(2)
        assert [sub.unwrapped.task for sub in env.envs] == [2, 2, 2]
        assert trainer.get_tasks() == {(0, 0): 2}
        result = trainer.workers.local_worker.sample()
        assert {e.episode_reward for e in result.episodes} == {8.0}  # 4 steps paying the task, 2


def by_iteration(result, env, ctx):
    return result["training_iteration"] + 1


def test_env_task_fn_sets_the_sub_envs_task():
    from callbacks.envs import TaskEnv
    from rltune.env import EnvContext

    env = SyncVectorEnv([lambda: TaskEnv(EnvContext())] * 2)
    with PPO(config=ppo_config(env, env_task_fn=by_iteration, rollout_fragment_length=50, train_batch_size=100)) as trainer:
        trainer.train()
        assert [sub.unwrapped.task for sub in env.envs] == [2, 2]


def test_a_round_counts_the_vector_envs_sub_envs():
    with PPO(config=ppo_config(cartpoles(4))) as trainer:
        assert trainer.workers.steps_per_round() == 4 * 50


def test_the_example_runs():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "examples" / "vector_env.py"
    spec = importlib.util.spec_from_file_location("vector_env_example", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    example.main(iterations=1)


class NoFinalObs(SyncVectorEnv):
    """Says SAME_STEP but its infos lose the final observation."""

    def step(self, actions):
        obs, rewards, terminateds, truncateds, infos = super().step(actions)
        infos.pop("final_obs", None)
        return obs, rewards, terminateds, truncateds, infos


def test_a_same_step_env_without_final_obs_is_one_clear_error():
    from rltune.errors import EnvError

    env = NoFinalObs([lambda: CountingEnv({"episode_len": 3})] * 2, autoreset_mode=AutoresetMode.SAME_STEP)
    with PPO(config=ppo_config(env)) as trainer, pytest.raises(EnvError, match=r"SAME_STEP.*final_obs"):
        trainer.workers.local_worker.sample()
