"""Which checkpoints a trial's run keeps: the N latest and the best, as a pure function."""

from __future__ import annotations

from rltune.tracking._retention import best_checkpoint, checkpoints_to_drop

CHECKPOINTS = [("c1", 5.0), ("c2", 1.0), ("c3", 4.0), ("c4", None), ("c5", float("nan")), ("c6", 3.0)]


def test_keep_the_latest_n_and_the_best():
    assert checkpoints_to_drop(CHECKPOINTS, 2, "max") == ["c2", "c3", "c4"]
    assert checkpoints_to_drop(CHECKPOINTS, 2, "min") == ["c1", "c3", "c4"]


def test_keep_none_or_more_than_there_are_drops_nothing():
    assert checkpoints_to_drop(CHECKPOINTS, None, "max") == []
    assert checkpoints_to_drop(CHECKPOINTS, 0, "max") == []
    assert checkpoints_to_drop(CHECKPOINTS, 6, "max") == []


def test_the_best_needs_a_finite_score():
    assert best_checkpoint(CHECKPOINTS, "max") == "c1" and best_checkpoint(CHECKPOINTS, "min") == "c2"
    assert best_checkpoint([("a", None), ("b", float("nan"))], "max") is None
    assert checkpoints_to_drop([("a", None), ("b", None), ("c", None)], 1, "max") == ["a", "b"]
