"""batch_mode: complete_episodes: a worker's sample holds whole episodes only, postprocessed whole (RLlib's semantics)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from rltune.callbacks import DefaultCallbacks
from rltune.trainers import DQN, PPO
from rltune.trainers.learning._postprocessing import compute_gae
from rltune.trainers.sampling._sample_batch import ADVANTAGES, OBS, REWARDS, TERMINATEDS, TRUNCATEDS, VF_PREDS
from trainers.envs import CountingEnv
from trainers.multi_agent_envs import TurnGame

EPISODE = 7  # CountingEnv: obs t = 0..6, reward 1 per step, the episode ends after 7 steps
NUM_ENVS, FRAGMENT = 3, 10  # 30 steps a fragment: the fragments cut the episodes anywhere


def counting_config(trainer_cls, batch_mode, **extra):
    own = ({"train_batch_size": 30, "sgd_minibatch_size": 30, "num_sgd_iter": 1, "lambda": 0.95}
           if trainer_cls is PPO else {"learning_starts": 0, "n_step": 3})
    return {"env": CountingEnv, "env_config": {"episode_len": EPISODE, **extra}, "num_envs_per_worker": NUM_ENVS,
            "rollout_fragment_length": FRAGMENT, "batch_mode": batch_mode, "gamma": 0.9,
            "model": {"fcnet_hiddens": [8]}, "seed": 0, **own}


@pytest.mark.parametrize("trainer_cls", [PPO, DQN])
@pytest.mark.parametrize("truncate", [False, True])
def test_a_sample_holds_whole_episodes_only(trainer_cls, truncate):
    with trainer_cls(config=counting_config(trainer_cls, "complete_episodes", truncate=truncate)) as trainer:
        worker = trainer.workers.local_worker
        for _ in range(4):  # later samples start with the steps the earlier ones stepped past their last episode end
            result = worker.sample()
            batch = trainer.algorithm.postprocess(result)["default_policy"]
            rows = len(batch[REWARDS])
            episodes = len(result.episodes)
            assert rows == EPISODE * episodes >= NUM_ENVS * FRAGMENT
            assert result.env_steps == rows
            # Each of the episodes' steps t = 0..6 once: no episode is cut or split between samples.
            t = batch[OBS][:, 0]
            assert Counter(t.tolist()) == {float(step): episodes for step in range(EPISODE)}
            if trainer_cls is PPO:
                ends = batch[TRUNCATEDS] if truncate else batch[TERMINATEDS]
                others = batch[TERMINATEDS] if truncate else batch[TRUNCATEDS]
                assert ends.sum() == episodes and not others.any()
                assert (t[ends] == EPISODE - 1).all()
            else:  # 3-step returns of reward 1, each up to the episode's real end, never cut by a fragment
                expected = {step: sum(0.9 ** k for k in range(min(3, EPISODE - step))) for step in range(EPISODE)}
                assert np.allclose(batch[REWARDS], [expected[int(step)] for step in t])


def test_truncate_episodes_cuts_them_at_the_fragment():
    with PPO(config=counting_config(PPO, "truncate_episodes")) as trainer:
        batch = trainer.algorithm.postprocess(trainer.workers.local_worker.sample())["default_policy"]
        assert len(batch[REWARDS]) == NUM_ENVS * FRAGMENT
        assert len(set(Counter(batch[OBS][:, 0].tolist()).values())) > 1  # some episodes cut


def test_gae_runs_over_each_whole_episode():
    gamma, lam = 0.9, 0.95
    with PPO(config=counting_config(PPO, "complete_episodes")) as trainer:
        batch = trainer.algorithm.postprocess(trainer.workers.local_worker.sample())["default_policy"]
    t = batch[OBS][:, 0].astype(int)
    values = np.array([batch[VF_PREDS][t == step][0] for step in range(EPISODE)], dtype=np.float32)
    for step in range(EPISODE):  # one set of weights: every episode gets the same values and advantages
        assert np.allclose(batch[VF_PREDS][t == step], values[step])
    terminated = np.zeros((EPISODE, 1), dtype=bool)
    terminated[-1] = True
    expected, _ = compute_gae(np.ones((EPISODE, 1), np.float32), values[:, None], np.append(values[1:], 0.0)[:, None],
                              terminated, np.zeros_like(terminated), gamma, lam)
    for step in range(EPISODE):
        assert np.allclose(batch[ADVANTAGES][t == step], expected[step, 0], atol=1e-5)


def by_player(agent_id, episode=None, worker=None, **kwargs):
    return f"pol_{agent_id}"


class EpisodeLengths(DefaultCallbacks):
    """Records the length of the episode each postprocessed trajectory is given with."""

    seen: list[int] = []

    def on_episode_step(self, **kwargs):  # episodes count their steps when an episode hook is overridden
        pass

    def on_postprocess_trajectory(self, *, episode, **kwargs):
        EpisodeLengths.seen.append(episode.length)


@pytest.mark.parametrize("callbacks", [None, EpisodeLengths])
def test_multi_agent_samples_hold_whole_episodes_of_every_agent(callbacks):
    # TurnGame: 8 env steps an episode, x and o act 4 times each; x's transitions sum to 16, o's to -4 (their returns)
    config = {"env": TurnGame, "multiagent": {"policies": {"pol_x", "pol_o"}, "policy_mapping_fn": by_player},
              "rollout_fragment_length": 3, "num_envs_per_worker": 2, "batch_mode": "complete_episodes",
              "train_batch_size": 16, "sgd_minibatch_size": 16, "num_sgd_iter": 1, "model": {"fcnet_hiddens": [8]},
              "seed": 0, "callbacks": callbacks}
    EpisodeLengths.seen = []
    with PPO(config=config) as trainer:
        worker = trainer.workers.local_worker
        for _ in range(4):
            result = worker.sample()
            episodes = len(result.episodes)
            assert result.env_steps == 8 * episodes >= 6
            batches = trainer.algorithm.postprocess(result)
            x, o = batches["pol_x"], batches["pol_o"]
            assert len(x[REWARDS]) == len(o[REWARDS]) == 4 * episodes == result.agent_steps / 2
            assert x[REWARDS].sum() == pytest.approx(16 * episodes) and o[REWARDS].sum() == pytest.approx(-4 * episodes)
            for batch in (x, o):  # a trajectory's pieces from several fragments are one: no cut is left marked
                assert batch[TERMINATEDS].sum() == episodes and not batch[TRUNCATEDS].any()
    if callbacks:  # each trajectory came with its own (ended) episode, not the env's next one
        assert EpisodeLengths.seen and set(EpisodeLengths.seen) == {8}
