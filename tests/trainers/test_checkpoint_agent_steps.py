"""A checkpoint keeps the agent steps sampled (``agent_timesteps_total``), not only the env steps."""

from __future__ import annotations

import json
from pathlib import Path

from rltune.trainers import PPO

from .checkpoints import reseal
from .multi_agent_envs import RockPaperScissors

CONFIG = {
    "env": RockPaperScissors,
    "multiagent": {"policies": ["shared"], "policy_mapping_fn": lambda agent_id, *args, **kwargs: "shared"},
    "num_workers": 0, "rollout_fragment_length": 10, "train_batch_size": 20, "sgd_minibatch_size": 10,
    "num_sgd_iter": 1, "seed": 0, "model": {"fcnet_hiddens": [8]},
}


def test_restore_brings_back_the_agent_steps_sampled(tmp_path) -> None:
    with PPO(CONFIG, results_dir=tmp_path) as trainer:
        trainer.train()
        trainer.train()
        agent_steps = trainer.agent_timesteps_total
        assert agent_steps == 2 * trainer.timesteps_total  # two players act at every step
        path = trainer.save(tmp_path / "ckpt")
    with PPO(CONFIG, results_dir=tmp_path) as restored:
        restored.restore(path)
        assert restored.agent_timesteps_total == agent_steps
        result = restored.train()
        assert result["agent_timesteps_total"] == agent_steps + 2 * result["timesteps_this_iter"]


def test_a_checkpoint_from_before_counts_its_env_steps_as_agent_steps(tmp_path) -> None:
    with PPO(CONFIG, results_dir=tmp_path) as trainer:
        trainer.train()
        path = trainer.save(tmp_path / "ckpt")
        steps = trainer.timesteps_total
    metadata_file = Path(path) / "rltune_checkpoint.json"
    metadata = json.loads(metadata_file.read_text())
    del metadata["agent_timesteps_total"]  # as rltune wrote them before it saved the agent steps
    metadata_file.write_text(json.dumps(metadata))
    reseal(Path(path))
    with PPO(CONFIG, results_dir=tmp_path) as restored:
        restored.restore(path)
        assert restored.agent_timesteps_total == steps
