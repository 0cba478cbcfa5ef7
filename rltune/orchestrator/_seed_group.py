"""A trial of a ``seeds_per_trial`` study: its process runs the seeds and reports their aggregate.

The trial process (:func:`rltune.orchestrator._trial_process.run`) hands a
:class:`~rltune._ipc.TrialInit` carrying a :class:`~rltune._ipc.SeedGroup` to
:func:`run_group`. It starts one seed process per seed (the same trial
process, given ``config["seed"]``, the seed's own directory
``trial_dir/seed_<i>/`` and no group), and stands between them and the
orchestrator, which sees one trial as before:

- ``parallel``: every seed runs at once, in lock step: when every running
  seed reported step ``t``, the group reports ONE result, the aggregate
  (:func:`._seed_stats.aggregate_result`) of the seeds' results at ``t``
  (a seed that finished earlier counts with its last result), with
  ``result["seeds"]`` the metric of each seed; the orchestrator's answer
  (go on, stop, pruned) goes to every seed.
- ``race``: one seed after another; seed ``k``'s step ``t`` is reported as
  the aggregate of seeds ``0..k`` at ``t``. The study's stop criteria are
  judged here for every seed but the last (such a result carries
  ``seed_race_next``: the orchestrator does not stop on it, the next seed
  starts); a pruned trial starts no further seed.

A group checkpoint ``checkpoint_<t>`` holds every seed's latest checkpoint
(``seed_<i>/``, hard links) and ``group.json`` (which seeds ended, each
seed's checkpoint iteration); it is written when every seed answered at
``t`` has checkpointed ``t``. Restoring one restores every seed from its
own; a seed that had ended is not run again. In race mode a group
checkpoint supersedes those of higher iteration (earlier seeds' ends):
they are deleted, so that the latest checkpoint is the one to resume from.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass, replace
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any

import cloudpickle

from rltune._disk import disk_kind
from rltune._ipc import Channel, ChannelClosed, CheckpointSaved, Continue, Done, Failed, Result, Stop, TrialInit
from rltune._metrics import finite, lookup
from rltune._trial_files import PARAMS_FILE, RESULT_FILE, json_safe, list_checkpoints
from rltune.errors import CheckpointError
from rltune.orchestrator._child import send_init, spawn
from rltune.orchestrator._reporter import Reporter, TrialStopped, truncate_results
from rltune.orchestrator._seed_stats import RACE_NEXT, aggregate_result, bootstrap_ci
from rltune.orchestrator._stop import StopCriteria
from rltune.orchestrator._trial_host import _tail
from rltune.orchestrator._trial_process import _observers, _send

GROUP_FILE = "group.json"


@dataclass
class Seat:
    """One seed of the group: its process and what it reported."""

    index: int
    seed: int
    proc: subprocess.Popen | None = None
    conn: Channel | None = None
    pending: dict[str, Any] | None = None  # its result waiting for the group's answer
    last: dict[str, Any] | None = None  # its latest result
    checkpoint: tuple[int, str] | None = None  # its latest (iteration, path)
    answered: int | None = None  # the step it was last answered at
    done: bool = False


class GroupFailed(Exception):
    """A seed failed or crashed: the group fails with its text."""

    def __init__(self, text: str, kind: str | None = None) -> None:
        super().__init__(text)
        self.text, self.kind = text, kind


def seed_dir(trial_dir: str | os.PathLike[str], index: int) -> Path:
    """The directory of seed ``index`` of a trial: ``trial_dir/seed_<index>``."""
    return Path(trial_dir) / f"seed_{index}"


def run_group(conn: Channel | None, init: TrialInit) -> int:
    """Run the seeds of ``init``; the exit status of the trial process (0: done or stopped, 1: failed)."""
    try:
        group = SeedGroupRun(conn, init)
    except BaseException as exc:
        _send(conn, Failed(_format(exc), disk_kind(exc)))
        return 1
    try:
        group.run()
    except GroupFailed as exc:
        group.kill()
        _send(conn, Failed(exc.text, exc.kind))
        group.close()
        return 1
    except BaseException as exc:
        group.kill()
        _send(conn, Failed(_format(exc), disk_kind(exc)))
        group.close()
        return 1
    group.close()
    _send(conn, Done())
    return 0


class SeedGroupRun:
    """The seeds of one trial attempt, and the group's reporter (its aggregate results and checkpoints)."""

    def __init__(self, conn: Channel | None, init: TrialInit) -> None:
        self.init = init
        self.group = init.seed_group
        restore = init.restore
        start = int(init.start_iteration or 0) if restore else 0
        self.state = _read_group_file(restore) if restore else {}
        truncate_results(init.trial_dir, start)
        self.reporter = Reporter(conn, trial_dir=init.trial_dir, trial_number=init.trial_number, seed=init.seed,
                                 restored_checkpoint=restore, start_iteration=start,
                                 keep_checkpoints_num=init.keep_checkpoints_num, observers=_observers(init))
        ended = set(self.state.get("ended", []))
        self.seats = [Seat(i, s, done=i in ended) for i, s in enumerate(self.group.seeds)]
        for seat in self.seats:  # an ended seed counts with its last result; another from its checkpoint's
            seat.last = _last_result(seed_dir(init.trial_dir, seat.index), None if seat.done else self._seat_iteration(seat))
            if seat.done and restore and (Path(restore) / f"seed_{seat.index}").is_dir():
                seat.checkpoint = (self._seat_iteration(seat) or 0, str(Path(restore) / f"seed_{seat.index}"))
        self.race_stop = StopCriteria(self.group.stop, where="stop") if self.group.mode == "race" else None
        self.stopping: Stop | None = None  # the orchestrator's stop, once given
        self.group_saved = start if restore else -1

    # -- running the seeds -------------------------------------------------------------------
    def run(self) -> None:
        """Run every seed to its end (parallel: all at once; race: one after another, unless stopped)."""
        if self.group.mode == "race":
            for seat in self.seats:
                if seat.done:
                    continue
                if self.stopping is not None:
                    break
                self._start(seat)
                self._serve([seat])
        else:
            live = [seat for seat in self.seats if not seat.done]
            for seat in live:
                self._start(seat)
            self._serve(live)

    def _start(self, seat: Seat) -> None:
        """Start the seed's process, from its checkpoint in the restored group checkpoint if there is one."""
        directory = seed_dir(self.init.trial_dir, seat.index)
        directory.mkdir(parents=True, exist_ok=True)
        own = Path(self.init.restore) / f"seed_{seat.index}" if self.init.restore else None
        iteration = self._seat_iteration(seat)
        restore = str(own) if own is not None and own.is_dir() and iteration else None
        init = replace(self.init, config={**self.init.config, "seed": seat.seed}, trial_dir=str(directory),
                       seed=seat.seed, restore=restore, start_iteration=iteration if restore else 0, seed_group=None)
        (directory / PARAMS_FILE).write_text(json.dumps(json_safe({
            "trial": self.init.trial_number, "seed_index": seat.index, "seed": seat.seed, "config": init.config}),
            indent=2, sort_keys=True) + "\n")
        with open(directory / "output.log", "ab") as out:
            seat.proc, seat.conn = spawn("rltune.orchestrator._trial_process:trial_entry", stdout=out,
                                         env=dict(os.environ, RLTUNE_SEED_INDEX=str(seat.index)))
        send_init(seat.conn, cloudpickle.dumps(init))
        if restore:
            seat.checkpoint = (iteration, restore)

    def _seat_iteration(self, seat: Seat) -> int:
        found = self.state.get("iterations", {}).get(str(seat.index))
        return int(found) if isinstance(found, int) else 0

    def _serve(self, seats: list[Seat]) -> None:
        """Relay between ``seats`` and the orchestrator until each of them is done."""
        while any(not s.done for s in seats):
            live = {s.conn: s for s in seats if not s.done and s.conn is not None}
            for conn in wait(list(live), timeout=1.0):
                self._drain(live[conn])
            for seat in seats:
                if not seat.done and seat.proc is not None and seat.proc.poll() is not None and not seat.conn.poll():
                    self._crashed(seat)
            waiting = [s for s in seats if not s.done]
            if waiting and all(s.pending is not None for s in waiting):
                self._step(waiting)

    def _drain(self, seat: Seat) -> None:
        while not seat.done and seat.conn.poll():
            try:
                message = seat.conn.receive()
            except ChannelClosed:
                self._crashed(seat)
            if isinstance(message, Result):
                seat.pending = seat.last = message.result
            elif isinstance(message, CheckpointSaved):
                seat.checkpoint = (message.iteration, message.path)
                self._maybe_checkpoint()
            elif isinstance(message, Done):
                seat.done = True
                if self.stopping is None:  # it ended on its own (or for the next seed): never run again
                    self.state.setdefault("ended", []).append(seat.index)
                seat.conn.close()
                seat.proc.wait()
                self._maybe_checkpoint()
            elif isinstance(message, Failed):
                raise GroupFailed(f"seed {seat.index} (seed {seat.seed}) failed:\n{message.traceback}", message.kind)

    def _crashed(self, seat: Seat) -> None:
        code = seat.proc.wait() if seat.proc is not None else None
        tail = _tail(seed_dir(self.init.trial_dir, seat.index) / "output.log")
        raise GroupFailed(f"seed {seat.index} (seed {seat.seed}): its process exited with code {code} without "
                          f"reporting an error (a crash, os._exit or a killed process)\n{tail}", None)

    def _step(self, answering: list[Seat]) -> None:
        """Every running seed reported: report the aggregate, and answer each of them with the decision."""
        step = max(int(s.pending.get("training_iteration", 0)) for s in answering)
        result = self.aggregate_at(step, answering)
        race_next = self.race_stop is not None and answering[-1].index < len(self.seats) - 1 \
            and self.race_stop.check(result) is not None
        if race_next:
            result[RACE_NEXT] = True
        answer: Continue | Stop = Continue()
        try:
            self.reporter(**result)
        except TrialStopped as stop:
            answer = self.stopping = Stop(stop.reason, stop.checkpoint)
        if race_next and self.stopping is None:
            answer = Stop("the next seed starts", self.group.checkpoint_at_end)
        for seat in answering:
            seat.pending, seat.answered = None, step
            if race_next and self.stopping is None:
                self.state.setdefault("ended", []).append(seat.index)
            try:
                seat.conn.send(answer)
            except ChannelClosed:
                pass  # seen as a crash when read

    def aggregate_at(self, step: int, answering: list[Seat]) -> dict[str, Any]:
        """The group's result at ``step``: the answering seeds' new results, the others' results at ``step``
        (or their last one, if they ended before it); seeds not started yet are left out."""
        results: list[dict[str, Any] | None] = []
        for seat in self.seats:
            if seat in answering:
                results.append(seat.pending)
            elif seat.last is not None:
                results.append(_result_at(seed_dir(self.init.trial_dir, seat.index), step) or seat.last)
            else:
                results.append(None)
        metric = self.group.metric
        values = [finite(lookup(r, metric)) if r is not None else None for r in results]
        result = aggregate_result(results, values, how=self.group.aggregate, mode=self.group.direction)
        result["training_iteration"] = step
        low, high = bootstrap_ci(values, self.group.aggregate, self.group.direction, seed=int(self.init.seed or 0))
        result["seed_ci_low"], result["seed_ci_high"] = low, high
        return result

    # -- group checkpoints -------------------------------------------------------------------
    def _maybe_checkpoint(self) -> None:
        """Write the group checkpoint of the step last reported, once every seed answered at it checkpointed it."""
        step = self.reporter.iteration
        answered = [s for s in self.seats if s.answered == step]
        if self.group_saved == step or not answered:
            return
        if any(s.checkpoint is None or s.checkpoint[0] != step for s in answered):
            return
        state = {"ended": sorted(set(self.state.get("ended", []))),
                 "iterations": {str(s.index): s.checkpoint[0] for s in self.seats if s.checkpoint is not None}}
        with self.reporter.checkpoint_dir() as tmp:
            for seat in self.seats:
                if seat.checkpoint is not None:
                    _link_tree(Path(seat.checkpoint[1]), Path(tmp) / f"seed_{seat.index}")
            (Path(tmp) / GROUP_FILE).write_text(json.dumps(state, sort_keys=True) + "\n")
        self.group_saved = step
        for iteration, path in list_checkpoints(self.init.trial_dir):
            if iteration > step:  # race: a later seed's checkpoint supersedes the earlier seeds' ends
                shutil.rmtree(path, ignore_errors=True)

    def kill(self) -> None:
        """SIGKILL every seed process still running (the group failed)."""
        for seat in self.seats:
            if seat.proc is not None and seat.proc.poll() is None:
                try:
                    os.killpg(seat.proc.pid, 9)
                except (ProcessLookupError, PermissionError):
                    seat.proc.kill()
                seat.proc.wait()

    def close(self) -> None:
        """Close the group's result.json and observers (an error here is the trial's, unless one came first)."""
        try:
            self.reporter.close()
        except BaseException:  # noqa: BLE001 - the group already reports its outcome
            pass


