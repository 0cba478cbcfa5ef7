"""Multi-agent with the rest of rltune: rollout worker processes, add/remove_policy, checkpoints, callbacks, envs."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from rltune.callbacks import DefaultCallbacks
from rltune.env import TaskSettableEnv
from rltune.errors import CheckpointError, ConfigError
from rltune.trainers import PPO, PolicySpec, Trainer
from rltune.trainers.algorithms._ppo import PPOPolicy
from rltune.trainers.sampling._sample_batch import REWARDS
from trainer_params import iteration_config
from trainers.multi_agent_envs import TurnGame

TINY = {"model": {"fcnet_hiddens": [16]}, "seed": 3, **iteration_config(PPO, 32)}


def by_player(agent_id, episode=None, worker=None, **kwargs):
    return f"pol_{agent_id}"


def config(**extra: Any) -> dict[str, Any]:
    multiagent = {"policies": {"pol_x", "pol_o"}, "policy_mapping_fn": by_player, **extra.pop("multiagent", {})}
    return {"env": TurnGame, "rollout_fragment_length": 8, "multiagent": multiagent, **TINY, **extra}


def same_weights(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def test_rollout_worker_processes_sample_every_policy_and_get_added_policies():
    with PPO(config=config(num_workers=2)) as trainer:
        result = trainer.train()
        assert result["policy_reward_mean"] == {"pol_x": 16.0, "pol_o": -4.0}
        snapshot = trainer.add_policy(
            "x_old", policy=trainer.get_policy("pol_x"), policies_to_train=["pol_x", "pol_o"],
            policy_mapping_fn=lambda agent_id, episode, worker, **kw: "x_old" if agent_id == "x" else "pol_o",
        )
        assert same_weights(snapshot.get_weights(), trainer.get_policy("pol_x").get_weights())
        chosen = trainer.get_weights(["x_old", "pol_o"])
        assert sorted(chosen) == ["pol_o", "x_old"] and same_weights(chosen["x_old"], snapshot.get_weights())
        assert sorted(trainer.get_weights()) == ["pol_o", "pol_x", "x_old"]
        in_workers = trainer.foreach_worker(lambda w: sorted(w.policy_map))
        assert in_workers == [["pol_o", "pol_x", "x_old"]] * 3
        frozen = snapshot.get_weights()
        trainer.train()  # the episodes running when the mapping changed keep theirs
        result = trainer.train()
        assert set(result["info"]["learner"]) == {"pol_o"}  # x now plays as the (untrained) snapshot
        assert same_weights(trainer.get_policy("x_old").get_weights(), frozen)
        remote = trainer.foreach_worker(lambda w: w.get_policy("x_old").get_weights())
        assert all(same_weights(w, frozen) for w in remote)
        trainer.remove_policy("x_old", policy_mapping_fn=by_player)
        assert trainer.foreach_worker(lambda w: sorted(w.policy_map)) == [["pol_o", "pol_x"]] * 3
        result = trainer.train()
        assert set(result["info"]["learner"]) == {"pol_x", "pol_o"}


def test_checkpoint_round_trip_with_three_policies_into_other_workers(tmp_path):
    policies = {"pol_x": PolicySpec(config={"lr": 1e-3}), "pol_o": None}
    with PPO(config=config(multiagent={"policies": policies})) as trainer:
        trainer.train()
        trainer.add_policy("x_old", policy=trainer.get_policy("pol_x"), policies_to_train=["pol_x", "pol_o"])
        trainer.train()
        path = trainer.save(tmp_path / "ckpt")
        weights = trainer.get_weights()
        state = trainer.get_learner("pol_x").optimizer.state_dict()
    assert sorted(weights) == ["pol_o", "pol_x", "x_old"]
    with PPO(config=config(multiagent={"policies": policies}, num_workers=1)) as restored:
        restored.restore(path)
        assert sorted(restored.get_weights()) == sorted(weights)
        for pid, w in weights.items():
            assert same_weights(restored.get_weights()[pid], w)
        remote = restored.foreach_worker(lambda w: w.get_policy("x_old").get_weights())
        assert all(same_weights(w, weights["x_old"]) for w in remote)
        assert restored.get_learner("pol_x").optimizer.param_groups[0]["lr"] == 1e-3
        assert restored.get_learner("pol_x").optimizer.state_dict()["state"].keys() == state["state"].keys()
        assert restored.iteration == 2
        restored.train()
    # From the checkpoint alone: the mapping function is code, so it is given again.
    with pytest.raises(CheckpointError, match="multiagent"):
        Trainer.from_checkpoint(path)
    with Trainer.from_checkpoint(path, config_overrides={"multiagent": {"policy_mapping_fn": by_player}}) as again:
        assert sorted(again.get_weights()) == ["pol_o", "pol_x", "x_old"]


def test_a_checkpoint_policy_class_the_config_does_not_use_is_refused(tmp_path):
    with PPO(config=config()) as trainer:
        trainer.add_policy("other", CustomPolicy, policies_to_train=["pol_x", "pol_o"])
        path = trainer.save(tmp_path / "ckpt")
    with PPO(config=config()) as fresh:
        before = sorted(fresh.get_weights())
        with pytest.raises(CheckpointError, match=r"policy_specs.other.*does not use"):
            fresh.restore(path)
        assert sorted(fresh.get_weights()) == before


class CustomPolicy(PPOPolicy):
    """A PPO policy subclass (trainable, another class than the algorithm's)."""


def test_add_policy_errors():
    with PPO(config=config()) as trainer:
        with pytest.raises(ConfigError, match="exists already"):
            trainer.add_policy("pol_x")
        with pytest.raises(ConfigError, match="run-level key"):
            trainer.add_policy("new", config={"num_workers": 3})
        with pytest.raises(ConfigError, match="the only policy|no policy 'ghost'"):
            trainer.remove_policy("ghost")
    with PPO(config={"env": "CartPole-v1", **TINY}) as single:
        with pytest.raises(ConfigError, match="single-agent"):
            single.add_policy("other")


class TaskTurnGame(TurnGame, TaskSettableEnv):
    """TurnGame whose end bonus for x is the task."""

    def __init__(self, config=None):
        super().__init__(config)
        self.task = 10.0

    def get_task(self):
        return self.task

    def set_task(self, task):
        self.task = task


def test_foreach_env_and_tasks_reach_every_multi_agent_env():
    with PPO(config=config(env=TaskTurnGame, num_workers=2, num_envs_per_worker=2)) as trainer:
        assert trainer.foreach_env(lambda env: type(env.unwrapped).__name__) == ["TaskTurnGame"] * 4
        trainer.set_task(3.0)
        assert trainer.foreach_env(lambda env: env.unwrapped.get_task()) == [3.0] * 4
        assert trainer.train()["curriculum_task"] == 3.0


class AgentView(DefaultCallbacks):
    """Records what the multi-agent episode API shows, and every postprocessed trajectory."""

    def on_episode_step(self, *, episode, **kwargs):
        for agent in ("x", "o"):
            if episode.last_observation_for(agent) is not None:
                episode.user_data.setdefault("seen", set()).add(agent)

    def on_episode_end(self, *, episode, **kwargs):
        episode.custom_metrics["x_return"] = episode.agent_rewards[("x", "pol_x")]
        episode.custom_metrics["o_last_reward"] = episode.last_reward_for("o")
        episode.custom_metrics["x_last_action_known"] = float(episode.last_action_for("x") is not None)
        episode.custom_metrics["agents"] = len(episode.get_agents())
        episode.custom_metrics["policy_of_o_is_pol_o"] = float(episode.policy_for("o") == "pol_o")

    def on_postprocess_trajectory(self, *, agent_id, policy_id, postprocessed_batch, original_batches, **kwargs):
        assert policy_id == f"pol_{agent_id}"
        assert set(original_batches) == ({"x", "o"} - {agent_id}) or not original_batches
        postprocessed_batch[REWARDS] = postprocessed_batch[REWARDS] * 0 + 7.0  # in place, reaches the learner


def test_callbacks_see_each_agent_and_can_change_postprocessed_trajectories():
    with PPO(config=config(callbacks=AgentView)) as trainer:
        sample = trainer.workers.local_worker.sample()
        assert all((b[REWARDS] == 7.0).all() for b in trainer.algorithm.postprocess(sample).values())
        result = trainer.train()
        metrics = result["custom_metrics"]
        assert metrics["x_return_mean"] == 16.0
        assert metrics["o_last_reward_mean"] == 0.5 - 10.0
        assert metrics["x_last_action_known_mean"] == 1.0
        assert metrics["agents_mean"] == 2
        assert metrics["policy_of_o_is_pol_o_mean"] == 1.0


class CentralizedCriticPolicy(PPOPolicy):
    """Sees the other agents' batches of the same episode when postprocessing (a centralized critic's hook)."""

    seen: list[tuple[int, list[Any]]] = []

    def postprocess_trajectory(self, batch, other_agent_batches=None, episode=None):
        CentralizedCriticPolicy.seen.append((batch["obs"].shape[0], sorted(other_agent_batches)))
        return super().postprocess_trajectory(batch)


def test_policies_that_take_other_agent_batches_get_them_per_episode():
    CentralizedCriticPolicy.seen = []
    policies = {"pol_x": PolicySpec(policy_class=CentralizedCriticPolicy), "pol_o": None}
    with PPO(config=config(multiagent={"policies": policies})) as trainer:
        trainer.algorithm.postprocess(trainer.workers.local_worker.sample())
        assert CentralizedCriticPolicy.seen == [(4, ["o"])]


class FailingTurnGame(TurnGame):
    """Raises at the third step of its second episode (once per process)."""

    failed = False
    episodes = 0

    def reset(self, *, seed=None, options=None):
        type(self).episodes += 1
        return super().reset(seed=seed, options=options)

    def step(self, action_dict):
        if type(self).episodes == 2 and self.t == 2 and not type(self).failed:
            type(self).failed = True
            raise RuntimeError("boom")
        return super().step(action_dict)


def test_a_multi_agent_env_that_raises_is_rebuilt_when_asked():
    cfg = config(env=FailingTurnGame, restart_failed_sub_environments=True, disable_env_checking=True)
    with PPO(config=cfg) as trainer:
        for _ in range(3):
            result = trainer.train()
        assert FailingTurnGame.failed and result["num_env_restarts"] == 1
        assert result["policy_reward_mean"] == {"pol_x": 16.0, "pol_o": -4.0}


def test_evaluation_of_a_multi_agent_env_reports_per_policy_rewards_with_added_policies():
    with PPO(config=config(evaluation_interval=1, evaluation_duration=2)) as trainer:
        result = trainer.train()
        assert result["evaluation"]["policy_reward_mean"] == {"pol_x": 16.0, "pol_o": -4.0}
        trainer.add_policy(
            "x_old", policy=trainer.get_policy("pol_x"),
            policy_mapping_fn=lambda agent_id, *args, **kwargs: "x_old" if agent_id == "x" else "pol_o",
        )
        assert trainer.evaluate(2)["evaluation"]["policy_reward_mean"] == {"x_old": 16.0, "pol_o": -4.0}


def test_a_recreated_worker_gets_the_policies_added_since_it_first_started():
    import os
    import signal

    with PPO(config=config(num_workers=1, recreate_failed_workers=True)) as trainer:
        trainer.add_policy(
            "x_old", policy=trainer.get_policy("pol_x"), policies_to_train=["pol_x", "pol_o"],
            policy_mapping_fn=lambda agent_id, *args, **kwargs: "x_old" if agent_id == "x" else "pol_o",
        )
        (worker,) = trainer.workers.remote_workers
        os.kill(worker.pid, signal.SIGKILL)
        trainer.train()  # the episodes running at the kill were mapped before add_policy
        result = trainer.train()
        assert result["num_worker_restarts"] == 1
        assert trainer.foreach_worker(lambda w: sorted(w.policy_map)) == [["pol_o", "pol_x", "x_old"]] * 2
        assert "x_old" in result["policy_reward_mean"] and "pol_x" not in result["policy_reward_mean"]
