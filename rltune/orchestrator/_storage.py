"""Where a study lives: Optuna's journal file (one machine) or an RDB such as PostgreSQL (many workers).

Two modes, chosen by the storage given:

- **embedded** (no ``storage``, or a journal file path): Optuna's
  JournalStorage file backend in the study directory. One orchestrator at a
  time; ``--resume`` continues a study; trials of a dead orchestrator on this
  machine are resumed in place (see ``owner_alive`` in ``_ownership``).
- **shared** (an Optuna URL: ``postgresql://...``, ``mysql://...``,
  ``sqlite:///...``): every ``rltune tune`` launched on it is a worker that
  joins the study. The worker that creates the study enqueues its whole
  budget as WAITING trials (grid points with their params, the rest empty,
  for the sampler to fill when a worker takes them), so workers take trials
  atomically (Optuna pops a WAITING trial with a row lock) and the study runs
  exactly its budget, grid points once. Each worker writes Optuna's
  heartbeat for its running trials; a trial whose heartbeat is older than
  the grace period (its worker was killed or its machine lost) is failed by
  whichever worker notices first (``optuna.storages.fail_stale_trials``) and
  Optuna's ``RetryFailedTrialCallback`` enqueues it again, with its params,
  user attrs (its latest checkpoint among them) and reported values, for
  any worker to resume from that checkpoint.

Connections: the RDB engine pings connections before use, and every
storage call that fails on a lost connection (a database restart) is retried
with back-off for ``STORAGE_RETRY_S`` before the worker gives up with a
clear error; the study stays resumable.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import time
import warnings
from pathlib import Path
from typing import Any, Callable

from rltune._disk import disk_error, ensure_dir, writing
from rltune._secrets import has_references, redact_text, resolve_url
from rltune.errors import RLTuneError
from rltune.orchestrator._optuna_compat import RDB_PRIVATE_CALLS

logger = logging.getLogger(__name__)

JOURNAL_FILE = "study.journal"
STORAGE_RETRY_S = 60.0  # how long a worker waits for its database to come back (< the heartbeat grace)
STALE_RETRIES = 3  # a trial whose worker was lost is retried at most this many times
BUDGET_ATTR = "rltune_budget"  # the study's trial budget; set once every trial of it is enqueued
STORAGE_DISK_HINT = ("; the running trials stop and the study is resumable: make room, then continue it with --resume "
                     "(tune.run(..., resume=True))")


class StorageLostError(RLTuneError):
    """The study's database stayed unreachable for longer than the worker waits; the study is resumable."""


def is_shared(url: str | None) -> bool:
    """Whether ``url`` names an RDB storage that several workers may share (an Optuna URL with a scheme).

    ``url`` may hold ``${NAME}`` references (see :mod:`rltune._secrets`), e.g. ``${RLTUNE_STORAGE_URL}``.
    """
    if has_references(url):
        try:
            url = resolve_url(url)
        except RLTuneError:
            return True  # a reference that does not resolve here: only a URL's password is ever given that way
    return bool(url) and "://" in str(url)


def default_grace_s(heartbeat_interval_s: int) -> int:
    """How long a trial may go without heartbeat before it is stale, by default.

    Longer than a database outage that workers ride out (:data:`STORAGE_RETRY_S`)
    plus two heartbeats: otherwise, when the database comes back, live
    workers' trials would look stale to each other.
    """
    return int(max(4 * heartbeat_interval_s, STORAGE_RETRY_S + 2 * heartbeat_interval_s))


def open_storage(url: str | None, study_dir: Path, *, heartbeat_interval_s: int | None = None,
                 grace_s: int | None = None) -> Any:
    """The Optuna storage: ``url`` (an RDB URL, or a journal file path), else ``<study_dir>/study.journal``.

    ``url`` is the resolved URL (:func:`rltune._secrets.resolve_url`); a
    PostgreSQL URL without password takes it from ``PGPASSWORD`` or ``~/.pgpass``
    (``PGPASSFILE``), as libpq does.

    For an RDB URL with ``heartbeat_interval_s``: Optuna's heartbeat, stale
    trials failed after ``grace_s`` and retried by :data:`STALE_RETRIES`.
    """
    if is_shared(url):
        import optuna
        from optuna import storages

        with warnings.catch_warnings():  # heartbeats and the retry callback are "experimental" in Optuna
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            heartbeat: dict[str, Any] = {}
            if heartbeat_interval_s:
                heartbeat = {"heartbeat_interval": int(heartbeat_interval_s),
                             "grace_period": int(grace_s or default_grace_s(heartbeat_interval_s))}
                if hasattr(storages, "RetryHeartbeatStaleTrialCallback"):  # Optuna >= 4.9
                    heartbeat["heartbeat_stale_trial_callback"] = storages.RetryHeartbeatStaleTrialCallback(
                        max_retry=STALE_RETRIES, inherit_intermediate_values=True)
                else:
                    heartbeat["failed_trial_callback"] = storages.RetryFailedTrialCallback(
                        max_retry=STALE_RETRIES, inherit_intermediate_values=True)
            return _create_rdb_storage(str(url), heartbeat)
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileOpenLock

    path = os.path.expanduser(url) if url else str(study_dir / JOURNAL_FILE)
    ensure_dir(Path(path).parent, "the study's storage directory")
    with writing(path, "the study's storage"):
        return JournalStorage(_journal_backend_class()(path, lock_obj=JournalFileOpenLock(path)))


