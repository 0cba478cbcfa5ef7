"""The trial side of a trial process: the :class:`Reporter` handed to function trainables.

A function trainable is ``fn(config, reporter)``::

    def train_fn(config, reporter):
        start = 0
        if reporter.restored_checkpoint:                 # a resumed or retried trial
            with open(os.path.join(reporter.restored_checkpoint, "state.json")) as f:
                start = json.load(f)["step"]
        for step in range(start, 100):
            score = ...
            reporter(score=score)                        # one result; may end the trial (TrialStopped)
            if reporter.should_checkpoint:               # checkpoint_freq, or the study asks for one
                with reporter.checkpoint_dir() as d:     # written atomically as checkpoint_<iteration>
                    with open(os.path.join(d, "state.json"), "w") as f:
                        json.dump({"step": step + 1}, f)

``reporter(**result)`` sends one result to the orchestrator and waits for its
decision: it returns to go on, or raises :class:`TrialStopped` when the trial
ends (a stop criterion met, pruned, Ctrl-C). ``rltune train`` runs the same
Reporter in its own process, with a local ``decide`` in place of the
orchestrator (:class:`rltune.orchestrator._trial.LocalDecider`). ``TrialStopped`` is a
``BaseException`` so that ``except Exception`` in user code does not swallow
it; catch it only to write a last checkpoint (``stop.checkpoint`` says whether
one is wanted), then re-raise or return. ``fn(config)`` with one argument
reports with :func:`rltune.tune.report` instead.

Invariants: ``training_iteration`` counts reports (continued after a restore
from the checkpoint's iteration); a checkpoint directory appears under its
final name only once complete; results are also appended to the trial's
``result.json``, then given to the reporter's observers (TensorBoard:
:mod:`rltune.orchestrator._tensorboard`), before the decision is asked for;
``close()`` closes the file and every observer.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Protocol, Sequence

from rltune._atomic_dir import leftover_path, recover_leftovers, replace_dir
from rltune._contracts import require_methods
from rltune._disk import disk_error, disk_kind, writing
from rltune._ipc import Channel, ChannelClosed, CheckpointSaved, Continue, Exploit, Result, Stop
from rltune._trial_files import CHECKPOINT_PREFIX, RESULT_FILE, json_safe, list_checkpoints


_current: "Reporter | None" = None


class ResultObserver(Protocol):
    """What a :class:`Reporter` tells besides result.json (TensorBoard): each result, then the end."""

    def result(self, result: dict[str, Any]) -> None:
        """One result, as written to result.json; must not keep the loop waiting (no disk wait)."""

    def close(self) -> None:
        """The trial's attempt ended (stopped, done, failed, interrupted); called once."""


class TrialStopped(BaseException):
    """Raised by ``reporter(...)`` when the orchestrator ends the trial; ``checkpoint``: a last one is wanted."""

    def __init__(self, reason: str, checkpoint: bool) -> None:
        super().__init__(reason)
        self.reason = reason
        self.checkpoint = checkpoint


