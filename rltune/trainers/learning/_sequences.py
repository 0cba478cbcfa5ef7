"""Sequences of a recurrent policy's batches: chopping time-major fragments, padding them for the model.

A recurrent policy's sampler records, per step, the state the policy acted
from (``state_in_0 .. state_in_k``) and the state after the step
(``state_out_0 .. state_out_k``; RLlib's column names). Its postprocessing
(:func:`chop_into_sequences`) flattens each env's column in time order
(env-major, never step-major: an env's steps stay contiguous) and cuts it
into sequences of at most ``max_seq_len`` steps, at every episode boundary
too; ``seq_starts`` marks each sequence's first row. The batch stays flat,
one row per step (so counting, concatenation and the keep masks are those
of stateless batches); the learner pads it (:func:`pad_sequences`) into
``[S, L]`` sequences with ``seq_lens``, a mask over the padding and the
state at each sequence's start.
"""

from __future__ import annotations

import numpy as np

from rltune.trainers.sampling._sample_batch import TERMINATEDS, TRUNCATEDS, SampleBatch

SEQ_STARTS = "seq_starts"
STATE_IN = "state_in_"
STATE_OUT = "state_out_"


def state_columns(batch: SampleBatch, prefix: str = STATE_IN) -> list[str]:
    """The batch's state columns of ``prefix`` in order (``state_in_0``, ``state_in_1``, ...)."""
    names = [name for name in batch if name.startswith(prefix) and name[len(prefix):].isdigit()]
    return sorted(names, key=lambda name: int(name[len(prefix):]))


def sequence_starts(terminateds: np.ndarray, truncateds: np.ndarray, max_seq_len: int) -> np.ndarray:
    """``[T, K]`` flags of the rows that start a sequence: a column's first row, an episode's first, every ``max_seq_len``-th within one."""
    done = terminateds | truncateds
    steps = done.shape[0]
    starts = np.zeros(done.shape, dtype=bool)
    starts[0] = True
    starts[1:] = done[:-1]
    # Each row's episode start (the last start flag at or before it), then the row's step within its episode.
    rows = np.arange(steps).reshape((steps,) + (1,) * (done.ndim - 1))
    first = np.maximum.accumulate(np.where(starts, rows, 0), axis=0)
    return (rows - first) % max_seq_len == 0


def chop_into_sequences(batch: SampleBatch, max_seq_len: int) -> SampleBatch:
    """A time-major ``[T, K]`` batch as flat rows, each column's steps contiguous, cut into sequences (``seq_starts``).

    The ``state_out_*`` columns (needed only for value bootstraps) are left out.
    """
    starts = sequence_starts(batch[TERMINATEDS], batch[TRUNCATEDS], max_seq_len)
    out = {name: env_major(column) for name, column in batch.items() if not name.startswith(STATE_OUT)}
    out[SEQ_STARTS] = env_major(starts)
    return out


def env_major(column: np.ndarray) -> np.ndarray:
    """``[T, K, ...]`` to ``[K*T, ...]``: column after column, each in time order."""
    return np.ascontiguousarray(np.swapaxes(column, 0, 1)).reshape((-1,) + column.shape[2:])


def pad_sequences(
    columns: SampleBatch, starts: np.ndarray
) -> tuple[SampleBatch, np.ndarray, np.ndarray, np.ndarray]:
    """Flat rows cut at ``starts`` as zero-padded ``[S, L, ...]`` columns (L: the longest sequence).

    Returns the padded columns, ``seq_lens`` ``[S]``, the mask ``[S, L]``
    (True on real steps) and the index of each sequence's first row (where
    its ``state_in_*`` is read).
    """
    first = np.flatnonzero(starts)
    if not len(first) or first[0] != 0:
        raise ValueError("a sequence batch must start with a sequence start (seq_starts[0] True)")
    seq_lens = np.diff(np.append(first, len(starts)))
    width = int(seq_lens.max())
    mask = np.arange(width)[None, :] < seq_lens[:, None]
    take = np.where(mask, first[:, None] + np.arange(width)[None, :], 0)
    padded = {}
    for name, column in columns.items():
        values = column[take]
        values[~mask] = 0
        padded[name] = values
    return padded, seq_lens, mask, first
