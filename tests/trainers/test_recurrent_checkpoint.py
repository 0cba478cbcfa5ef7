"""A recurrent policy through a checkpoint: restored, it acts and carries its state as the saved one did."""

from __future__ import annotations

import numpy as np

from .test_recurrent_memory import CONFIG, GRUPPO, RepeatPastEnv

TINY = {**CONFIG, "train_batch_size": 200, "rollout_fragment_length": 50, "num_sgd_iter": 2}


def _rollout(policy, observations) -> tuple[list[int], np.ndarray]:
    state = policy.get_initial_state()
    actions = []
    for obs in observations:
        action, state, _ = policy.compute_single_action(obs, state)
        actions.append(int(action))
    return actions, state[0]


def test_a_restored_recurrent_policy_acts_and_carries_its_state_as_the_saved_one(tmp_path):
    trainer = GRUPPO(config=TINY, env=RepeatPastEnv)
    observations = np.eye(2, dtype=np.float32)[np.random.default_rng(0).integers(2, size=12)]
    try:
        trainer.train()
        expected_actions, expected_state = _rollout(trainer.get_policy(), observations)
        path = trainer.save(str(tmp_path / "ckpt"))
    finally:
        trainer.stop()
    fresh = GRUPPO(config={**TINY, "seed": 1}, env=RepeatPastEnv)
    try:
        before = _rollout(fresh.get_policy(), observations)[1]
        fresh.restore(path)
        actions, state = _rollout(fresh.get_policy(), observations)
        assert fresh.get_policy().is_recurrent()
        assert actions == expected_actions
        np.testing.assert_allclose(state, expected_state, rtol=1e-5, atol=1e-6)
        assert not np.allclose(before, expected_state)  # the restore, not the seed, made them equal
        fresh.train()  # and it trains on
    finally:
        fresh.stop()
