"""A replay SampleSource (a fixed list of recorded episodes, no env stepped) drives PPO and DQN."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest

from rltune.trainers import DQN, PPO, EpisodeMetrics, Fragment, SampleResult, SampleSource

PPO_CONFIG = {"num_workers": 0, "train_batch_size": 120, "sgd_minibatch_size": 60, "num_sgd_iter": 2, "seed": 0,
              "lr": 1e-2, "model": {"fcnet_hiddens": [16]}}
DQN_CONFIG = {"num_workers": 0, "train_batch_size": 16, "learning_starts": 0, "min_sample_timesteps_per_iteration": 40,
              "seed": 0, "lr": 1e-2, "model": {"fcnet_hiddens": [16]}, "hiddens": [16]}


def record_episodes(count: int, seed: int = 0) -> list[tuple[Fragment, EpisodeMetrics]]:
    """Episodes of CartPole under a uniform random policy, as one fragment each with its metrics."""
    env = gym.make("CartPole-v1")
    rng = np.random.default_rng(seed)
    episodes = []
    for number in range(count):
        obs, _ = env.reset(seed=seed + number)
        observations, actions, rewards, infos = [obs], [], [], []
        terminated = truncated = False
        while not (terminated or truncated):
            action = int(rng.integers(2))
            obs, reward, terminated, truncated, info = env.step(action)
            observations.append(obs)
            actions.append(action)
            rewards.append(float(reward))
            infos.append(info)
        # The behaviour policy's log-probs; the value predictions are left to the algorithm.
        fragment = Fragment.from_episode("default_policy", observations, actions, rewards, terminated=terminated,
                                         truncated=truncated, infos=infos, action_logp=[math.log(0.5)] * len(actions))
        episodes.append((fragment, EpisodeMetrics(float(sum(rewards)), len(rewards))))
    env.close()
    return episodes


class ReplaySource:
    """Hands over recorded episodes in turn, as many as ``min_steps`` asks for."""

    def __init__(self, episodes: list[tuple[Fragment, EpisodeMetrics]]) -> None:
        self.episodes = episodes
        self.next = 0
        self.syncs = 0

    def sample(self, min_steps: int) -> SampleResult:
        result = SampleResult()
        while result.env_steps < max(min_steps, 1):
            fragment, metrics = self.episodes[self.next % len(self.episodes)]
            self.next += 1
            result.fragments.append(fragment)
            result.episodes.append(metrics)
            result.env_steps += metrics.episode_length
        result.agent_steps = result.env_steps
        return result

    def sync_weights(self, global_vars=None) -> None:
        self.syncs += 1

    def metrics(self) -> dict[str, int]:
        return {"num_healthy_workers": 0}


@pytest.mark.parametrize("trainer_cls, config", [(PPO, PPO_CONFIG), (DQN, DQN_CONFIG)], ids=["PPO", "DQN"])
def test_a_replay_of_recorded_episodes_drives_the_trainer(trainer_cls, config):
    episodes = record_episodes(12)
    source = ReplaySource(episodes)
    assert isinstance(source, SampleSource)

    class Replayed(trainer_cls):
        def make_sample_source(self) -> SampleSource:
            return source

    with Replayed(config, env="CartPole-v1") as trainer:
        before = trainer.get_policy().get_weights()
        first = trainer.train()
        second = trainer.train()
        after = trainer.get_policy().get_weights()
    assert any(not np.array_equal(before[k], after[k]) for k in before)
    assert source.next > 0 and source.syncs > 0
    replayed = sum(m.episode_length for _, m in (episodes * 10)[: source.next])
    assert first["timesteps_total"] + second["timesteps_this_iter"] == replayed == second["timesteps_total"]
    assert first["timesteps_this_iter"] >= (120 if trainer_cls is PPO else 40)
    mean = np.mean([m.episode_reward for _, m in (episodes * 10)[: source.next]])
    assert second["episode_reward_mean"] == pytest.approx(mean)
    assert second["training_iteration"] == 2 and second["num_healthy_workers"] == 0
    stats = second["info"]["learner"]["default_policy"]
    assert np.isfinite(stats["total_loss"]) and stats["cur_lr"] == 1e-2
    for key in ("episode_len_mean", "episodes_this_iter", "time_this_iter_s", "custom_metrics", "hist_stats"):
        assert key in second
