"""DQN's ``tau``: each target sync moves the target network by tau toward the online one; 1.0 is a hard copy."""

from __future__ import annotations

import pytest
import torch

from rltune.errors import ConfigError
from rltune.trainers import DQN

# One round of 16 steps: the one target sync (at step 16) comes before the round's one gradient step.
ONE_SYNC = {
    "rollout_fragment_length": 16,
    "train_batch_size": 8,
    "learning_starts": 16,
    "target_network_update_freq": 16,
    "min_sample_timesteps_per_iteration": 16,
    "model": {"fcnet_hiddens": [16]},
    "hiddens": [8],
    "seed": 0,
}


@pytest.mark.parametrize("tau", [0.3, 1.0])
def test_a_target_sync_moves_the_target_by_tau_toward_the_online_network(tau):
    with DQN({**ONE_SYNC, "tau": tau}, env="CartPole-v1") as trainer:
        learner = trainer.get_learner()
        with torch.no_grad():
            for p in learner.target_model.parameters():
                p.fill_(1.0)  # away from the online net, so that the move shows
        online = {k: v.clone() for k, v in trainer.get_policy().model.state_dict().items()}  # no gradient step yet
        trainer.train()
        assert trainer.algorithm.num_target_updates == 1 and trainer.algorithm.num_grad_steps == 1
        target = learner.target_model.state_dict()
        for key, value in online.items():
            torch.testing.assert_close(target[key], tau * value + (1 - tau) * torch.ones_like(value))
        # The gradient step after the sync moved the online net only.
        assert any(not torch.equal(v, online[k]) for k, v in trainer.get_policy().model.state_dict().items())


def test_tau_defaults_to_a_hard_copy_as_before():
    assert DQN.get_default_config()["tau"] == 1.0
    with DQN(ONE_SYNC, env="CartPole-v1") as trainer:
        online = {k: v.clone() for k, v in trainer.get_policy().model.state_dict().items()}
        with torch.no_grad():
            for p in trainer.get_learner().target_model.parameters():
                p.zero_()
        trainer.train()
        for key, value in trainer.get_learner().target_model.state_dict().items():
            torch.testing.assert_close(value, online[key], rtol=0, atol=0)


@pytest.mark.parametrize("tau", [0, -0.5, 1.5])
def test_tau_outside_zero_one_is_a_config_error_naming_the_key(tau):
    with pytest.raises(ConfigError, match=r"tau: Input should be (greater than 0|less than or equal to 1)"):
        DQN({**ONE_SYNC, "tau": tau}, env="CartPole-v1")
