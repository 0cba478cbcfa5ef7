"""Return and advantage estimation on time-major ``[T, N]`` arrays (pure numpy, tested by hand)."""

from __future__ import annotations

import numpy as np


def compute_gae(
    rewards: np.ndarray,
    values: np.ndarray,
    next_values: np.ndarray,
    terminateds: np.ndarray,
    truncateds: np.ndarray,
    gamma: float,
    lambda_: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Generalized advantage estimates and value targets.

    ``next_values[t]`` is V of the observation reached by step ``t`` (the
    final observation when the episode ended there). A terminated step
    bootstraps nothing; a truncated step bootstraps from V(final obs), since
    the episode was cut, not finished. The recursion never crosses an
    episode end. Returns ``(advantages, value_targets)``.
    """
    not_terminated = 1.0 - terminateds.astype(np.float32)
    continues = 1.0 - (terminateds | truncateds).astype(np.float32)
    deltas = rewards + gamma * next_values * not_terminated - values
    advantages = np.empty_like(deltas, dtype=np.float32)
    running = np.zeros(deltas.shape[1:], dtype=np.float32)
    for t in range(deltas.shape[0] - 1, -1, -1):
        running = deltas[t] + gamma * lambda_ * continues[t] * running
        advantages[t] = running
    return advantages, (advantages + values).astype(np.float32)


def compute_n_step(
    rewards: np.ndarray,
    terminateds: np.ndarray,
    truncateds: np.ndarray,
    n_step: int,
    gamma: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """n-step returns for every step of ``[T, N]`` arrays, stopping at episode ends and the fragment end.

    Returns ``(returns, offsets, discounts)``: for step ``t`` the transition
    is ``(obs[t], a[t], returns[t], new_obs[t + offsets[t]], terminated[t + offsets[t]])``
    and the bootstrap term is ``discounts[t] * max_a Q(new_obs[...])`` (``gamma**k``
    for the k steps summed).
    """
    steps, envs = rewards.shape
    returns = np.zeros((steps, envs), dtype=np.float32)
    offsets = np.zeros((steps, envs), dtype=np.int64)
    discounts = np.zeros((steps, envs), dtype=np.float32)
    done = terminateds | truncateds
    for t in range(steps):
        acc = np.zeros(envs, dtype=np.float32)
        alive = np.ones(envs, dtype=bool)
        for k in range(n_step):
            if t + k >= steps:
                break
            acc += alive * (gamma**k) * rewards[t + k]
            offsets[t] = np.where(alive, k, offsets[t])
            discounts[t] = np.where(alive, gamma ** (k + 1), discounts[t])
            alive &= ~done[t + k]
        returns[t] = acc
    return returns, offsets, discounts
