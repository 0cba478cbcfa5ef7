"""TensorBoard event files of a trial's results, in the trial's directory (``tensorboard --logdir``).

Each result becomes one event at step ``timesteps_total`` (RLlib's
convention; ``training_iteration`` for a result without it): every finite
number of the result as a scalar, nested keys joined with '/'
(``info/learner/default_policy/policy_loss``, ``evaluation/episode_reward_mean``,
``custom_metrics/...``, ``policy_reward_mean/<policy id>``), and every
non-empty list of numbers as a histogram (``hist_stats/episode_reward``).
NaN and infinities are left out (TensorBoard cannot plot them; result.json
keeps them), and so are ``timestamp`` (the event's wall time already) and
``trial_number`` (the run's directory names it) and ``config`` (the
hyperparameters in force, not a metric; MLflow records PBT's schedule).

The training loop pays for a copy of the result's numbers and a queue put;
a writer thread builds the events, writes them and flushes them to disk
(fsync), at once for a result that comes after a quiet second, else with
the others of the last second (FLUSH_INTERVAL_S): an iteration is on disk
at most a second after it ends, a slow disk never stalls training, and a
trainable that reports hundreds of times a second does not wake the writer
for each result. :meth:`TensorBoardWriter.close` writes
what is queued and closes the file. A trial restarted in its directory
(resumed, or retried from a checkpoint) opens a new event file that tells
TensorBoard to hide the steps the earlier attempt wrote after the step it
restarts from.

This is the one module that imports tensorboardX (tested with tensorboardX
2.6.5): its ``EventsWriter`` (the synchronous writer under its
``SummaryWriter``, which would add a process queue and a thread of its own
per trial and build one event per scalar) and its ``Event``/``Summary``
protocol buffers; it is imported without the torch import its package makes
(:func:`_import_tensorboardx`). Each record's checksum (CRC32C) is computed by the
``crc32c`` package when installed (a dependency; tensorboardX's pure-Python
fallback costs more CPU than the rest of an event: benchmarks/README.md). tests/orchestrator/test_tensorboard.py
reads the files back with TensorBoard's own loader and fails if these move.
"""

from __future__ import annotations

import itertools
import logging
import math
import os
import queue
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from rltune._trial_files import last_result

logger = logging.getLogger(__name__)

CLOSE_TIMEOUT_S = 30.0  # close() waits this long for the writer thread (a hung disk must not hang the trial's end)
EVENT_FILE_MARK = ".tfevents."  # what TensorBoard looks for in a file name
HISTOGRAM_BINS = 30
FLUSH_INTERVAL_S = 1.0  # at most one write and flush a second: TensorBoard itself reloads every 5 s
NOT_PLOTTED = frozenset({"timestamp", "trial_number", "config"})
_CLOSE = object()
_files = itertools.count()


def tensorboard_step(result: dict[str, Any]) -> int:
    """The step of a result's event: ``timesteps_total`` if it is a finite number, else ``training_iteration``."""
    steps = result.get("timesteps_total")
    if _is_number(steps) and math.isfinite(steps):
        return int(steps)
    return int(result.get("training_iteration") or 0)


def flatten_numbers(result: dict[str, Any]) -> tuple[dict[str, float], dict[str, np.ndarray]]:
    """The finite numbers of a nested result as ``a/b/c`` scalars, and its non-empty lists of numbers (histograms)."""
    values: dict[str, float] = {}
    lists: dict[str, np.ndarray] = {}
    _flatten(result, "", values, lists)
    for key in NOT_PLOTTED:
        values.pop(key, None)
    return values, lists


def _flatten(node: dict[str, Any], prefix: str, values: dict[str, float], lists: dict[str, np.ndarray]) -> None:
    for key, value in node.items():
        kind = type(value)
        if kind is float or kind is int:  # most of a result: checked first, without isinstance
            if kind is int or math.isfinite(value):
                values[f"{prefix}{key}"] = value
        elif isinstance(value, dict):
            _flatten(value, f"{prefix}{key}/", values, lists)
        elif _is_number(value):
            if math.isfinite(value):
                values[f"{prefix}{key}"] = float(value)
        elif isinstance(value, (list, tuple, np.ndarray)) and len(value) and _is_number(value[0]):
            array = _numbers(value)  # a copy: the trainable may change its list later
            if array is not None and array.size:
                lists[f"{prefix}{key}"] = array


