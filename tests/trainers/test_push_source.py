"""A push source fed from another thread (the shape of a policy server) drives PPO and DQN.

A producer thread steps its own env with actions of its own copy of the
trainer's policy, loads the weights the trainer syncs, and pushes each
finished episode into a queue; the source's ``sample`` drains the queue.
"""

from __future__ import annotations

import copy
import queue
import threading
import time

import gymnasium as gym
import numpy as np
import pytest

from rltune.trainers import DQN, PPO, EpisodeMetrics, Fragment, SampleResult, SampleSource

PPO_CONFIG = {"num_workers": 0, "train_batch_size": 120, "sgd_minibatch_size": 60, "num_sgd_iter": 2, "seed": 0,
              "lr": 1e-2, "model": {"fcnet_hiddens": [16]}}
DQN_CONFIG = {"num_workers": 0, "train_batch_size": 16, "learning_starts": 0, "min_sample_timesteps_per_iteration": 40,
              "seed": 0, "lr": 1e-2, "model": {"fcnet_hiddens": [16]}, "hiddens": [16]}


class PushSource:
    """Episodes pushed by a producer thread; the trainer's weights go to the producer at every sync."""

    def __init__(self, trainer) -> None:
        self.trainer = trainer
        self.episodes: queue.Queue = queue.Queue(maxsize=8)
        self.weights_lock = threading.Lock()
        self.weights = trainer.get_weights()
        self.weights_sent = 0
        self.weights_loaded = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._produce, args=(copy.deepcopy(trainer.get_policy()),), daemon=True)
        self.thread.start()

    # -- the source's contract ------------------------------------------------------------
    def sample(self, min_steps: int) -> SampleResult:
        """Every episode waiting in the queue; blocks until they hold ``min_steps`` steps (at least one episode)."""
        pushed = [self.episodes.get(timeout=60)]
        while sum(m.episode_length for _, m in pushed) < min_steps or (not self.episodes.empty() and len(pushed) < 64):
            try:
                pushed.append(self.episodes.get(timeout=60) if sum(m.episode_length for _, m in pushed) < min_steps
                              else self.episodes.get_nowait())
            except queue.Empty:
                break
        steps = sum(m.episode_length for _, m in pushed)
        return SampleResult(fragments=[f for f, _ in pushed], episodes=[m for _, m in pushed], env_steps=steps,
                            agent_steps=steps)

    def sync_weights(self, global_vars=None) -> None:
        with self.weights_lock:
            self.weights = self.trainer.get_weights()
            self.weights_sent += 1

    def metrics(self) -> dict[str, int]:
        return {"num_healthy_workers": int(self.thread.is_alive())}

    # -- the producer (a policy server's client side) ----------------------------------------
    def _produce(self, policy) -> None:
        env = gym.make("CartPole-v1")
        seen = None
        number = 0
        while not self.stopping.is_set():
            with self.weights_lock:
                weights, sent = self.weights, self.weights_sent
            if sent != seen:
                policy.set_weights(weights["default_policy"])
                seen = sent
                self.weights_loaded += 1
            obs, _ = env.reset(seed=number)
            number += 1
            observations, actions, rewards, extras = [obs], [], [], {}
            done = terminated = truncated = False
            while not done:
                action, step_extras = policy.compute_actions(policy.preprocessor(obs)[None])
                obs, reward, terminated, truncated, _ = env.step(policy.to_env_actions(action)[0])
                done = terminated or truncated
                observations.append(obs)
                actions.append(int(action[0]))
                rewards.append(float(reward))
                for name, value in step_extras.items():
                    extras.setdefault(name, []).append(value[0])
            fragment = Fragment.from_episode("default_policy", observations, actions, rewards,
                                             terminated=terminated, truncated=truncated, **extras)
            item = (fragment, EpisodeMetrics(float(sum(rewards)), len(rewards)))
            while not self.stopping.is_set():
                try:
                    self.episodes.put(item, timeout=0.1)
                    break
                except queue.Full:
                    continue
        env.close()

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(timeout=30)


@pytest.mark.parametrize("trainer_cls, config", [(PPO, PPO_CONFIG), (DQN, DQN_CONFIG)], ids=["PPO", "DQN"])
def test_episodes_pushed_from_another_thread_drive_the_trainer(trainer_cls, config):
    sources: list[PushSource] = []

    class Served(trainer_cls):
        def make_sample_source(self) -> SampleSource:
            sources.append(PushSource(self))
            return sources[0]

    try:
        with Served(config, env="CartPole-v1") as trainer:
            trainer.workers.sample = lambda min_steps: pytest.fail("the rollout workers sampled")
            before = trainer.get_policy().get_weights()
            results = [trainer.train() for _ in range(2)]
            after = trainer.get_policy().get_weights()
        source = sources[0]
        deadline = time.monotonic() + 30
        while source.weights_loaded < 2 and time.monotonic() < deadline:  # the producer's next episode starts with them
            time.sleep(0.01)
    finally:
        for source in sources:
            source.stop()
    assert not source.thread.is_alive()
    assert any(not np.array_equal(before[k], after[k]) for k in before)
    assert source.weights_sent >= 2  # the trainer synced its weights after its updates ...
    assert source.weights_loaded >= 2  # ... and the producer acted with them
    last = results[-1]
    assert last["training_iteration"] == 2 and last["timesteps_total"] >= 2 * (120 if trainer_cls is PPO else 40)
    assert last["episodes_total"] >= 2 and np.isfinite(last["episode_reward_mean"])
    assert np.isfinite(last["info"]["learner"]["default_policy"]["total_loss"])
    assert last["num_healthy_workers"] == 1