class Reporter:
    """Reports a trial's results to the orchestrator and commits its checkpoints (one per trial process)."""

    def __init__(
        self,
        conn: Channel | None,
        *,
        trial_dir: str | os.PathLike[str],
        trial_number: int | None = 0,
        seed: int | None = None,
        restored_checkpoint: str | None = None,
        start_iteration: int = 0,
        checkpoint_freq: int = 0,
        keep_checkpoints_num: int | None = None,
        decide: Callable[[dict[str, Any]], Any] | None = None,
        observers: Sequence[ResultObserver] = (),
        config: dict[str, Any] | None = None,
    ) -> None:
        """``decide(result)``: the answer to each result; default: the orchestrator's over ``conn``.

        ``trial_number`` None: a trial of no study, whose results carry no ``trial_number``.
        ``observers`` get each result after result.json and are closed by :meth:`close`; a TypeError
        here if one lacks a method of :class:`ResultObserver`.
        """
        checked = [require_methods(o, ResultObserver, "a result observer") for o in observers]  # before opening files
        self._conn = conn
        self._decide = decide if decide is not None else self._ask_orchestrator
        self.trial_dir = Path(trial_dir)
        self.trial_number = trial_number
        self.seed = seed
        self.restored_checkpoint = restored_checkpoint
        self.iteration = start_iteration
        self.checkpoint_freq = checkpoint_freq
        self.keep_checkpoints_num = keep_checkpoints_num
        self._start = time.time()
        self._last = self._start
        self._checkpoint_wanted = False
        self._saved_at = start_iteration if restored_checkpoint else -1
        with writing(self.trial_dir / RESULT_FILE, "the trial's results"):
            self.trial_dir.mkdir(parents=True, exist_ok=True)
            # unbuffered: a write the disk refuses leaves nothing pending that close() would fail on again
            self._results = open(self.trial_dir / RESULT_FILE, "ab", buffering=0)
        self._observers = checked
        self.config = config  # the hyperparameters in force: every result's "config" (None: not added)
        self.exploit: Exploit | None = None  # PBT's answer to the last result, until the train loop takes it

    # -- reporting ----------------------------------------------------------------------------
    def __call__(self, **result: Any) -> None:
        """Report one result; returns to go on, raises :class:`TrialStopped` when the trial ends."""
        self._record(result)
        self._answer(result)

    report = __call__

    def report_checkpoint(self, result: dict[str, Any], directory: str | os.PathLike[str]) -> str:
        """Report one result with the checkpoint of its iteration: the files of ``directory``, copied.

        Ray Tune 2.x's ``train.report(metrics, checkpoint=...)``: the copy is
        committed as ``checkpoint_<iteration>`` before the orchestrator's
        decision is asked for, so a trial stopped at this result keeps it.
        Returns the committed path (or raises :class:`TrialStopped` after it).
        """
        self._record(result)
        with self.checkpoint_dir() as tmp:
            shutil.copytree(directory, tmp, dirs_exist_ok=True)
        self._answer(result)
        return str(self.trial_dir / f"{CHECKPOINT_PREFIX}{self.iteration:06d}")

    def _record(self, result: dict[str, Any]) -> None:
        """Number and time ``result``, append it to result.json and give it to the observers."""
        now = time.time()
        if "training_iteration" in result and isinstance(result["training_iteration"], int):
            self.iteration = result["training_iteration"]
        else:
            self.iteration += 1
            result["training_iteration"] = self.iteration
        result.setdefault("time_this_iter_s", now - self._last)
        result.setdefault("time_total_s", now - self._start)
        result.setdefault("timestamp", now)
        if self.trial_number is not None:
            result.setdefault("trial_number", self.trial_number)
        if self.config is not None:
            result.setdefault("config", self.config)
        self._last = now
        line = memoryview((json.dumps(json_safe(result), allow_nan=True) + "\n").encode())
        with writing(self.trial_dir / RESULT_FILE, "the trial's results"):
            while line:  # a raw write may take part of it (the last bytes a disk has room for)
                line = line[self._results.write(line):]
        for observer in self._observers:
            observer.result(result)
        self._checkpoint_wanted = bool(self.checkpoint_freq) and self.iteration % self.checkpoint_freq == 0

    def _answer(self, result: dict[str, Any]) -> None:
        """Ask for the decision on ``result``: return to go on, or raise :class:`TrialStopped`."""
        decision = self._decide(result)
        if isinstance(decision, Continue) and decision.want_checkpoint:
            self._checkpoint_wanted = True
        elif isinstance(decision, Exploit):  # PBT: the train loop restores the checkpoint, then the config applies
            self.exploit = decision
            # a replayed schedule (._replay) restores this trial's own checkpoint of this iteration: save it first
            self._checkpoint_wanted = self._checkpoint_wanted or Path(decision.checkpoint).parent == self.trial_dir
        if isinstance(decision, Stop):
            self._checkpoint_wanted = (self._checkpoint_wanted or bool(decision.want_checkpoint)) \
                and self._saved_at != self.iteration
            raise TrialStopped(decision.reason, self._checkpoint_wanted)

    def take_exploit(self) -> Exploit | None:
        """PBT's exploit asked for by the last result (once): the train loop restores it and applies its config.

        The checkpoint restored is another trial's: this trial's next
        checkpoint is saved whatever iteration it numbers, and the results
        from then on carry the new config.
        """
        exploit, self.exploit = self.exploit, None
        if exploit is not None:
            self.config = exploit.config if self.config is not None else None
        return exploit

    def go_on_from(self, iteration: int) -> None:
        """Go on from ``iteration`` (PBT: another trial's checkpoint restored); its next checkpoint is saved anew.

        Checkpoints of this trial numbered later hold the weights it had
        before; they are left in place (another trial may be restoring one),
        and a restart takes the trial's latest committed checkpoint instead
        (:func:`rltune.orchestrator._pbt.restart_checkpoint`).
        """
        self.iteration = iteration
        self._saved_at = -1

    def _ask_orchestrator(self, result: dict[str, Any]) -> Continue | Stop:
        """The answer of the orchestrator at the other end of the channel (none: go on)."""
        if self._conn is None:
            return Continue()
        try:
            self._conn.send(Result(result))
        except ChannelClosed:
            raise
        except Exception:  # noqa: BLE001 - a value that does not pickle: send the result's JSON form
            self._conn.send(Result(json_safe(result)))
        return self._conn.receive()

    @property
    def should_checkpoint(self) -> bool:
        """True when a checkpoint of the iteration just reported is due (checkpoint_freq) or asked for."""
        return self._checkpoint_wanted and self._saved_at != self.iteration

    # -- checkpoints --------------------------------------------------------------------------
    @contextlib.contextmanager
    def checkpoint_dir(self) -> Iterator[str]:
        """A directory to write a checkpoint in; on exit it becomes ``checkpoint_<iteration>`` atomically."""
        final = self.trial_dir / f"{CHECKPOINT_PREFIX}{self.iteration:06d}"
        recover_leftovers(self.trial_dir)
        tmp = leftover_path(final, "tmp")  # names this process: cleaned up only once it is gone
        with writing(final, "checkpoint"):
            tmp.mkdir()
        try:
            yield str(tmp)
        except OSError as exc:  # the trainable's own writes: a full disk is named with the checkpoint
            shutil.rmtree(tmp, ignore_errors=True)
            if disk_kind(exc) is None:
                raise
            raise disk_error(exc, final, "checkpoint") from exc
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        try:
            self.commit_checkpoint(tmp, final)
        except OSError as exc:  # the previous checkpoints are kept
            shutil.rmtree(tmp, ignore_errors=True)
            raise disk_error(exc, final, "checkpoint") from exc

    def save_trainer(self, trainer: Any) -> str | None:
        """Checkpoint a rltune Trainer as ``checkpoint_<iteration>`` (once per iteration)."""
        if self._saved_at == self.iteration:
            return None
        final = self.trial_dir / f"{CHECKPOINT_PREFIX}{self.iteration:06d}"
        trainer.save(final)  # atomic itself (and on_checkpoint_saved sees the final path)
        return self.commit_checkpoint(None, final)

    def commit_checkpoint(self, tmp: Path | None, final: Path) -> str:
        """Move ``tmp`` (None: already in place) to ``final`` atomically, drop old ones, tell the orchestrator."""
        if tmp is not None:
            replace_dir(tmp, final)
        self._saved_at = self.iteration
        self._checkpoint_wanted = False
        if self.keep_checkpoints_num:
            for old in list_checkpoints(self.trial_dir)[: -self.keep_checkpoints_num]:
                shutil.rmtree(old[1], ignore_errors=True)
        if self._conn is not None:
            self._conn.send(CheckpointSaved(str(final), self.iteration))
        return str(final)

    def close(self) -> None:
        """Close result.json and every observer (each even if another raised; the first error is raised)."""
        closers = [self._results.close, *(o.close for o in self._observers)]
        self._observers = []
        error: BaseException | None = None
        for close in closers:
            try:
                close()
            except BaseException as exc:  # noqa: BLE001 - close the others first
                error = error or exc
        if error is not None:
            raise error


