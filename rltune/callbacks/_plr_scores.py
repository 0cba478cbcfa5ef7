"""Prioritized Level Replay's per-step scores of a sampled fragment: GAE advantages from the acting policy's values.

A rollout worker's :class:`~rltune.callbacks._auto_curriculum.TaskPicker`
calls :func:`fragment_scores` once per fragment it samples (PLR only).
"""

from __future__ import annotations

from typing import Any

import numpy as np


def fragment_scores(fragment: Any, row_tasks: np.ndarray, num_tasks: int, score: str, gamma: float,
                    lam: float) -> tuple[np.ndarray, np.ndarray]:
    """PLR's per-step scores of a fragment summed by task (``row_tasks``: each row's task index, -1 for none).

    GAE over the fragment's ``[T, K]`` columns with the acting policy's
    ``vf_preds`` (a fragment's last step and a truncated one bootstrap from
    their own value: the next one is not in the fragment); the score is
    max(advantage, 0) (``positive_value_loss``) or |advantage| (``value_l1``).
    Returns (sums, rows) by task index.
    """
    columns = fragment.columns
    rewards = np.asarray(columns["rewards"], dtype=np.float64)
    values = np.asarray(columns["vf_preds"], dtype=np.float64).reshape(rewards.shape)
    terminated = np.asarray(columns["terminateds"], dtype=bool)
    done = terminated | np.asarray(columns["truncateds"], dtype=bool)
    next_values = np.where(done, values, np.concatenate([values[1:], values[-1:]]))
    deltas = rewards + gamma * np.where(terminated, 0.0, next_values) - values
    advantages = discounted_sums(deltas, np.where(done, 0.0, gamma * lam))
    step_scores = np.maximum(advantages, 0.0) if score == "positive_value_loss" else np.abs(advantages)
    keep = np.ones(done.shape, dtype=bool) if fragment.keep is None else np.asarray(fragment.keep, dtype=bool)
    ok = keep & (row_tasks >= 0) & (row_tasks < num_tasks)
    sums = np.bincount(row_tasks[ok], weights=step_scores[ok], minlength=num_tasks)
    rows = np.bincount(row_tasks[ok], minlength=num_tasks)
    return sums, rows


def discounted_sums(values: np.ndarray, carry: np.ndarray) -> np.ndarray:
    """``out[t] = values[t] + carry[t] * out[t + 1]`` down each column of ``[T, K]`` arrays (``out[T] = 0``).

    GAE's backward pass with ``carry = gamma * lambda`` (0 where an episode
    ends, so nothing flows back across it). A scan in log2(T) array steps
    instead of T: after the step of span ``s``, ``out[t] = b[t] + a[t] *
    out[t + s]``, and two such spans compose into one of ``2 s``. No
    subtraction, so no cancellation (a whole-column filter minus its tail
    would lose precision with long columns).
    """
    b = np.array(values, dtype=np.float64)
    a = np.array(carry, dtype=np.float64)
    span = 1
    while span < len(b):
        b[:-span] += a[:-span] * b[span:]
        a[:-span] *= a[span:]
        a[-span:] = 0.0  # out[t + span] is past the column's end: 0
        span *= 2
    return b
