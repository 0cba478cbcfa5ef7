"""PLR's fragment scores: the vectorized GAE pass gives what the straightforward step-by-step loop gives."""

from __future__ import annotations

import numpy as np
import pytest

from rltune.callbacks._plr_scores import discounted_sums, fragment_scores
from rltune.trainers.sampling._fragment import Fragment


def reference_advantages(rewards, values, terminated, truncated, gamma, lam):
    """GAE written out step by step, env by env (the fragment's last step bootstraps from its own value)."""
    steps, envs = rewards.shape
    advantages = np.zeros((steps, envs))
    for k in range(envs):
        running = 0.0
        for t in reversed(range(steps)):
            done = terminated[t, k] or truncated[t, k]
            if terminated[t, k]:
                next_value = 0.0
            elif done or t == steps - 1:
                next_value = values[t, k]
            else:
                next_value = values[t + 1, k]
            delta = rewards[t, k] + gamma * next_value - values[t, k]
            running = delta + (0.0 if done else gamma * lam * running)
            advantages[t, k] = running
    return advantages


@pytest.mark.parametrize("steps, envs", [(64, 8), (1, 3), (5, 1), (200, 2)])
@pytest.mark.parametrize("gamma, lam", [(0.99, 0.95), (1.0, 1.0), (0.9, 0.0)])
def test_fragment_scores_match_gae_written_step_by_step_on_random_fragments(steps, envs, gamma, lam):
    rng = np.random.default_rng(steps * 100 + envs)
    rewards = rng.normal(size=(steps, envs))
    values = rng.normal(size=(steps, envs))
    terminated = rng.random((steps, envs)) < 0.1  # episode ends, some by a time limit
    truncated = ~terminated & (rng.random((steps, envs)) < 0.05)
    keep = rng.random((steps, envs)) < 0.9
    row_tasks = rng.integers(-1, 4, size=(steps, envs))  # -1: a row of no task
    fragment = Fragment("default_policy", {"rewards": rewards, "vf_preds": values, "terminateds": terminated,
                                           "truncateds": truncated}, keep=keep)
    expected = reference_advantages(rewards, values, terminated, truncated, gamma, lam)
    ok = keep & (row_tasks >= 0)
    for score, per_step in (("value_l1", np.abs(expected)), ("positive_value_loss", np.maximum(expected, 0.0))):
        sums, rows = fragment_scores(fragment, row_tasks, 4, score, gamma, lam)
        assert rows.tolist() == np.bincount(row_tasks[ok], minlength=4).tolist()
        assert np.allclose(sums, np.bincount(row_tasks[ok], weights=per_step[ok], minlength=4), rtol=1e-12, atol=1e-12)


def test_discounted_sums_stop_at_episode_ends_and_at_the_column_end():
    values = np.array([[1.0], [2.0], [4.0], [8.0]])
    carry = np.array([[0.5], [0.0], [0.5], [0.5]])  # an episode ends at row 1
    assert discounted_sums(values, carry)[:, 0].tolist() == [2.0, 2.0, 8.0, 8.0]