@functools.lru_cache(maxsize=1)
def _journal_backend_class() -> type:
    """Optuna's journal file backend, whose failed appends (a full disk) leave the journal as it was.

    Optuna appends a batch of log lines in one write; a full disk can cut
    it short, and the next append would then glue its first line to the
    partial one, which no reader could parse again. Here a failed append is
    cut off (truncating needs no free space) and raised as a
    :class:`~rltune.errors.DiskError` naming the journal. The size is taken
    without Optuna's lock: one orchestrator writes a journal at a time (the
    study directory's lock).
    """
    from optuna.storages.journal import JournalFileBackend

    class SafeJournalFileBackend(JournalFileBackend):
        def __init__(self, file_path: str, lock_obj: Any = None) -> None:
            super().__init__(file_path, lock_obj=lock_obj)
            self.path = file_path

        def append_logs(self, logs: list[dict[str, Any]]) -> None:
            path = self.path
            try:
                size = os.path.getsize(path)
            except OSError:
                size = None
            try:
                super().append_logs(logs)
            except OSError as exc:
                if size is not None:
                    with contextlib.suppress(OSError):
                        if os.path.getsize(path) > size:
                            os.truncate(path, size)
                raise disk_error(exc, path, "the study's storage", STORAGE_DISK_HINT) from exc

    return SafeJournalFileBackend


def _create_rdb_storage(url: str, heartbeat: dict[str, Any]) -> Any:
    """The RDB storage; workers starting at once on a new database race to create Optuna's tables.

    The losers see "already exists" / "duplicate key" errors from the
    database (the winner's tables); they try again once those exist.
    """
    import random

    for attempt in range(10):
        try:
            return _reconnecting_class()(url, engine_kwargs={"pool_pre_ping": True}, **heartbeat)
        except Exception as exc:  # noqa: BLE001 - only the table-creation race is retried
            text = str(exc).lower()
            if attempt == 9 or not ("already exists" in text or "duplicate key" in text):
                raise
            time.sleep(0.2 + random.random())
    raise AssertionError("unreachable")


def lost_connection(exc: BaseException) -> bool:
    """Whether ``exc`` (or its cause) is a database connection lost or refused, worth retrying."""
    try:
        from sqlalchemy.exc import DBAPIError, OperationalError
    except ImportError:  # pragma: no cover
        return False
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OperationalError) or (isinstance(seen, DBAPIError) and seen.connection_invalidated):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def connection_error(exc: BaseException) -> str:
    """The database driver's own words for a lost connection (Optuna wraps them in a generic message)."""
    from sqlalchemy.exc import DBAPIError

    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, DBAPIError) and seen.orig is not None:
            exc = seen.orig
            break
        seen = seen.__cause__ or seen.__context__
    lines = str(exc).strip().splitlines()
    return redact_text(f"{type(exc).__name__}: {lines[0][:200] if lines else ''}")


def with_reconnect(fn: Callable[..., Any], what: str, retry_s: float = STORAGE_RETRY_S) -> Callable[..., Any]:
    """``fn`` retried with back-off while its database connection is lost, for at most ``retry_s``.

    The wait is logged when it starts (what waits, why, for how long at most) and when it ends.
    """

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        deadline = None
        pause = 0.5
        while True:
            try:
                result = fn(*args, **kwargs)
            except Exception as exc:  # noqa: BLE001 - only lost connections are retried; others re-raised
                if not lost_connection(exc):
                    raise
                now = time.monotonic()
                if deadline is None:
                    deadline = now + retry_s
                    logger.warning("the study's database is unreachable (%s); retrying %s for up to %.0f s",
                                   connection_error(exc), what, retry_s)
                if now >= deadline:
                    raise StorageLostError(
                        f"the study's database stayed unreachable for {retry_s:.0f} s ({what}): "
                        f"{connection_error(exc)}; the study is resumable: start the worker again") from exc
                time.sleep(pause)
                pause = min(pause * 2, 5.0)
                continue
            if deadline is not None:
                logger.warning("the study's database is back: %s went through after %.1f s", what,
                               retry_s - (deadline - time.monotonic()))
            return result

    return call


@functools.lru_cache(maxsize=1)
def _reconnecting_class() -> type:
    from optuna.storages import RDBStorage

    # the public API, and the private backend calls Optuna makes itself (see _optuna_compat); not the
    # *_without_commit helpers (inside a session)
    private = RDB_PRIVATE_CALLS
    methods = [name for name, value in vars(RDBStorage).items()
               if callable(value) and (not name.startswith("_") or name in private)
               and name not in {"remove_session", "upgrade", "get_current_version", "get_head_version",
                                "get_all_versions"}]
    namespace = {name: with_reconnect(getattr(RDBStorage, name), f"RDBStorage.{name}") for name in methods}
    namespace["__doc__"] = "Optuna's RDBStorage whose calls survive a database restart (retried on a lost connection)."
    return type("ReconnectingRDBStorage", (RDBStorage,), namespace)

