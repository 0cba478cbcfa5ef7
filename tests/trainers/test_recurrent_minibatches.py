"""PPO's updates of a recurrent policy: minibatches of whole sequences with their start states, the padding masked out of the loss."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from rltune.trainers import PPO, PPOPolicy
from rltune.trainers.learning._sequences import SEQ_STARTS

STARTS = [0, 3, 5, 9]  # four sequences of 3, 2, 4 and 3 steps
ROWS = 12


class SpyModel(nn.Module):
    """Records what each training forward gets; its outputs are NaN on padding (obs 0: real rows have obs >= 1)."""

    def __init__(self) -> None:
        super().__init__()
        self.logits = nn.Parameter(torch.zeros(2))
        self.value = nn.Parameter(torch.zeros(()))
        self.calls: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []

    def get_initial_state(self) -> list[torch.Tensor]:
        return [torch.zeros(1)]

    def forward(self, obs, state, seq_lens):
        if seq_lens is not None:
            self.calls.append((obs[..., 0].detach().numpy().copy(), state[0][:, 0].detach().numpy().copy(), seq_lens.numpy().copy()))
        batch, steps = obs.shape[:2]
        poison = torch.log(obs[..., 0]) * 0.0  # NaN where obs is 0
        return self.logits + poison[..., None], self.value + poison, [state[0] + steps]


class SpyPolicy(PPOPolicy):
    def make_model(self) -> nn.Module:
        return SpyModel()


class SpyPPO(PPO):
    policy_class = SpyPolicy


def _sequence_batch() -> dict[str, np.ndarray]:
    rows = np.arange(ROWS)
    starts = np.zeros(ROWS, bool)
    starts[STARTS] = True
    return {"obs": np.repeat((rows + 1.0)[:, None], 4, axis=1).astype(np.float32), "actions": rows % 2,
            "action_logp": np.full(ROWS, np.log(0.5), np.float32), "vf_preds": np.zeros(ROWS, np.float32),
            "advantages": np.random.default_rng(0).normal(size=ROWS).astype(np.float32),
            "value_targets": np.ones(ROWS, np.float32), "state_in_0": (rows + 100.0)[:, None].astype(np.float32),
            SEQ_STARTS: starts}


def test_minibatches_hold_whole_sequences_with_their_start_states_and_mask_the_padding():
    config = {"num_workers": 0, "train_batch_size": 12, "rollout_fragment_length": 12, "sgd_minibatch_size": 6,
              "num_sgd_iter": 3, "seed": 0, "lr": 0.01, "kl_coeff": 0.0}
    trainer = SpyPPO(config=config, env="CartPole-v1")
    try:
        learner = trainer.algorithm.learners["default_policy"]
        model = learner.policy.model
        stats = learner.update(_sequence_batch())
        assert stats["num_sgd_steps"] == 6 and len(model.calls) == 6  # 2 minibatches of 2 sequences per epoch
        assert stats["num_nonfinite_updates"] == 0 and np.isfinite(stats["total_loss"])  # no NaN from the padding
        lengths = dict(zip(STARTS, np.diff(STARTS + [ROWS]).tolist()))
        for epoch in range(3):
            seen = []
            for obs, state, seq_lens in model.calls[2 * epoch:2 * epoch + 2]:
                for row, first_state, length in zip(obs, state, seq_lens):
                    first = int(row[0]) - 1
                    seen.append(first)
                    assert length == lengths[first]
                    assert row[:length].tolist() == list(range(first + 1, first + 1 + length))  # the sequence's rows, in order
                    assert not row[length:].any()  # zero padding
                    assert first_state == first + 100  # the state at the sequence's start
            assert sorted(seen) == STARTS  # each sequence once per epoch
        assert model.logits.detach().abs().sum() > 0  # it trained
    finally:
        trainer.stop()
