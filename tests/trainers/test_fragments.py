"""Raw fragments from the sample source, postprocessed by the algorithm with the learner's policies (issue 25)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rltune.env import MultiAgentEnv
from rltune.errors import ConfigError
from rltune.trainers import PPO, Fragment, PolicySpec
from rltune.trainers.algorithms._ppo import PPOPolicy
from rltune.trainers.sampling._fragment import stack_fragments
from rltune.trainers.sampling._sample_batch import REWARDS, TERMINATEDS, TRUNCATEDS

TINY = {"num_workers": 0, "rollout_fragment_length": 10, "train_batch_size": 20, "sgd_minibatch_size": 20,
        "num_sgd_iter": 1, "seed": 0, "model": {"fcnet_hiddens": [8]}}


class Counting(gym.Env):
    """Observation and info count the steps of the episode (5 steps long)."""

    observation_space = gym.spaces.Box(0.0, 10.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, config=None):
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([0.0], np.float32), {}

    def step(self, action):
        self.t += 1
        return np.array([self.t], np.float32), 1.0, self.t == 5, False, {"t": self.t}


class TwoCounting(MultiAgentEnv):
    """Two agents that both observe a step counter; the info of each names it (4 steps long)."""

    def __init__(self, config=None):
        super().__init__()
        self.possible_agents = self.agents = ["a", "b"]
        self.observation_space = gym.spaces.Box(0.0, 10.0, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.t = 0

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return {a: np.array([0.0], np.float32) for a in self.agents}, {}

    def step(self, actions):
        self.t += 1
        obs = {a: np.array([self.t], np.float32) for a in self.agents}
        done = self.t == 4
        return (obs, {a: 1.0 for a in self.agents}, {"__all__": done}, {"__all__": False},
                {a: {"agent": a, "t": self.t} for a in self.agents})


class Recording(PPOPolicy):
    """Remembers every batch its postprocessing got (in this process)."""

    seen: list[dict] = []

    def postprocess_trajectory(self, batch, other_agent_batches=None, episode=None):
        Recording.seen.append(batch)
        return super().postprocess_trajectory(batch)


def test_postprocessing_gets_the_env_infos_of_single_agent_steps():
    Recording.seen = []

    class RecordingPPO(PPO):
        policy_class = Recording

    with RecordingPPO(TINY, env=Counting) as trainer:
        trainer.train()
    (batch,) = Recording.seen  # the iteration's two rounds of 10 steps, side by side, in one call
    assert batch["infos"].shape == batch[REWARDS].shape == (10, 2)
    for column in range(2):
        assert [info["t"] for info in batch["infos"][:, column]] == [1, 2, 3, 4, 5] * 2
        np.testing.assert_array_equal(batch["obs"][:, column, 0], [0, 1, 2, 3, 4] * 2)


def test_postprocessing_gets_the_env_infos_of_each_agent():
    Recording.seen = []
    config = {**TINY, "rollout_fragment_length": 8, "train_batch_size": 8, "sgd_minibatch_size": 8,
              "multiagent": {"policies": {"p": PolicySpec(policy_class=Recording)}, "policy_mapping_fn": lambda *a, **k: "p"}}
    with PPO(config, env=TwoCounting) as trainer:
        trainer.train()
    infos = [info for batch in Recording.seen for info in batch["infos"].reshape(-1)]
    # 8 steps: two episodes of 4; each agent's transition ends with the info of the step it observed again in
    assert sorted((i["agent"], i["t"]) for i in infos) == sorted((a, t) for a in "ab" for t in (1, 2, 3, 4) for _ in (0, 1))


def test_remote_workers_hand_over_raw_fragments_that_the_learner_postprocesses():
    Recording.seen = []

    class RecordingPPO(PPO):
        policy_class = Recording

    with RecordingPPO({**TINY, "num_workers": 1}, env=Counting) as trainer:
        sample = trainer.workers.sample(1)
        assert sample.fragments and not sample.batches  # raw: nothing was postprocessed in the worker
        assert Recording.seen == []
        result = trainer.train()
    assert Recording.seen  # here, in the trainer's process, on the learner's policy
    assert result["info"]["learner"]["default_policy"]["num_sgd_steps"] == 1


def test_fragments_of_several_lengths_are_padded_and_a_cut_end_bootstraps():
    long = Fragment.from_episode("p", [[0.0], [1.0], [2.0], [3.0]], [0, 1, 0], [1.0, 1.0, 1.0], terminated=True)
    short = Fragment.from_episode("p", [[0.0], [1.0]], [1], [1.0])  # goes on: cut by the fragment's end
    batch, keep = stack_fragments([long, short])
    assert batch[REWARDS].shape == (3, 2)
    np.testing.assert_array_equal(keep, [[True, True], [True, False], [True, False]])
    assert batch[TRUNCATEDS][0, 1] and not batch[TERMINATEDS][0, 1]  # the cut end: truncated, bootstraps
    assert batch[TERMINATEDS][1:, 1].all() and (batch[REWARDS][1:, 1] == 0).all()  # padding ends every recursion


def test_an_episode_needs_one_observation_more_than_actions():
    with pytest.raises(ValueError, match="an episode of 2 actions needs 3 observations and 2 rewards"):
        Fragment.from_episode("p", [[0.0], [1.0]], [0, 1], [1.0, 1.0])


def test_a_sample_source_without_the_contract_is_refused_by_name():
    class Broken(PPO):
        def make_sample_source(self):
            return object()

    with pytest.raises(ConfigError, match=r"Broken.make_sample_source\(\) returned object, which lacks the SampleSource "
                                          r"method\(s\) \['sample', 'sync_weights', 'metrics'\]"):
        Broken(TINY, env=Counting)


def test_a_users_sample_source_gets_the_weights_at_start_on_set_weights_and_restore(tmp_path):
    # A policy server must act with the trainer's weights from its first episode, not after the first update.
    synced = []

    class Source:
        def sample(self, min_steps):
            raise AssertionError("not sampled in this test")

        def sync_weights(self, global_vars=None):
            synced.append(global_vars)

        def metrics(self):
            return {}

    class WithSource(PPO):
        def make_sample_source(self):
            return Source()

    trainer = WithSource(config={"env": Counting, "num_workers": 0, "model": {"fcnet_hiddens": [8]}})
    try:
        assert synced == [{"timestep": 0}]
        trainer.set_weights(trainer.get_weights())
        assert len(synced) == 2
        trainer.restore(trainer.save(str(tmp_path / "checkpoint")))
        assert len(synced) == 3 and synced[-1] == {"timestep": 0}
    finally:
        trainer.stop()
