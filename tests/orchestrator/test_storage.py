"""The storage layer: shared or embedded, and calls that ride out a database restart."""

from __future__ import annotations

import pytest
from sqlalchemy.exc import IntegrityError, OperationalError

from rltune.orchestrator._storage import (
    StorageLostError,
    default_grace_s,
    is_shared,
    lost_connection,
    open_storage,
    with_reconnect,
)


def _lost() -> OperationalError:
    return OperationalError("SELECT 1", {}, Exception("server closed the connection unexpectedly"))


def test_only_urls_with_a_scheme_are_shared_storages(tmp_path):
    assert is_shared("postgresql://u:p@host/db") and is_shared("sqlite:///x.db")
    assert not is_shared(None) and not is_shared("") and not is_shared(str(tmp_path / "study.journal"))


def test_a_call_is_retried_while_the_connection_is_lost_then_succeeds(monkeypatch):
    monkeypatch.setattr("time.sleep", lambda s: None)
    attempts = []

    def flaky(x):
        attempts.append(x)
        if len(attempts) < 3:
            import optuna

            # as Optuna's RDBStorage raises it: the SQLAlchemy error is the cause
            raise optuna.exceptions.StorageInternalError("an error occurred") from _lost()
        return x * 2

    assert with_reconnect(flaky, "flaky", retry_s=60)(21) == 42
    assert attempts == [21, 21, 21]


def test_the_wait_says_what_waits_why_in_the_drivers_words_and_when_it_ends(monkeypatch, caplog):
    import optuna

    monkeypatch.setattr("time.sleep", lambda s: None)
    attempts = []

    def flaky():
        attempts.append(1)
        if len(attempts) < 3:  # Optuna's own words say nothing of the connection
            raise optuna.exceptions.StorageInternalError(
                "An exception is raised during the commit. This typically happens due to invalid data in the commit, "
                "e.g. exceeding max length.") from _lost()
        return "ok"

    with caplog.at_level("WARNING", logger="rltune.orchestrator._storage"):
        assert with_reconnect(flaky, "RDBStorage.record_heartbeat", retry_s=60)() == "ok"
    first, last = [r.getMessage() for r in caplog.records]
    assert first == ("the study's database is unreachable (Exception: server closed the connection unexpectedly); "
                     "retrying RDBStorage.record_heartbeat for up to 60 s")
    assert last.startswith("the study's database is back: RDBStorage.record_heartbeat went through after ")


def test_other_errors_are_not_retried():
    calls = []

    def broken():
        calls.append(1)
        raise IntegrityError("INSERT", {}, Exception("duplicate key"))

    with pytest.raises(IntegrityError):
        with_reconnect(broken, "broken")()
    assert calls == [1]
    assert not lost_connection(ValueError("no"))


def test_a_database_away_longer_than_the_window_is_a_clear_error(monkeypatch):
    clock = iter(range(0, 1000, 10))
    monkeypatch.setattr("time.monotonic", lambda: float(next(clock)))
    monkeypatch.setattr("time.sleep", lambda s: None)

    def down():
        raise _lost()

    with pytest.raises(StorageLostError, match="unreachable for 30 s .*resumable"):
        with_reconnect(down, "the heartbeat", retry_s=30)()


def test_the_default_grace_outlasts_the_reconnect_window():
    for interval in (1, 10, 30, 120):
        assert default_grace_s(interval) >= 2 * interval + 60
        assert default_grace_s(interval) >= 4 * interval


def test_an_rdb_storage_has_heartbeats_and_retries_stale_trials(tmp_path):
    import optuna

    storage = open_storage(f"sqlite:///{tmp_path}/s.db", tmp_path, heartbeat_interval_s=5)
    assert isinstance(storage, optuna.storages.RDBStorage)
    assert storage.get_heartbeat_interval() == 5
    assert storage.grace_period == default_grace_s(5)
    assert storage.get_heartbeat_stale_trial_callback() is not None
    journal = open_storage(None, tmp_path)
    assert isinstance(journal, optuna.storages.JournalStorage)
