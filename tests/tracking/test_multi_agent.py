"""Multi-agent trials in MLflow: per-policy metrics and params under any policy id, one pyfunc model per trained policy."""

from __future__ import annotations

import numpy as np
import pytest
from mlflow import MlflowClient

from rltune.tracking import StudyTracker, flatten_metrics, flatten_params, policy_key
from rltune.tracking._keys import with_defaults
from rltune.trainers import PPO, PolicySpec, RandomPolicy
from trainers.multi_agent_envs import TurnGame

from .conftest import new_store

ODD_IDS = ["red@1", "red#1", "team/blue", "..", "ok-id_2.v1"]


def test_policy_ids_are_one_part_of_each_key_and_ids_that_clean_alike_stay_apart():
    keys = [policy_key(pid) for pid in ODD_IDS]
    assert keys[-1] == "ok-id_2.v1"  # an id MLflow takes is kept as it is
    assert keys[0].startswith("red_1-") and keys[1].startswith("red_1-") and keys[0] != keys[1]
    assert keys[2].startswith("team_blue-") and keys[3].startswith("..-")
    assert all("/" not in k for k in keys) and len(set(keys)) == len(keys)
    assert [policy_key(pid) for pid in ODD_IDS] == keys  # the same key at every step

    result = {
        "policy_reward_mean": {pid: float(i) for i, pid in enumerate(ODD_IDS)},
        "policy_reward_min": {"red@1": -1.0},
        "evaluation": {"policy_reward_max": {"red#1": 5.0}},
        "info": {"learner": {"red@1": {"entropy": 0.5}, "team/blue": {"kl": 0.01}}},
        "custom_metrics": {"red@1": 2.0},  # not a per-policy dict: cleaned as before
    }
    flat = flatten_metrics(result)
    assert {k: v for k, v in flat.items() if k.startswith("policy_reward_mean/")} == {
        f"policy_reward_mean/{k}": float(i) for i, k in enumerate(keys)}
    assert flat[f"policy_reward_min/{keys[0]}"] == -1.0 and flat[f"evaluation/policy_reward_max/{keys[1]}"] == 5.0
    assert flat[f"info/learner/{keys[0]}/entropy"] == 0.5 and flat[f"info/learner/{keys[2]}/kl"] == 0.01
    assert flat["custom_metrics/red_1"] == 2.0


def test_policy_ids_in_params_and_defaults_that_the_config_details():
    config = {"lr": 1e-3, "multiagent": {"policies": {"red@1": {"config": {"lr": 0.01}}, "p.v1": {}}}}
    params = flatten_params(config)
    assert params == {"lr": "0.001", f"multiagent.policies.{policy_key('red@1')}.config.lr": "0.01",
                      "multiagent.policies.p.v1": "{}"}
    defaults = flatten_params({"lr": 5e-5, "multiagent": {"policies": {}, "policy_mapping_fn": None}, "env_config": {}})
    merged = with_defaults(defaults, params)
    assert "multiagent.policies" not in merged  # "{}" next to the policies would say there are none
    assert merged["multiagent.policy_mapping_fn"] == "null" and merged["env_config"] == "{}" and merged["lr"] == "0.001"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A TurnGame checkpoint: pol_x (PPO, trained, its own model size), pol_o (PPO, not trained), rnd (random)."""
    def mapping(agent_id, episode=None, worker=None, **kwargs):
        return "pol_x" if agent_id == "x" else "pol_o"

    config = {
        "env": TurnGame, "seed": 0, "train_batch_size": 16, "sgd_minibatch_size": 16, "num_sgd_iter": 1,
        "rollout_fragment_length": 8, "model": {"fcnet_hiddens": [16]},
        "multiagent": {"policies": {"pol_x": PolicySpec(config={"model": {"fcnet_hiddens": [8]}}), "pol_o": None,
                                    "rnd": PolicySpec(policy_class=RandomPolicy)},
                       "policy_mapping_fn": mapping, "policies_to_train": ["pol_x"]},
    }
    directory = tmp_path_factory.mktemp("ma")
    with PPO(config=config, results_dir=directory) as trainer:
        trainer.train()
        path = trainer.save(directory / "ckpt")
        probes = np.array([[0.0, 0.0], [0.25, 0.0], [0.5, 0.0], [0.75, 0.0]], np.float32)
        greedy = [trainer.compute_single_action(obs, policy_id="pol_x") for obs in probes]
    return path, probes, greedy


def test_a_multi_agent_trial_logs_one_model_per_trained_policy(checkpoint, store, tmp_path):
    import mlflow.pyfunc

    path, probes, greedy = checkpoint
    tracker = StudyTracker(None, store, "multi-agent", "tpe", "none")
    side = tracker.open_trial(0, {"lr": 0.001}, {"lr": 0.001})
    side.log_result({"training_iteration": 1, "policy_reward_mean": {"pol_x": 16.0, "pol_o": -4.0}})
    side.log_result({"training_iteration": 2, "policy_reward_mean": {pid: 1.0 for pid in ODD_IDS}})
    assert side.log_policy_model(path) == f"runs:/{side.run_id}/policy_model"
    tracker.end_trial(side, "COMPLETE")
    tracker.close()
    assert tracker.unrecorded == []  # the single-agent export used to fail here (no default_policy)
    client = MlflowClient(tracker.tracking_uri)
    run = client.get_run(side.run_id)
    assert run.data.metrics["policy_reward_mean/pol_x"] == 16.0 and run.data.metrics["policy_reward_mean/pol_o"] == -4.0
    assert all(run.data.metrics[f"policy_reward_mean/{policy_key(pid)}"] == 1.0 for pid in ODD_IDS)  # MLflow took them
    assert [a.path for a in client.list_artifacts(side.run_id, "policy_model")] == ["policy_model/pol_x"]
    model = mlflow.pyfunc.load_model(f"{run.info.artifact_uri}/policy_model/pol_x")
    assert model.metadata.metadata["rltune_policy_id"] == "pol_x"
    assert model.predict(probes).tolist() == greedy  # its own model size ([8]) and spaces


@pytest.fixture
def store(tmp_path, template_db):
    return new_store(template_db, tmp_path / "results")
