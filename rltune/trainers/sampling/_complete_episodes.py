"""``batch_mode: complete_episodes``: a worker's sample holds whole episodes only (RLlib's semantics).

Every env of a worker steps as in ``truncate_episodes``; the steps of an
episode still running when a fragment ends wait in an :class:`EpisodeBuffer`
(across ``sample()`` calls) until the episode ends. A ``sample()`` returns
once the episodes that ended hold at least ``rollout_fragment_length x
num_envs`` env steps, so its batch is at least that large and never cuts an
episode; the algorithm's postprocessing (GAE, n-step returns) sees each episode whole, up
to its real end (terminated, or truncated by the env). The buffered steps
were sampled with the weights of their time: with many envs per worker a
batch holds some off-policy steps, as in RLlib.

The buffer keys a trajectory by ``(env index, episode number in that env,
agent id)`` (:data:`~rltune.trainers.sampling._agent_transitions.TrajectoryKey`; the
agent id is None for a single-agent env); pieces of one trajectory arrive in
time order.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from rltune.trainers.sampling._agent_transitions import TrajectoryKey
from rltune.trainers.sampling._sample_batch import REWARDS, TERMINATEDS, TRUNCATEDS, SampleBatch

# A policy's trajectories ready for postprocessing: flat rows trajectory after trajectory, their keys, lengths.
Trajectories = tuple[SampleBatch, list[TrajectoryKey], list[int]]


class EpisodeBuffer:
    """Pieces of the trajectories of running episodes, and the trajectories of ended ones, by policy id."""

    def __init__(self) -> None:
        self._pending: dict[TrajectoryKey, tuple[str, list[SampleBatch]]] = {}
        self._ready: dict[str, list[tuple[TrajectoryKey, SampleBatch]]] = {}
        # (env index, episode number) -> its episode object, kept by the sampler while the episode's trajectories may wait
        self.episodes: dict[tuple[int, int], Any] = {}
        self.ready_rows = 0

    def add(self, policy_id: str, key: TrajectoryKey, piece: SampleBatch, *, ended: bool) -> None:
        """The next piece (flat rows in time order) of a trajectory; ``ended``: its episode is over."""
        _, pieces = self._pending.pop(key, (policy_id, []))
        pieces.append(piece)
        if not ended:
            self._pending[key] = (policy_id, pieces)
            return
        whole = _join(pieces)
        self._ready.setdefault(policy_id, []).append((key, whole))
        self.ready_rows += len(whole[REWARDS])

    def end_episodes(self, ended: Any) -> None:
        """Move the pending trajectories whose episode ``ended((env index, number))`` says is over to the ready ones."""
        for key in [k for k in self._pending if ended(k[:2])]:
            policy_id, pieces = self._pending.pop(key)
            self.add(policy_id, key, _join(pieces), ended=True)

    def discard_episode(self, env_index: int, number: int) -> None:
        """Forget the pending pieces of every trajectory of episode ``number`` of env ``env_index`` (dropped: nan_policy)."""
        for key in [k for k in self._pending if k[:2] == (env_index, number)]:
            del self._pending[key]
        self.episodes.pop((env_index, number), None)

    def take(self, policy_ids: set[str] | None = None) -> dict[str, Trajectories]:
        """The ready trajectories of ``policy_ids`` (all if None), in the order they ended; the buffer forgets them."""
        out: dict[str, Trajectories] = {}
        for pid, items in self._ready.items():
            if policy_ids is not None and pid not in policy_ids:
                continue
            keys = [key for key, _ in items]
            batches = [batch for _, batch in items]
            flat = {name: np.concatenate([b[name] for b in batches]) for name in batches[0]}
            out[pid] = (flat, keys, [len(b[REWARDS]) for b in batches])
        self._ready = {}
        self.ready_rows = 0
        return out

    def clear(self) -> None:
        """Forget everything (the envs were reset: their running episodes will never end)."""
        self._pending.clear()
        self._ready.clear()
        self.episodes.clear()
        self.ready_rows = 0


def _join(pieces: list[SampleBatch]) -> SampleBatch:
    """Pieces of one trajectory as one batch; a piece's end that the fragment cut is no end (its flags cleared)."""
    if len(pieces) == 1:
        return pieces[0]
    joined = {name: np.concatenate([p[name] for p in pieces]) for name in pieces[0]}
    cuts = np.cumsum([len(p[REWARDS]) for p in pieces[:-1]]) - 1
    joined[TRUNCATEDS][cuts] = False  # a trajectory that goes on was cut here, not truncated
    return joined


def chunk_steps(target_rows: int, ready_rows: int, num_envs: int, num_steps: int) -> int:
    """Steps per env of the next fragment: at most ``num_steps``, no more than would fill the target if all ended."""
    return max(1, min(num_steps, math.ceil((target_rows - ready_rows) / num_envs)))


def split_env_columns(batch: SampleBatch, numbers: list[int]) -> list[tuple[int, int, SampleBatch, bool]]:
    """A single-agent ``[T, N]`` fragment as trajectory pieces: ``(env index, episode number, piece, ended)``.

    ``numbers[i]`` is the number of env ``i``'s running episode; it counts up
    at each episode end found (the list is updated in place).
    """
    done = batch[TERMINATEDS] | batch[TRUNCATEDS]
    pieces = []
    for i in range(done.shape[1]):
        start = 0
        for t in np.flatnonzero(done[:, i]):
            pieces.append((i, numbers[i], {k: v[start:t + 1, i] for k, v in batch.items()}, True))
            numbers[i] += 1
            start = t + 1
        if start < done.shape[0]:
            pieces.append((i, numbers[i], {k: v[start:, i] for k, v in batch.items()}, False))
    return pieces