def _numbers(values: Any) -> np.ndarray | None:
    """The finite numbers of a flat list as a new float array; None if it holds anything but numbers."""
    try:
        array = np.array(values)
    except (TypeError, ValueError):  # ragged
        return None
    if array.ndim != 1 or array.dtype.kind not in "iuf":  # strings, objects, bools, nested lists
        return None
    array = array.astype(np.float64, copy=False)
    return array[np.isfinite(array)]


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


class TensorBoardWriter:
    """Writes a trial's results as TensorBoard events in ``logdir`` from a thread of its own (see the module doc).

    ``result(result)`` is called once per iteration by the loop (a
    :class:`~rltune.orchestrator._reporter.Reporter` observer), ``close()``
    once at the end on every path (idempotent). A write that fails is
    logged once and the trial goes on without TensorBoard (result.json is
    the record).
    """

    def __init__(self, logdir: str | os.PathLike[str], *, purge_step: int | None = None) -> None:
        """Open a new event file in ``logdir``; ``purge_step``: hide earlier files' events at this step and later."""
        _import_tensorboardx()
        from tensorboardX.event_file_writer import EventsWriter
        from tensorboardX.proto.event_pb2 import Event, SessionLog

        self.logdir = Path(logdir)
        self.logdir.mkdir(parents=True, exist_ok=True)
        # pid and a counter in the name: two attempts of a trial started in the same second never share a file
        suffix = f".{os.getpid()}.{next(_files)}"
        self._events = EventsWriter(str(self.logdir / "events"), suffix)
        self.path = next(p for p in self.logdir.iterdir() if EVENT_FILE_MARK in p.name and p.name.endswith(suffix))
        if purge_step is not None:  # TensorBoard drops earlier events at steps >= this one
            self._events.write_event(Event(step=purge_step, session_log=SessionLog(status=SessionLog.START)))
        self._events.flush()
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._queued = 0  # results queued (by the loop's thread)
        self._written = 0  # results written and flushed, or dropped after a failure (by the writer's thread)
        self._progress = threading.Condition()
        self._failed = False
        self._closed = False
        self._hurry = threading.Event()  # close() or wait(): write what is queued now, not at the next interval
        self._thread = threading.Thread(target=self._run, name="rltune-tensorboard", daemon=True)
        self._thread.start()

    def result(self, result: dict[str, Any]) -> None:
        """Queue one result (its numbers copied now); the writer thread writes and flushes it."""
        if self._closed or self._failed:
            return
        values, lists = flatten_numbers(result)
        self._queued += 1
        self._queue.put((time.time(), tensorboard_step(result), values, lists))

    def wait(self, timeout: float | None = None) -> bool:
        """Block until every result queued so far is on disk (True), or ``timeout`` seconds passed (False)."""
        target = self._queued
        self._hurry.set()
        with self._progress:
            return self._progress.wait_for(lambda: self._written >= target or not self._thread.is_alive(), timeout)

    def close(self) -> None:
        """Write what is queued, flush and close the event file (waits up to CLOSE_TIMEOUT_S)."""
        if self._closed:
            return
        self._closed = True
        self._queue.put(_CLOSE)
        self._hurry.set()
        self._thread.join(CLOSE_TIMEOUT_S)
        if self._thread.is_alive():
            logger.warning("TensorBoard: the event file %s was not closed within %.0f s (a slow disk?)",
                           self.path, CLOSE_TIMEOUT_S)

    def _run(self) -> None:
        """Write and flush what is queued, then sleep FLUSH_INTERVAL_S (unless hurried); until close()."""
        closing = False
        while not closing:
            batch = [self._queue.get()]
            while True:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            closing = any(item is _CLOSE for item in batch)
            results = [item for item in batch if item is not _CLOSE]
            if results and not self._failed:
                self._write(results)
            with self._progress:
                self._written += len(results)
                self._progress.notify_all()
            if not closing:  # results that come meanwhile share the next write and flush
                self._hurry.wait(FLUSH_INTERVAL_S)
                self._hurry.clear()
        try:
            self._events.close()
        except Exception as exc:  # noqa: BLE001
            logger.warning("TensorBoard: closing %s failed (%s: %s)", self.path, type(exc).__name__, exc)

    def _write(self, results: list[tuple[float, int, dict[str, float], dict[str, np.ndarray]]]) -> None:
        from tensorboardX.proto.event_pb2 import Event
        from tensorboardX.proto.summary_pb2 import Summary

        try:
            for wall_time, step, values, lists in results:
                summary = Summary(value=[Summary.Value(tag=tag, simple_value=v) for tag, v in values.items()])
                summary.value.extend(Summary.Value(tag=tag, histo=_histogram(array)) for tag, array in lists.items())
                self._events.write_event(Event(wall_time=wall_time, step=step, summary=summary))
            self._events.flush()  # fsync: on disk, in this thread
        except Exception as exc:  # noqa: BLE001 - TensorBoard is a view; the trial goes on (result.json is the record)
            self._failed = True
            logger.warning("TensorBoard: writing %s failed (%s: %s); no more TensorBoard events for this trial",
                           self.path, type(exc).__name__, exc)


