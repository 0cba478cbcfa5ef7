"""Callbacks written for RLlib 2.x run as written: ``algorithm``, ``base_env`` and ``policies`` keywords, and
``on_algorithm_init``."""

from __future__ import annotations

from typing import Any

from rltune.callbacks import DefaultCallbacks, MultiCallbacks
from rltune.trainers import PPO


class RLlib2Callbacks(DefaultCallbacks):
    """Signatures as RLlib 2.7's examples write them (required keywords, no defaults)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: dict[str, Any] = {}

    def on_algorithm_init(self, *, algorithm, **kwargs):
        self.seen["init"] = algorithm

    def on_episode_start(self, *, worker, base_env, policies, episode, env_index, **kwargs):
        self.seen["start"] = (base_env, sorted(policies))

    def on_episode_end(self, *, worker, base_env, policies, episode, env_index, **kwargs):
        episode.custom_metrics["pole_ok"] = 1.0

    def on_train_result(self, *, algorithm, result, **kwargs):
        result["algorithm_name"] = type(algorithm).__name__


class StrictOldStyle(DefaultCallbacks):
    """An rltune hook without **kwargs: it gets only the names it declares."""

    def on_train_result(self, *, trainer, result):
        result["strict"] = True


def test_rllib2_callbacks_get_their_keywords() -> None:
    callbacks: list[Any] = []

    class Recording(RLlib2Callbacks):
        def __init__(self) -> None:
            super().__init__()
            callbacks.append(self)

    config = {"env": "CartPole-v1", "num_workers": 0, "rollout_fragment_length": 50, "train_batch_size": 100,
              "sgd_minibatch_size": 50, "num_sgd_iter": 1, "model": {"fcnet_hiddens": [8]}}
    with PPO(config={**config, "callbacks": Recording}) as trainer:
        result = trainer.train()
        seen = {key: value for recording in callbacks for key, value in recording.seen.items()}
        assert seen["init"] is trainer
        base_env, policies = seen["start"]
        assert base_env is not None and policies == ["default_policy"]
        assert result["algorithm_name"] == "PPO"
        assert result["custom_metrics"]["pole_ok_mean"] == 1.0


def test_a_hook_without_kwargs_gets_only_what_it_declares_also_in_multi_callbacks() -> None:
    config = {"env": "CartPole-v1", "num_workers": 0, "rollout_fragment_length": 50, "train_batch_size": 100,
              "sgd_minibatch_size": 50, "num_sgd_iter": 1, "model": {"fcnet_hiddens": [8]}}
    with PPO(config={**config, "callbacks": lambda: MultiCallbacks([StrictOldStyle(), RLlib2Callbacks()])}) as trainer:
        result = trainer.train()
        assert result["strict"] is True and result["algorithm_name"] == "PPO"
