"""A recurrent policy's batches: each env's steps contiguous, cut into sequences at max_seq_len and at episode ends, padded with a mask."""

from __future__ import annotations

import numpy as np
import pytest

from rltune.trainers import Fragment
from rltune.trainers._config import ModelConfig
from rltune.trainers.algorithms._postprocess import postprocess_stacked
from rltune.trainers.learning._sequences import SEQ_STARTS, chop_into_sequences, pad_sequences, sequence_starts


def _flags(steps: int, width: int, ends: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    terminateds = np.zeros((steps, width), bool)
    for t, k in ends:
        terminateds[t, k] = True
    return terminateds, np.zeros_like(terminateds)


def test_sequences_start_at_column_starts_episode_starts_and_every_max_seq_len_steps():
    terminateds, truncateds = _flags(8, 2, [(2, 0)])  # column 0: an episode ends at row 2
    starts = sequence_starts(terminateds, truncateds, max_seq_len=3)
    assert np.flatnonzero(starts[:, 0]).tolist() == [0, 3, 6]  # 0-2 (episode), 3-5, 6-7
    assert np.flatnonzero(starts[:, 1]).tolist() == [0, 3, 6]
    terminateds, truncateds = _flags(8, 1, [(3, 0)])
    truncateds[4, 0] = True  # a one-step episode
    assert np.flatnonzero(sequence_starts(terminateds, truncateds, 3)[:, 0]).tolist() == [0, 3, 4, 5]


def test_chopping_keeps_each_envs_steps_contiguous_and_drops_state_out():
    steps, width = 5, 2
    obs = np.arange(steps * width, dtype=np.float32).reshape(steps, width)  # obs[t, k] = 2t + k
    terminateds, truncateds = _flags(steps, width, [(1, 1)])
    batch = {"obs": obs, "terminateds": terminateds, "truncateds": truncateds,
             "state_in_0": obs[..., None] * 10, "state_out_0": obs[..., None]}
    flat = chop_into_sequences(batch, max_seq_len=4)
    assert flat["obs"].tolist() == [0, 2, 4, 6, 8, 1, 3, 5, 7, 9]  # env 0's steps, then env 1's
    assert flat[SEQ_STARTS].tolist() == [1, 0, 0, 0, 1, 1, 0, 1, 0, 0]
    assert "state_out_0" not in flat and flat["state_in_0"][:, 0].tolist() == (flat["obs"] * 10).tolist()


def test_padding_gives_seq_lens_a_mask_and_each_sequences_first_row():
    starts = np.array([1, 0, 0, 1, 1, 0], bool)
    columns = {"obs": np.arange(1, 7, dtype=np.float32)[:, None], "actions": np.arange(1, 7)}
    padded, seq_lens, mask, first = pad_sequences(columns, starts)
    assert seq_lens.tolist() == [3, 1, 2] and first.tolist() == [0, 3, 4]
    assert mask.tolist() == [[True, True, True], [True, False, False], [True, True, False]]
    assert padded["actions"].tolist() == [[1, 2, 3], [4, 0, 0], [5, 6, 0]]  # zero padding
    assert padded["obs"].shape == (3, 3, 1)
    with pytest.raises(ValueError, match="seq_starts"):
        pad_sequences(columns, np.array([0, 1, 0, 0, 0, 0], bool))


def test_max_seq_len_is_a_model_key_with_rllibs_default():
    assert ModelConfig().max_seq_len == 20
    with pytest.raises(ValueError):
        ModelConfig(max_seq_len=0)


class _ChoppingPolicy:
    """The part of a recurrent policy postprocess_stacked uses: its postprocessing chops into sequences."""

    def postprocess_trajectory(self, batch):
        return chop_into_sequences(batch, max_seq_len=2)


def test_the_rows_left_out_of_a_recurrent_batch_are_those_of_their_env():
    steps, width = 3, 2
    obs = np.arange(steps * width, dtype=np.float32).reshape(steps, width)
    terminateds, truncateds = _flags(steps, width, [(0, 0)])
    keep = np.ones((steps, width), bool)
    keep[0, 0] = False  # env 0's first episode (one step) was dropped
    fragment = Fragment("default_policy", {"obs": obs, "terminateds": terminateds, "truncateds": truncateds}, keep)
    flat = postprocess_stacked(_ChoppingPolicy(), [fragment])
    assert flat["obs"].tolist() == [2, 4, 1, 3, 5]
    assert flat[SEQ_STARTS].tolist() == [1, 0, 1, 0, 1]
