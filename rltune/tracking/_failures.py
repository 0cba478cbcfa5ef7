"""What could not be recorded in MLflow: one warning per kind, counts, descriptions, a pause after an outage."""

from __future__ import annotations

import logging
import time
from collections import Counter
from typing import Callable, Mapping, TypeVar

from rltune._disk import REASONS, disk_kind

logger = logging.getLogger("rltune.tracking")

T = TypeVar("T")

_DATA_ERRORS = {"INVALID_PARAMETER_VALUE", "RESOURCE_ALREADY_EXISTS", "RESOURCE_DOES_NOT_EXIST", "BAD_REQUEST"}
MAX_UNRECORDED = 1000  # descriptions kept; the counts go on


class Failures:
    """What could not be recorded: one warning per kind, counts, descriptions, and a pause after an outage.

    ``attempt(kind, what, fn)`` runs ``fn()``; on an exception it logs one
    warning per ``kind`` (later ones at DEBUG), counts it and appends
    ``what`` to ``unrecorded``. After a failure that is not a rejected value
    (the store or server is unavailable) calls are skipped for ``pause`` s
    (5 s, doubling up to 60 s) and recorded as skipped; a success resets it.
    """

    def __init__(self, owner: str, store: str | None = None) -> None:
        self.owner = owner
        self.store = store  # the tracking URI, named when the store's disk is full
        self.unrecorded: list[str] = []
        self.counts: Counter[str] = Counter()
        self._warned: set[str] = set()
        self._down_until = 0.0
        self._pause = 0.0

    def attempt(self, kind: str, what: str, fn: Callable[[], T]) -> tuple[bool, T | None]:
        if time.monotonic() < self._down_until:
            self.record(kind, f"{what} (skipped: the tracking store was unavailable)")
            return False, None
        try:
            value = fn()
        except Exception as exc:  # noqa: BLE001 - tracking never raises into training
            self.failed(kind, what, exc)
            return False, None
        self._pause = 0.0
        return True, value

    def failed(self, kind: str, what: str, exc: Exception) -> None:
        code = getattr(exc, "error_code", None)
        outage = code not in _DATA_ERRORS
        if outage:
            self._pause = min(60.0, self._pause * 2 if self._pause else 5.0)
            self._down_until = time.monotonic() + self._pause
        self.record(kind, what)
        from rltune._secrets import redact_text  # MLflow's messages name the URL, user:password@ too

        first_line = redact_text((str(exc).strip().splitlines() or [""])[0][:300])
        if disk_kind(exc):  # a full (or read-only) disk under the store: said plainly, with the store
            where = f" (the MLflow store {redact_text(self.store)})" if self.store else ""
            first_line = f"{REASONS[disk_kind(exc)]}{where}: {first_line}"
        if kind not in self._warned:
            self._warned.add(kind)
            later = f"; tracking calls pause {self._pause:.0f} s" if outage else ""
            logger.warning("MLflow tracking (%s): could not record %s: %s: %s%s (further %r failures are "
                           "logged at DEBUG and listed in the tracker's unrecorded)",
                           self.owner, what, type(exc).__name__, first_line, later, kind)
        else:
            logger.debug("MLflow tracking (%s): could not record %s: %s", self.owner, what, redact_text(repr(exc)))

    def record(self, kind: str, what: str) -> None:
        self.counts[kind] += 1
        if len(self.unrecorded) < MAX_UNRECORDED:
            self.unrecorded.append(what)

    def merge(self, unrecorded: list[str], counts: Mapping[str, int]) -> None:
        """Add what another process's failure log holds (the tracking process's, at its close)."""
        self.counts.update(counts)
        self.unrecorded.extend(unrecorded[:max(0, MAX_UNRECORDED - len(self.unrecorded))])

    def summary(self) -> str | None:
        """One line such as ``MLflow tracking (study 'x'): 12 call(s) not recorded (metrics x10, checkpoint x2)``; None when all went well."""
        if not self.counts:
            return None
        kinds = ", ".join(f"{k} x{n}" for k, n in self.counts.most_common())
        return f"MLflow tracking ({self.owner}): {sum(self.counts.values())} call(s) not recorded ({kinds})"
