"""log_level applies inside rollout worker processes, so env code that logs is seen (or silenced)."""

from __future__ import annotations

import pytest

from rltune.trainers import PPO

from trainers.envs import LoggingEnv

SMALL = {
    "num_workers": 1,
    "rollout_fragment_length": 20,
    "train_batch_size": 20,
    "sgd_minibatch_size": 20,
    "num_sgd_iter": 1,
    "model": {"fcnet_hiddens": [8]},
}


@pytest.mark.parametrize(
    ("level", "info_seen", "warning_seen"),
    [("INFO", True, True), ("WARN", False, True), ("ERROR", False, False)],
)
def test_log_level_reaches_env_code_in_worker_processes(capfd, level, info_seen, warning_seen):
    trainer = PPO(config={**SMALL, "log_level": level}, env=LoggingEnv)
    try:
        trainer.train()
    finally:
        trainer.stop()
    err = capfd.readouterr().err
    assert ("info from env in worker 1" in err) is info_seen
    assert ("warning from env in worker 1" in err) is warning_seen
