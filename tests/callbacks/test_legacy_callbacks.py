"""Old RLlib's callbacks dict ({"on_episode_end": fn}, fn(info)) runs on the hook API with old RLlib's info dicts;
a single-agent episode answers RLlib's per-agent calls (``last_observation_for()``) for its only agent."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rltune.callbacks import DefaultCallbacks
from rltune.callbacks._episode import Episode
from rltune.errors import ConfigError
from rltune.trainers import PPO, PPOConfig, Policy

from .envs import TaskEnv

TINY = {
    "train_batch_size": 24,
    "sgd_minibatch_size": 24,
    "num_sgd_iter": 1,
    "rollout_fragment_length": 12,
    "model": {"fcnet_hiddens": [8]},
    "env_config": {"episode_len": 4, "task": 2},
    "seed": 0,
}


def test_each_function_gets_old_rllibs_info_dict_at_its_hook():
    calls: list[tuple[str, dict]] = []

    def record(name):
        return lambda info: calls.append((name, info))

    hooks = {name: record(name) for name in
             ("on_episode_start", "on_episode_step", "on_episode_end", "on_sample_end", "on_train_result")}
    with PPO(config={**TINY, "callbacks": hooks}, env=TaskEnv) as trainer:
        result = trainer.train()
    by_name: dict[str, list[dict]] = {}
    for name, info in calls:
        by_name.setdefault(name, []).append(info)
    assert {name: set(infos[0]) for name, infos in by_name.items()} == {
        "on_episode_start": {"env", "policy", "episode"},
        "on_episode_step": {"env", "episode"},
        "on_episode_end": {"env", "policy", "episode"},
        "on_sample_end": {"worker", "samples"},
        "on_train_result": {"trainer", "result"},
    }
    # 24 steps of 4-step episodes: 6 ended (the 7th started), 24 steps, 2 fragments, 1 result
    assert [len(by_name[n]) for n in ("on_episode_start", "on_episode_step", "on_episode_end", "on_sample_end")] == [7, 24, 6, 2]
    end = by_name["on_episode_end"][0]
    assert isinstance(end["env"], TaskEnv) and isinstance(end["episode"], Episode) and end["episode"].length == 4
    assert set(end["policy"]) == {"default_policy"} and isinstance(end["policy"]["default_policy"], Policy)
    assert by_name["on_train_result"] == [{"trainer": trainer, "result": result}]
    assert by_name["on_sample_end"][0]["worker"] is trainer.workers.local_worker


def pole_episode_end(info):
    """Sets a custom metric from the episode, as old RLlib examples did (module level: workers import it)."""
    episode = info["episode"]
    episode.custom_metrics["last_task"] = float(episode.last_observation_for()[0])
    episode.custom_metrics["policies"] = float(len(info["policy"]))


def test_a_callbacks_dict_runs_in_rollout_worker_processes_and_through_the_builder():
    config = PPOConfig().environment(TaskEnv, env_config=TINY["env_config"]).training(
        train_batch_size=24, sgd_minibatch_size=24, num_sgd_iter=1, model={"fcnet_hiddens": [8]}
    ).rollouts(num_rollout_workers=1, rollout_fragment_length=24).callbacks({"on_episode_end": pole_episode_end})
    with config.build() as trainer:
        result = trainer.train()
    assert result["custom_metrics"]["last_task_mean"] == 2.0
    assert result["custom_metrics"]["policies_mean"] == 1.0


@pytest.mark.parametrize(
    "hooks, message",
    [
        ({"on_episode_ends": print}, "callbacks.on_episode_ends: not a hook of old RLlib's callbacks dict (those are "
                                     "on_episode_start, on_episode_step, on_episode_end, on_sample_end, on_train_result)"),
        ({"on_postprocess_traj": print}, "callbacks.on_postprocess_traj: not carried over: rltune's "
                                         "on_postprocess_trajectory hook does not see"),
        ({"on_episode_end": "not a function"}, "callbacks.on_episode_end: must be a function fn(info)"),
    ],
)
def test_a_bad_callbacks_dict_is_a_config_error_saying_what_to_use(hooks, message):
    with pytest.raises(ConfigError) as info:
        PPO(config={**TINY, "callbacks": hooks}, env=TaskEnv)
    assert message in str(info.value)


class LastObservationFor(DefaultCallbacks):
    def on_episode_step(self, *, episode, **kwargs):
        assert episode.last_observation_for() is episode.last_observation()
        assert episode.last_observation_for("agent0") is episode.last_observation()  # RLlib's single-agent id
        assert episode.last_action_for() == episode.last_action() and episode.last_info_for() is episode.last_info()
        episode.user_data.setdefault("tasks", []).append(float(episode.last_observation_for()[0]))

    def on_episode_end(self, *, episode, **kwargs):
        episode.custom_metrics["mean_task"] = float(np.mean(episode.user_data["tasks"]))


def test_single_agent_episode_answers_rllibs_per_agent_calls_for_its_only_agent():
    with PPO(config={**TINY, "callbacks": LastObservationFor}, env=TaskEnv) as trainer:
        assert trainer.train()["custom_metrics"]["mean_task_mean"] == 2.0
    episode = Episode(env_index=0, worker_index=0, observation=np.zeros(2), info={})
    with pytest.raises(KeyError, match=r"a single-agent episode has one agent; call last_observation_for\(\) without"):
        episode.last_observation_for("player_2")
    assert isinstance(gym.spaces.Discrete(2).sample(), (int, np.integer))  # (gymnasium imported for TaskEnv)