def _read_group_file(restore: str) -> dict[str, Any]:
    """The ``group.json`` of a group checkpoint; CheckpointError if it is missing or unreadable."""
    path = Path(restore) / GROUP_FILE
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"{restore}: not a checkpoint of a seeds_per_trial trial ({GROUP_FILE}: {exc})") from None
    if not isinstance(state, dict):
        raise CheckpointError(f"{restore}: {GROUP_FILE} holds no mapping")
    return state


def _link_tree(source: Path, target: Path) -> None:
    """Copy the tree ``source`` to ``target`` as hard links (a copy where links are refused)."""
    def link(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    shutil.copytree(source, target, copy_function=link)


def seed_results(directory: Path) -> list[dict[str, Any]]:
    """The results in a seed's result.json, in order (lines cut short left out)."""
    try:
        lines = (directory / RESULT_FILE).read_text().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        try:
            found = json.loads(line)
        except ValueError:
            continue
        if isinstance(found, dict):
            out.append(found)
    return out


def _result_at(directory: Path, step: int) -> dict[str, Any] | None:
    """The last result of ``step`` in a seed's result.json, or None."""
    found = [r for r in seed_results(directory) if r.get("training_iteration") == step]
    return found[-1] if found else None


def _last_result(directory: Path, upto: int | None) -> dict[str, Any] | None:
    """A seed's last result up to iteration ``upto`` (its checkpoint; None: any), or None (0: from scratch)."""
    found = [r for r in seed_results(directory) if isinstance(r.get("training_iteration"), int)
             and (upto is None or r["training_iteration"] <= upto)] if upto != 0 else []
    return found[-1] if found else None




def _format(exc: BaseException) -> str:
    import traceback

    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))

