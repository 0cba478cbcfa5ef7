"""A policy's export to a directory and its import as an acting policy live in the trainers; tracking only calls them."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np

import rltune
from rltune.env import make_multi_agent
from rltune.trainers import PPO, DQNPolicy, PolicySpec, PPOPolicy
from rltune.trainers.checkpoints import (
    export_policy,
    exported_policy_ids,
    exported_policy_info,
    load_exported_filter,
    load_exported_policy,
)

TINY = {"train_batch_size": 32, "rollout_fragment_length": 32, "sgd_minibatch_size": 32, "num_sgd_iter": 1,
        "model": {"fcnet_hiddens": [8]}, "seed": 0}
TRACKING = Path(rltune.__file__).parent / "tracking"


def test_an_exported_policy_loads_back_and_acts_as_the_trainers(tmp_path):
    with PPO(config={**TINY, "observation_filter": "MeanStdFilter"}, env="CartPole-v1", results_dir=tmp_path) as trainer:
        trainer.train()
        out = export_policy(trainer, tmp_path / "policy")
        obs = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
        expected = [trainer.compute_single_action(o) for o in obs]
        checkpoint = trainer.save(tmp_path / "ckpt")
    info = exported_policy_info(out)
    assert (info.algorithm, info.policy_id, info.observation_space.shape, info.action_space.n) == ("PPO", "default_policy", (4,), 2)
    policy, obs_filter = load_exported_policy(out), load_exported_filter(out)
    actions, _ = policy.compute_actions(obs_filter.normalize(obs.copy()), explore=False)
    assert policy.to_env_actions(actions) == expected
    from_checkpoint = load_exported_policy(export_policy(checkpoint, tmp_path / "from_checkpoint"))
    assert all(np.array_equal(a, b) for a, b in zip(from_checkpoint.get_weights().values(), policy.get_weights().values()))


def test_the_trained_policies_are_exported_whether_their_spec_names_the_algorithms_class_or_none(tmp_path):
    policies = {"own": PolicySpec(PPOPolicy), "implicit": PolicySpec(), "hosted": PolicySpec(DQNPolicy), "frozen": None}
    config = {**TINY, "env": make_multi_agent("CartPole-v1"), "env_config": {"num_agents": 4},
              "multiagent": {"policies": policies, "policies_to_train": ["own", "implicit"],
                             "policy_mapping_fn": lambda agent, *a, **k: ["own", "implicit", "hosted", "frozen"][agent]}}
    with PPO(config=config, results_dir=tmp_path) as trainer:
        assert sorted(exported_policy_ids(trainer)) == ["implicit", "own"]
        assert sorted(exported_policy_ids(trainer.save(tmp_path / "ckpt"))) == ["implicit", "own"]


def test_tracking_imports_no_private_module_of_the_trainers():
    private = []
    for path in sorted(TRACKING.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("rltune.trainers"):
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
                private += [f"{path.name}: {n}" for n in names if any(p.startswith("_") for p in n.split(".")[1:])]
            elif isinstance(node, ast.Import):
                private += [f"{path.name}: {a.name}" for a in node.names
                            if a.name.startswith("rltune.trainers") and any(p.startswith("_") for p in a.name.split("."))]
    assert not private, "rltune.tracking reaches into the trainers' private modules: " + ", ".join(private)