def latest_checkpoint(trial_dir: str | os.PathLike[str]) -> tuple[int, str] | None:
    found = list_checkpoints(trial_dir)
    return (found[-1][0], str(found[-1][1])) if found else None


def truncate_results(trial_dir: str | os.PathLike[str], iteration: int) -> None:
    """Keep the lines of ``result.json`` up to ``iteration`` (a trial restarting from a checkpoint).

    Complete lines only (one cut short by a kill or a full disk is dropped).
    When the kept lines are the file's first ones (results come in order) the
    file is cut in place, which needs no free space; else it is rewritten
    atomically. A :class:`~rltune.errors.DiskError` if it cannot be written.
    """
    path = Path(trial_dir) / RESULT_FILE
    with writing(path, "the trial's results"):
        try:
            lines = path.read_bytes().splitlines(keepends=True)
        except FileNotFoundError:
            return
        kept = [line for line in lines if line.endswith(b"\n") and _iteration_of(line) <= iteration]
        if lines[:len(kept)] == kept:
            os.truncate(path, sum(len(line) for line in kept))
            return
        tmp = path.with_name(f".{RESULT_FILE}.tmp-{os.getpid()}")
        try:
            tmp.write_bytes(b"".join(kept))
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)


def _iteration_of(line: bytes) -> float:
    """The ``training_iteration`` of a result.json line (infinite for a line that is not a result: dropped)."""
    try:
        return int(json.loads(line).get("training_iteration", 0))
    except (ValueError, TypeError, AttributeError):
        return math.inf


def report(**result: Any) -> None:
    """Report one result from a function trainable ``fn(config)``: :func:`rltune.orchestrator._session.report`."""
    from rltune.orchestrator._session import report as report_result

    report_result(**result)


def scalars(result: dict[str, Any], prefix: str = "") -> dict[str, float | int | str | bool | None]:
    """The scalar leaves of a nested result as ``a/b/c`` keys (lists such as hist_stats left out)."""
    out: dict[str, Any] = {}
    for key, value in result.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(scalars(value, name + "/"))
        elif isinstance(value, float) and not math.isfinite(value):
            out[name] = None
        elif value is None or isinstance(value, (bool, int, float, str)):
            out[name] = value
        else:
            safe = json_safe(value)
            if safe is None or isinstance(safe, (bool, int, float, str)):
                out[name] = safe
    return out

