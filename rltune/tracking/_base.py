"""What a study tracker shares with the trial trackers it makes: the store's client and the failure log."""

from __future__ import annotations

import logging
from typing import Any, Callable, TypeVar

from rltune.tracking._failures import Failures
from rltune.tracking._store import make_client

logger = logging.getLogger("rltune.tracking")

T = TypeVar("T")


class Shared:
    """The tracking URI, the client (made on first use) and the failure log of one study's trackers."""

    def __init__(self, tracking_uri: str, owner: str) -> None:
        self.tracking_uri = tracking_uri
        self.failures = Failures(owner, tracking_uri)
        self.client: Any = None

    def get_client(self) -> Any:
        if self.client is None:
            self.client = make_client(self.tracking_uri)
        return self.client


def guarded(task: Callable[[], T]) -> T | None:
    """Tasks account for MLflow failures themselves; anything else escaping one is a bug, logged, never raised."""
    try:
        return task()
    except Exception:  # noqa: BLE001
        logger.exception("MLflow tracking: a tracking task failed unexpectedly")
        return None


class Tracker:
    """The parts both trackers share: the client and the failure log."""

    def __init__(self, shared: Shared) -> None:
        self._shared = shared

    @property
    def tracking_uri(self) -> str:
        return self._shared.tracking_uri

    @property
    def unrecorded(self) -> list[str]:
        """What could not be recorded (or was skipped while the store was unavailable), in order."""
        return self._shared.failures.unrecorded

    @property
    def failure_counts(self) -> dict[str, int]:
        """Failed or skipped calls by kind (``metrics``, ``checkpoint``, ``open`` ...)."""
        return dict(self._shared.failures.counts)

    def summary(self) -> str | None:
        """A one-line summary of what was not recorded, or None (``close()`` logs it)."""
        return self._shared.failures.summary()

    @property
    def client(self) -> Any:
        return self._shared.get_client()

    def _attempt(self, kind: str, what: str, fn: Callable[[], T]) -> tuple[bool, T | None]:
        return self._shared.failures.attempt(kind, what, fn)
