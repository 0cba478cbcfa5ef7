"""recreate_failed_workers: a rollout worker killed while it starts, or again while it restarts, starts again.

Found by the study fault test (tests/orchestrator/test_faults.py): a worker
killed at the trainer's start failed the trial, with a message asking to set
``recreate_failed_workers``, which was set.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import gymnasium as gym
import pytest

from rltune.errors import WorkerError
from rltune.trainers import PPO

from .test_workers import process_alive, wait_gone

TINY = {"num_workers": 1, "num_envs_per_worker": 1, "rollout_fragment_length": 10, "train_batch_size": 10,
        "sgd_minibatch_size": 10, "num_sgd_iter": 1, "model": {"fcnet_hiddens": [8]}, "recreate_failed_workers": True}


class DiesWhileStarting(gym.Env):
    """CartPole; a rollout worker building it SIGKILLs itself while a ``deaths`` file in ``env_config["dir"]`` says so."""

    def __init__(self, config) -> None:
        self.env = gym.make("CartPole-v1")
        self.observation_space, self.action_space = self.env.observation_space, self.env.action_space
        deaths = Path(config["dir"]) / "deaths"
        if config.worker_index > 0 and deaths.exists() and int(deaths.read_text()) > 0:
            deaths.write_text(str(int(deaths.read_text()) - 1))
            os.kill(os.getpid(), signal.SIGKILL)

    def reset(self, *, seed=None, options=None):
        return self.env.reset(seed=seed, options=options)

    def step(self, action):
        return self.env.step(action)


def _trainer(tmp_path: Path, deaths: int, **config) -> PPO:
    (tmp_path / "deaths").write_text(str(deaths))
    return PPO(config={**TINY, "env_config": {"dir": str(tmp_path)}, **config}, env=DiesWhileStarting)


def test_a_worker_killed_while_the_trainer_starts_starts_again(tmp_path):
    trainer = _trainer(tmp_path, deaths=1)
    try:
        result = trainer.train()
        assert result["num_worker_restarts"] == 1 and result["num_healthy_workers"] == 1
    finally:
        trainer.stop()


def test_a_worker_that_dies_again_while_it_restarts_is_restarted_again(tmp_path):
    trainer = _trainer(tmp_path, deaths=0)
    try:
        trainer.train()
        pid = trainer.workers.remote_workers[0].pid
        (tmp_path / "deaths").write_text("2")  # its next two starts die
        os.kill(pid, signal.SIGKILL)
        assert wait_gone([pid]) == []
        result = trainer.train()
        assert result["training_iteration"] == 2 and result["num_worker_restarts"] == 3
        assert process_alive(trainer.workers.remote_workers[0].pid)
    finally:
        trainer.stop()


def test_restarts_stop_at_max_num_worker_restarts_with_a_worker_error(tmp_path):
    with pytest.raises(WorkerError, match=r"rollout worker 1 .*died.*gave up after 2 restarts \(max_num_worker_restarts\)"):
        _trainer(tmp_path, deaths=5, max_num_worker_restarts=2)
