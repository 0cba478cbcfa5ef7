"""Action sampling on the rollout path (numpy) against the distributions the learner uses (torch)."""

import numpy as np
import torch

from rltune.trainers.policies._distributions import Categorical, DiagGaussian, sample_categorical, sample_diag_gaussian


def test_categorical_draws_follow_the_probabilities_and_report_their_logp():
    probs = np.array([[0.1, 0.6, 0.3], [0.8, 0.1, 0.1]], dtype=np.float32)
    log_probs = np.tile(np.log(probs), (20_000, 1))  # rows alternate between the two distributions
    rng = np.random.default_rng(0)
    actions, logp = sample_categorical(log_probs, rng, deterministic=False)
    for row in range(2):
        freq = np.bincount(actions[row::2], minlength=3) / len(actions[row::2])
        np.testing.assert_allclose(freq, probs[row], atol=0.01)
    # The log-prob of each drawn action, as the learner computes it from the same inputs.
    expected = Categorical(torch.from_numpy(log_probs)).logp(torch.from_numpy(actions)).numpy()
    np.testing.assert_allclose(logp, expected, rtol=1e-6)


def test_categorical_deterministic_is_the_most_likely_action():
    log_probs = np.log(np.array([[0.2, 0.7, 0.1], [0.5, 0.2, 0.3]], dtype=np.float32))
    actions, logp = sample_categorical(log_probs, np.random.default_rng(0), deterministic=True)
    assert actions.tolist() == [1, 0]
    np.testing.assert_allclose(logp, np.log([0.7, 0.5]), rtol=1e-6)


def test_diag_gaussian_logp_matches_the_learners():
    inputs = np.array([[0.5, -1.0, np.log(0.3), 0.0]] * 5000, dtype=np.float32)
    actions, logp = sample_diag_gaussian(inputs, np.random.default_rng(0), deterministic=False)
    np.testing.assert_allclose(actions.mean(axis=0), [0.5, -1.0], atol=0.03)
    np.testing.assert_allclose(actions.std(axis=0), [0.3, 1.0], atol=0.03)
    expected = DiagGaussian(torch.from_numpy(inputs)).logp(torch.from_numpy(actions)).numpy()
    np.testing.assert_allclose(logp, expected, rtol=1e-5, atol=1e-5)
