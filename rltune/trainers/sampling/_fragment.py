"""Fragment: the raw steps a sample source hands over, before any learning-side postprocessing.

A :class:`Fragment` holds one policy's steps as time-major columns ``[T, K, ...]``:
K per-agent episode fragments of T steps side by side (a rollout worker's
N envs of one single-agent fragment are K = N columns; one recorded episode
is K = 1). Several agent trajectories may sit end to end in one column, each
ending with a done flag; ``keep`` marks the rows that go on to learning
(False for padding and for the rows of an episode dropped by ``nan_policy``).

Columns (names in :mod:`._sample_batch`): ``obs``, ``actions``, ``rewards``,
``new_obs`` (the observation each step reached; the final one where an
episode ended), ``terminateds``, ``truncateds``, ``infos`` (object array of
the env's info dicts, optional) and what the acting policy computed:
``action_logp``, ``vf_preds``, ``action_dist_inputs`` (each optional; an
algorithm fills a missing one from its learner's policy where it can).
A column's last row that is not done is a fragment end: the episode goes on
and learning bootstraps from its ``new_obs``.

The Algorithm postprocesses fragments (value bootstraps, GAE, n-step
returns) with its learner's policies, batched: fragments of one policy
become one ``[T, K]`` batch and one ``postprocess_trajectory`` call.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Optional, Sequence

import numpy as np

from rltune.trainers.sampling._agent_transitions import INFOS, pack_trajectories
from rltune.trainers.sampling._sample_batch import ACTIONS, NEW_OBS, OBS, REWARDS, TERMINATEDS, TRUNCATEDS, SampleBatch

ACTION_DIST_INPUTS = "action_dist_inputs"

# A trajectory's place: (worker index, env index, episode number in that env, agent id).
AgentKey = tuple[int, int, int, Any]


@dataclass
class Fragment:
    """One policy's raw steps: K episode fragments of T steps as time-major ``[T, K, ...]`` columns.

    ``agents`` (per column, when each column is one agent's trajectory) and
    ``episodes`` (the episode object of each, for ``on_postprocess_trajectory``)
    let an algorithm postprocess trajectory by trajectory with the other agents'
    batches of the same episode (a centralized critic). ``state_in`` is the
    recurrent state at the fragment's start (None: the policy is stateless).
    """

    policy_id: str
    columns: SampleBatch
    keep: Optional[np.ndarray] = None
    agents: Optional[list[AgentKey]] = None
    episodes: Optional[list[Any]] = None
    state_in: Any = None

    @property
    def shape(self) -> tuple[int, int]:
        """(T, K): steps and columns."""
        return self.columns[REWARDS].shape[:2]

    @property
    def num_rows(self) -> int:
        """Rows that go on to learning."""
        return int(self.keep.sum()) if self.keep is not None else int(np.prod(self.shape))

    @classmethod
    def from_episode(
        cls,
        policy_id: str,
        observations: Sequence[Any],
        actions: Sequence[Any],
        rewards: Sequence[float],
        *,
        terminated: bool = False,
        truncated: bool = False,
        infos: Optional[Sequence[dict[str, Any]]] = None,
        **extras: Sequence[Any],
    ) -> "Fragment":
        """One agent's steps: ``observations`` has one more entry than ``actions`` (the observation the last step reached).

        ``terminated`` / ``truncated``: how the episode ended at the last step;
        neither: it goes on (a fragment of a running episode). ``extras``: the
        acting policy's columns (``action_logp``, ``vf_preds``...), one per step.
        Observations are taken as the policy's preprocessed (flat float) ones.
        """
        steps = len(actions)
        obs = np.asarray(observations, dtype=np.float32)
        if len(obs) != steps + 1 or len(rewards) != steps:
            raise ValueError(f"an episode of {steps} actions needs {steps + 1} observations and {steps} rewards, "
                             f"but got {len(obs)} and {len(rewards)}")
        terminateds = np.zeros(steps, dtype=bool)
        truncateds = np.zeros(steps, dtype=bool)
        if steps:
            terminateds[-1], truncateds[-1] = bool(terminated), bool(truncated and not terminated)
        columns = {OBS: obs[:-1], ACTIONS: np.asarray(actions), REWARDS: np.asarray(rewards, dtype=np.float32),
                   NEW_OBS: obs[1:], TERMINATEDS: terminateds, TRUNCATEDS: truncateds}
        if infos is not None:
            columns[INFOS] = object_column(list(infos))
        for name, values in extras.items():
            columns[name] = np.asarray(values, dtype=np.float32)
        return cls(policy_id, {name: column[:, None] for name, column in columns.items()})


def object_column(values: list[Any]) -> np.ndarray:
    """A 1-d object array of these values (dicts stay whole)."""
    return np.fromiter(values, dtype=object, count=len(values))


def info_column(rows: list[list[Any]], width: int) -> np.ndarray:
    """Per-step lists of ``width`` info dicts as a ``[T, width]`` object array."""
    # fromiter: no look into each dict for a sequence, as an assignment of lists would take
    return np.fromiter(itertools.chain.from_iterable(rows), dtype=object, count=len(rows) * width).reshape(len(rows), width)


def pack_rows(flat: SampleBatch, lengths: list[int]) -> tuple[SampleBatch, np.ndarray]:
    """Trajectories (flat rows, one after another, each ending done or cut) as ``[T, K]`` columns and their keep mask.

    Padding rows are terminated with zero reward (so no recursion crosses
    them and they need no value); ``keep`` is False there.
    """
    slots, _ = pack_trajectories(lengths)
    pad = slots < 0
    take = np.where(pad, 0, slots)
    batch = {name: column[take] for name, column in flat.items()}
    batch[REWARDS] = np.where(pad, 0.0, batch[REWARDS]).astype(np.float32)
    batch[TERMINATEDS] = batch[TERMINATEDS] | pad
    batch[TRUNCATEDS] = batch[TRUNCATEDS] & ~pad
    return batch, ~pad


def stack_fragments(fragments: list[Fragment]) -> tuple[SampleBatch, Optional[np.ndarray]]:
    """Fragments of one policy as one ``[T, K]`` batch (side by side) and its keep mask (None: every row).

    Fragments of one length are joined as they are; of several, every
    column's last row that is not done is marked truncated (a fragment end
    bootstraps from its next observation, as at the batch's last row) and
    shorter ones are padded at their end.
    """
    if len(fragments) == 1:
        return fragments[0].columns, fragments[0].keep
    names = [name for name in fragments[0].columns if all(name in f.columns for f in fragments)]
    height = max(f.shape[0] for f in fragments)
    if all(f.shape[0] == height for f in fragments):
        batch = {name: np.concatenate([f.columns[name] for f in fragments], axis=1) for name in names}
        if all(f.keep is None for f in fragments):
            return batch, None
        return batch, np.concatenate([f.keep if f.keep is not None else np.ones(f.shape, bool) for f in fragments], axis=1)
    padded = [_padded(f, height, names) for f in fragments]
    batch = {name: np.concatenate([p[0][name] for p in padded], axis=1) for name in names}
    return batch, np.concatenate([p[1] for p in padded], axis=1)


def _padded(fragment: Fragment, height: int, names: list[str]) -> tuple[SampleBatch, np.ndarray]:
    steps, width = fragment.shape
    keep = fragment.keep if fragment.keep is not None else np.ones((steps, width), bool)
    columns = {name: fragment.columns[name] for name in names}
    cut = ~(columns[TERMINATEDS][-1] | columns[TRUNCATEDS][-1])
    if cut.any():
        columns[TRUNCATEDS] = columns[TRUNCATEDS].copy()
        columns[TRUNCATEDS][-1] |= cut
    extra = height - steps
    if not extra:
        return columns, keep
    out = {}
    for name, column in columns.items():
        pad = np.zeros((extra,) + column.shape[1:], dtype=column.dtype)
        if name == TERMINATEDS:
            pad[:] = True
        elif column.dtype == object:
            pad[:] = None
        else:
            pad[:] = column[-1:]  # a copy of the last row: finite, shaped like the others
            if name == REWARDS:
                pad[:] = 0.0
            elif name == TRUNCATEDS:
                pad[:] = False
        out[name] = np.concatenate([column, pad])
    return out, np.concatenate([keep, np.zeros((extra, width), bool)])
