"""Sample batches: plain dicts of numpy arrays with the column names below.

A worker's sampler fills time-major ``[T, N, ...]`` columns (T steps of N
envs) and hands them over raw, as fragments (:mod:`._fragment`);
the algorithm's postprocessing (GAE, n-step returns) works on that layout
and returns flat ``[T*N, ...]`` columns that batches are concatenated in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

OBS = "obs"
ACTIONS = "actions"
REWARDS = "rewards"
NEW_OBS = "new_obs"
TERMINATEDS = "terminateds"
TRUNCATEDS = "truncateds"
ACTION_LOGP = "action_logp"
VF_PREDS = "vf_preds"
ADVANTAGES = "advantages"
VALUE_TARGETS = "value_targets"

SampleBatch = dict[str, np.ndarray]


def flatten_time_major(batch: SampleBatch) -> SampleBatch:
    """``[T, N, ...]`` columns to ``[T*N, ...]`` (env-major inside each step)."""
    return {k: v.reshape((-1,) + v.shape[2:]) for k, v in batch.items()}


def concat_batches(batches: list[SampleBatch]) -> SampleBatch:
    """Concatenate flat batches with the same columns."""
    if len(batches) == 1:
        return batches[0]
    return {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}


def batch_size(batch: SampleBatch) -> int:
    """Rows in a flat batch."""
    return len(next(iter(batch.values()))) if batch else 0


@dataclass
class EpisodeMetrics:
    """Summary of one finished episode, sent from the worker that ran it."""

    episode_reward: float
    episode_length: int
    worker_index: int = 0
    vector_index: int = 0
    custom_metrics: dict[str, float] = field(default_factory=dict)
    hist_data: dict[str, list[float]] = field(default_factory=dict)
    # Multi-agent episodes: (agent_id, policy_id, that agent's return) for every agent that got a reward.
    agent_rewards: list[tuple[Any, str, float]] = field(default_factory=list)


@dataclass
class SampleResult:
    """What one ``sample()`` returns: raw fragments (or ready batches) by policy id, and the episodes that ended.

    ``fragments``: the raw steps, which the algorithm postprocesses with its
    learner's policies; ``batches``: flat batches already postprocessed
    (a source that prepares its own), by policy id.
    """

    batches: dict[str, SampleBatch] = field(default_factory=dict)
    fragments: list[Any] = field(default_factory=list)  # Fragment (see _fragment.py)
    episodes: list[EpisodeMetrics] = field(default_factory=list)
    env_steps: int = 0
    agent_steps: int = 0  # actions computed (single-agent: = env_steps)
    num_env_restarts: int = 0  # envs rebuilt after raising (restart_failed_sub_environments) since the last sample
    num_dropped_episodes: int = 0  # episodes dropped for a non-finite reward or observation (nan_policy) since the last sample
    # A rollout worker process's observation-filter statistics since its last sample, by policy id; the
    # WorkerSet merges them into the trainer's master filters as each reply arrives (merge() drops them).
    filter_deltas: dict[str, Any] = field(default_factory=dict)

    @staticmethod
    def merge(results: list["SampleResult"]) -> "SampleResult":
        """One result holding the fragments, batches and episodes of several."""
        merged = SampleResult()
        policy_ids = {pid for r in results for pid in r.batches}
        for pid in sorted(policy_ids):
            merged.batches[pid] = concat_batches([r.batches[pid] for r in results if pid in r.batches])
        for r in results:
            merged.fragments.extend(r.fragments)
            merged.episodes.extend(r.episodes)
            merged.env_steps += r.env_steps
            merged.agent_steps += r.agent_steps or r.env_steps
            merged.num_env_restarts += r.num_env_restarts
            merged.num_dropped_episodes += r.num_dropped_episodes
        return merged
