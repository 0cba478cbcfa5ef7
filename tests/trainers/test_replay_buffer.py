"""The replay buffer: ring overwrite order, uniform sampling, state round trip."""

from __future__ import annotations

import numpy as np

from rltune.trainers.algorithms._replay_buffer import ReplayBuffer


def _rows(start: int, n: int) -> dict[str, np.ndarray]:
    ids = np.arange(start, start + n)
    return {"id": ids, "obs": np.stack([ids, -ids], axis=1).astype(np.float32)}


def test_overwrites_the_oldest_rows_first():
    buffer = ReplayBuffer(5)
    buffer.add(_rows(0, 3))
    buffer.add(_rows(3, 4))  # 7 rows into 5 slots: 0 and 1 are gone
    assert len(buffer) == 5
    assert buffer.get_state()["id"].tolist() == [2, 3, 4, 5, 6]


def test_a_batch_larger_than_capacity_keeps_its_newest_rows():
    buffer = ReplayBuffer(4)
    buffer.add(_rows(0, 10))
    assert buffer.get_state()["id"].tolist() == [6, 7, 8, 9]


def test_samples_only_stored_rows_and_keeps_columns_aligned():
    buffer = ReplayBuffer(100)
    buffer.add(_rows(10, 20))
    sample = buffer.sample(500, np.random.default_rng(0))
    assert set(sample["id"].tolist()) <= set(range(10, 30))
    assert len(set(sample["id"].tolist())) == 20  # 500 uniform draws over 20 rows hit them all
    np.testing.assert_array_equal(sample["obs"][:, 0], sample["id"])
    np.testing.assert_array_equal(sample["obs"][:, 1], -sample["id"])


def test_state_round_trip_keeps_order_and_next_write_position():
    buffer = ReplayBuffer(5)
    buffer.add(_rows(0, 7))
    copy = ReplayBuffer(5)
    copy.set_state(buffer.get_state())
    buffer.add(_rows(100, 2))
    copy.add(_rows(100, 2))
    assert copy.get_state()["id"].tolist() == buffer.get_state()["id"].tolist() == [4, 5, 6, 100, 101]