def _import_tensorboardx() -> None:
    """Import tensorboardX without the torch import its package makes (``try: import torch`` in its writer).

    A trial that has not imported torch (a function trainable) would pay
    for torch's import at its start (benchmarks/README.md); this module uses
    none of tensorboardX's torch support. While tensorboardX is imported,
    ``import torch`` fails in this process (another thread importing torch
    then would fail too: trial processes import nothing in other threads).
    """
    if "tensorboardX" in sys.modules or "torch" in sys.modules:
        return
    sys.modules["torch"] = None  # type: ignore[assignment] - makes `import torch` raise ImportError
    try:
        import tensorboardX  # noqa: F401
    finally:
        del sys.modules["torch"]


def _histogram(values: np.ndarray) -> Any:
    """TensorBoard's histogram of ``values``: HISTOGRAM_BINS equal buckets from min to max.

    A bucket ends at its ``bucket_limit`` and starts at the previous one (the
    first at ``min``); equal values make one bucket. Counted with
    ``np.bincount``, which costs less than tensorboardX's ``summary.histogram``
    (np.histogram, then trimming empty buckets): this runs for every list of
    every result.
    """
    from tensorboardX.proto.summary_pb2 import HistogramProto

    low, high = float(values.min()), float(values.max())
    if high > low:
        width = (high - low) / HISTOGRAM_BINS
        counts = np.bincount(np.minimum(((values - low) / width).astype(np.intp), HISTOGRAM_BINS - 1),
                             minlength=HISTOGRAM_BINS)
        limits = low + width * np.arange(1, HISTOGRAM_BINS + 1)
    else:  # all equal: one bucket
        counts, limits = np.array([values.size]), np.array([high])
    return HistogramProto(min=low, max=high, num=values.size, sum=float(values.sum()),
                          sum_squares=float(values @ values), bucket_limit=limits.tolist(), bucket=counts.tolist())


def open_trial_writer(trial_dir: str | os.PathLike[str]) -> TensorBoardWriter:
    """The writer of a trial (re)starting in ``trial_dir``, once its ``result.json`` holds only the results kept.

    If an earlier attempt left event files there, the new file hides their
    events after the last kept result (all of them if none was kept).
    """
    directory = Path(trial_dir)
    purge_step = None
    if directory.is_dir() and any(EVENT_FILE_MARK in p.name for p in directory.iterdir()):
        last = last_result(directory)
        purge_step = tensorboard_step(last) + 1 if last is not None else 0
    return TensorBoardWriter(directory, purge_step=purge_step)
