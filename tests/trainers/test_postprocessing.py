"""GAE and n-step returns against hand-computed numbers, and PPO's bootstrapping end to end."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces

from rltune.trainers import PPO
from rltune.trainers.learning._postprocessing import compute_gae, compute_n_step
from rltune.trainers.algorithms._ppo import PPOPolicy
from rltune.trainers.sampling._sample_batch import (
    ACTION_LOGP,
    ACTIONS,
    ADVANTAGES,
    NEW_OBS,
    OBS,
    REWARDS,
    TERMINATEDS,
    TRUNCATEDS,
    VALUE_TARGETS,
    VF_PREDS,
)

from .envs import CountingEnv

GAMMA = 0.9
LAMBDA = 0.5

# One env, 4 steps; the episode ends at t=1 (obs reached there is the final obs).
REWARDS_4 = np.array([[1.0], [2.0], [3.0], [4.0]], dtype=np.float32)
VALUES_4 = np.array([[0.5], [1.0], [1.5], [2.0]], dtype=np.float32)
# V(obs reached by step t): V(obs_1)=1.0, V(final obs of the first episode)=7.0,
# V(obs_3)=2.0, V(obs after the fragment)=3.0.
NEXT_VALUES_4 = np.array([[1.0], [7.0], [2.0], [3.0]], dtype=np.float32)


def _col(*values: float) -> np.ndarray:
    return np.array(values, dtype=np.float32).reshape(-1, 1)


def test_gae_terminated_episode_end_by_hand():
    # deltas: d3 = 4 + .9*3 - 2 = 4.7; d2 = 3 + .9*2 - 1.5 = 3.3;
    #         d1 = 2 + 0 - 1 = 1.0 (terminated: no bootstrap); d0 = 1 + .9*1 - .5 = 1.4
    # A3 = 4.7; A2 = 3.3 + .45*4.7 = 5.415; A1 = 1.0 (recursion stops at the end); A0 = 1.4 + .45*1.0 = 1.85
    terminateds = np.array([[False], [True], [False], [False]])
    truncateds = np.zeros_like(terminateds)
    adv, targets = compute_gae(REWARDS_4, VALUES_4, NEXT_VALUES_4, terminateds, truncateds, GAMMA, LAMBDA)
    np.testing.assert_allclose(adv, _col(1.85, 1.0, 5.415, 4.7), rtol=1e-6)
    np.testing.assert_allclose(targets, _col(2.35, 2.0, 6.915, 6.7), rtol=1e-6)
    assert adv.shape == (4, 1) and targets.shape == (4, 1)


def test_gae_truncated_episode_end_bootstraps_from_final_obs():
    # Same data, but t=1 is cut by a time limit: d1 = 2 + .9*7 - 1 = 7.3,
    # A1 = 7.3 (the recursion still stops there), A0 = 1.4 + .45*7.3 = 4.685.
    terminateds = np.zeros((4, 1), dtype=bool)
    truncateds = np.array([[False], [True], [False], [False]])
    adv, targets = compute_gae(REWARDS_4, VALUES_4, NEXT_VALUES_4, terminateds, truncateds, GAMMA, LAMBDA)
    np.testing.assert_allclose(adv, _col(4.685, 7.3, 5.415, 4.7), rtol=1e-6)
    np.testing.assert_allclose(targets, _col(5.185, 8.3, 6.915, 6.7), rtol=1e-6)


def test_gae_columns_are_independent_envs():
    # Two envs side by side: env 0 terminates at t=1, env 1 is truncated at t=1.
    rewards = np.concatenate([REWARDS_4, REWARDS_4], axis=1)
    values = np.concatenate([VALUES_4, VALUES_4], axis=1)
    next_values = np.concatenate([NEXT_VALUES_4, NEXT_VALUES_4], axis=1)
    terminateds = np.array([[False, False], [True, False], [False, False], [False, False]])
    truncateds = np.array([[False, False], [False, True], [False, False], [False, False]])
    adv, _ = compute_gae(rewards, values, next_values, terminateds, truncateds, GAMMA, LAMBDA)
    np.testing.assert_allclose(adv[:, 0], [1.85, 1.0, 5.415, 4.7], rtol=1e-6)
    np.testing.assert_allclose(adv[:, 1], [4.685, 7.3, 5.415, 4.7], rtol=1e-6)


def test_gae_lambda_one_no_episode_end_is_discounted_return_minus_value():
    rewards = _col(1.0, 2.0, 3.0)
    values = _col(0.5, 0.25, 2.0)
    next_values = _col(0.25, 2.0, 10.0)
    none = np.zeros((3, 1), dtype=bool)
    adv, targets = compute_gae(rewards, values, next_values, none, none, 0.9, 1.0)
    # value target = discounted return bootstrapped with V=10 after the fragment
    g2 = 3 + 0.9 * 10
    g1 = 2 + 0.9 * g2
    g0 = 1 + 0.9 * g1
    np.testing.assert_allclose(targets, _col(g0, g1, g2), rtol=1e-6)
    np.testing.assert_allclose(adv, _col(g0 - 0.5, g1 - 0.25, g2 - 2.0), rtol=1e-6)


def test_n_step_by_hand_with_episode_end():
    # n=3, gamma=.9, rewards 1..5 on one env, the episode ends at t=1.
    rewards = _col(1, 2, 3, 4, 5)
    terminateds = np.array([[False], [True], [False], [False], [False]])
    truncateds = np.zeros_like(terminateds)
    returns, offsets, discounts = compute_n_step(rewards, terminateds, truncateds, 3, 0.9)
    # t=0: 1 + .9*2 (stops at the end at t=1)       -> 2.8,   last step t=1, gamma^2
    # t=1: 2                                         -> 2.0,   last step t=1, gamma^1
    # t=2: 3 + .9*4 + .81*5                          -> 10.65, last step t=4, gamma^3
    # t=3: 4 + .9*5 (the fragment ends)              -> 8.5,   last step t=4, gamma^2
    # t=4: 5                                         -> 5.0,   last step t=4, gamma^1
    np.testing.assert_allclose(returns[:, 0], [2.8, 2.0, 10.65, 8.5, 5.0], rtol=1e-6)
    np.testing.assert_array_equal(offsets[:, 0], [1, 0, 2, 1, 0])
    np.testing.assert_allclose(discounts[:, 0], [0.81, 0.9, 0.729, 0.81, 0.9], rtol=1e-6)


def test_n_step_stops_at_truncation_too_and_envs_are_independent():
    rewards = np.array([[1, 10], [2, 20], [3, 30], [4, 40], [5, 50]], dtype=np.float32)
    terminateds = np.zeros((5, 2), dtype=bool)
    truncateds = np.zeros((5, 2), dtype=bool)
    truncateds[1, 0] = True  # env 0 cut at t=1; env 1 runs through
    returns, offsets, discounts = compute_n_step(rewards, terminateds, truncateds, 3, 0.9)
    np.testing.assert_allclose(returns[:, 0], [2.8, 2.0, 10.65, 8.5, 5.0], rtol=1e-6)
    np.testing.assert_allclose(returns[:, 1], [10 + 18 + 24.3, 20 + 27 + 32.4, 30 + 36 + 40.5, 40 + 45, 50], rtol=1e-6)
    np.testing.assert_array_equal(offsets[:, 1], [2, 2, 2, 1, 0])
    np.testing.assert_allclose(discounts[:, 1], [0.729, 0.729, 0.729, 0.81, 0.9], rtol=1e-6)


# --- PPOPolicy.postprocess_trajectory: the same rules on a real policy -------------


@pytest.fixture(scope="module")
def policy() -> PPOPolicy:
    cfg = PPO.validate({"gamma": GAMMA, "lambda": LAMBDA, "model": {"fcnet_hiddens": [8]}})
    obs_space = spaces.Box(-1.0, 1.0, (3,), np.float32)
    return PPOPolicy(obs_space, spaces.Discrete(2), cfg, seed=0)


def _hand_gae(r, v, next_v, ends, gamma, lam):
    """Backward GAE for one env; next_v[t] is the bootstrap value (already 0 where terminated)."""
    adv = np.zeros(len(r))
    running = 0.0
    for t in reversed(range(len(r))):
        delta = r[t] + gamma * next_v[t] - v[t]
        running = delta + (0.0 if ends[t] else gamma * lam * running)
        adv[t] = running
    return adv


def test_ppo_postprocess_bootstraps_truncated_but_not_terminated(policy):
    # T=3 steps of N=3 envs. env 0 terminates at t=1, env 1 is truncated at t=1,
    # env 2 terminates at the last step t=2.
    rng = np.random.default_rng(0)
    T, N = 3, 3
    obs = rng.uniform(-1, 1, (T, N, 3)).astype(np.float32)
    new_obs = np.empty_like(obs)
    new_obs[:-1] = obs[1:]
    new_obs[-1] = rng.uniform(-1, 1, (N, 3))
    # Where an episode ended, new_obs is the episode's final obs, not the next reset obs.
    final_obs_env0 = rng.uniform(-1, 1, 3).astype(np.float32)
    final_obs_env1 = rng.uniform(-1, 1, 3).astype(np.float32)
    new_obs[1, 0] = final_obs_env0
    new_obs[1, 1] = final_obs_env1
    terminateds = np.zeros((T, N), dtype=bool)
    truncateds = np.zeros((T, N), dtype=bool)
    terminateds[1, 0] = True
    truncateds[1, 1] = True
    terminateds[2, 2] = True
    rewards = np.array([[1.0, 0.5, -1.0], [2.0, 1.5, 0.0], [3.0, -2.0, 4.0]], dtype=np.float32)
    values = policy.values(obs.reshape(T * N, 3)).reshape(T, N)
    batch = {
        OBS: obs,
        ACTIONS: np.zeros((T, N), dtype=np.int64),
        REWARDS: rewards,
        NEW_OBS: new_obs,
        TERMINATEDS: terminateds,
        TRUNCATEDS: truncateds,
        ACTION_LOGP: np.zeros((T, N), dtype=np.float32),
        VF_PREDS: values,
    }
    out = policy.postprocess_trajectory({k: v.copy() for k, v in batch.items()})

    def V(x):
        return float(policy.values(np.asarray(x, dtype=np.float32)[None])[0])

    # Bootstrap values written out env by env.
    next_v = {
        0: [values[1, 0], 0.0, V(new_obs[2, 0])],  # terminated at t=1: nothing
        1: [values[1, 1], V(final_obs_env1), V(new_obs[2, 1])],  # truncated at t=1: V(final obs)
        2: [values[1, 2], values[2, 2], 0.0],  # terminated at the fragment end: nothing
    }
    ends = {0: [False, True, False], 1: [False, True, False], 2: [False, False, True]}
    assert out[ADVANTAGES].shape == (T * N,)
    for i in range(N):
        expected = _hand_gae(rewards[:, i], values[:, i], next_v[i], ends[i], GAMMA, LAMBDA)
        got = out[ADVANTAGES].reshape(T, N)[:, i]  # flat rows are t*N + i
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6, err_msg=f"env {i}")
        np.testing.assert_allclose(
            out[VALUE_TARGETS].reshape(T, N)[:, i], expected + values[:, i], rtol=1e-5, atol=1e-6
        )
    # The numbers of env 1 at t=1 spelled out: r + gamma * V(final obs) - V(s).
    assert out[ADVANTAGES].reshape(T, N)[1, 1] == pytest.approx(1.5 + GAMMA * V(final_obs_env1) - values[1, 1], rel=1e-5)
    # env 0 at t=1 bootstraps nothing: r - V(s).
    assert out[ADVANTAGES].reshape(T, N)[1, 0] == pytest.approx(2.0 - values[1, 0], rel=1e-5)
    # The other columns are kept and flattened time-major.
    np.testing.assert_array_equal(out[OBS], obs.reshape(T * N, 3))
    np.testing.assert_array_equal(out[REWARDS], rewards.reshape(-1))


def test_sampler_stores_final_obs_and_flags_at_episode_ends():
    """What the sampler hands to postprocessing: the final obs of a cut episode, not the next reset obs."""
    captured = []
    for truncate in (False, True):
        trainer = PPO(
            config={
                "env_config": {"episode_len": 3, "truncate": truncate},
                "rollout_fragment_length": 7,
                "train_batch_size": 7,
                "sgd_minibatch_size": 7,
                "num_sgd_iter": 1,
                "model": {"fcnet_hiddens": [8]},
                "seed": 0,
            },
            env=CountingEnv,
        )
        try:
            policy = trainer.get_policy()
            original = policy.postprocess_trajectory

            def capture(batch, original=original):
                captured.append({k: v.copy() for k, v in batch.items()})
                return original(batch)

            policy.postprocess_trajectory = capture
            trainer.train()
        finally:
            trainer.stop()
        assert len(captured) == 1, "the sampler did not postprocess through policy.postprocess_trajectory"
        batch = captured.pop()
        # obs = [t]; episodes of 3 steps: t = 0 1 2 | 0 1 2 | 0
        np.testing.assert_array_equal(batch[OBS][:, 0, 0], [0, 1, 2, 0, 1, 2, 0])
        np.testing.assert_array_equal(batch[NEW_OBS][:, 0, 0], [1, 2, 3, 1, 2, 3, 1])
        ends = np.array([False, False, True, False, False, True, False])
        never = np.zeros_like(ends)
        np.testing.assert_array_equal(batch[TRUNCATEDS][:, 0], ends if truncate else never)
        np.testing.assert_array_equal(batch[TERMINATEDS][:, 0], never if truncate else ends)
