"""The tracking process's share of the CPU: it yields to its study's trials while it keeps up with them.

Linux with autogroups (the default on desktops and many servers) shares the
CPU between sessions first, and nice only orders the processes of one
session. Each trial runs in a session of its own, and so does the tracking
process (``start_new_session``): its autogroup's nice is what makes it yield.
Unlike a process's nice, an autogroup's nice can be set back down to 0 by an
unprivileged process of the same user, so the orchestrator sets it on every
turn of its loop (:meth:`Priority.nice_for`):

- **nice 19 while trials run and the tracking keeps up**: its calls wait
  for the trials' CPU bursts (2 s at most), and what it does when it has
  nothing due (importing matplotlib, scikit-learn and torch for the first
  trial's end) comes second to the trials;
- **nice 0 when the oldest call not yet recorded is older than
  ``deadline_s``** (2 s), and whenever no trial of the orchestrator runs
  (its study's end among them).

Why a deadline (``benchmarks/bench_tracking_priority.py``, figures in
``benchmarks/README.md``, "MLflow tracking: priority and batching": a study
of 4 function trials x 150 results on 2 cores, with a CPU hog of one busy
process per core beside it, load ~7): priority does not change what the
tracking costs the trials, only when it runs. At a fixed nice 19 (rltune
before issue 24) or 10 the tracking did not even finish its start-up while
the trials ran: MLflow showed nothing during the study (lag 27 s median,
55 s max) and the study's end waited 16-20 s for it (minutes on longer
studies). At nice 5 it fell 25-37 s behind. At nice 0 it kept up (lag
0.2 s median, 4.6 s at the 95th percentile) but, keeping up, it sent each
result in a call of its own: 10.2 s of CPU for the study, against 6.6 s with
the deadline and batching (1.65 s per trial of 150 results, i.e. ~11 ms a
result start-up included, 7 ms after it; one MLflow call costs ~10 ms of CPU
for one result of 30 numbers, 20 ms for 5, 50 ms for 20). The deadline keeps
its lag at ~2 s (7 s at the 95th percentile) and its end wait at ~3 s, like
nice 0 with batching, while its work waits for the trials' CPU bursts and
its warm-up imports (done when idle) come second to them.

Without autogroups (or off Linux) the process's own nice is what applies,
and an unprivileged process cannot lower it again: the tracking process
then keeps its nice 0 (a fixed nice of 5 already fell behind, see above). A
tracking process waiting for the one a killed orchestrator left
(:mod:`._server`'s lock) hands that one its own nice.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

NICE = 19  # the autogroup's nice while trials run and the tracking keeps up
DEADLINE_S = 2.0  # normal priority while the oldest call not yet recorded is older than this
TRACKING_ENTRY = "rltune.tracking._server"  # in a tracking process's command line


@dataclass(frozen=True)
class Priority:
    """When the tracking process yields to the trials (see the module docstring).

    ``nice``: its autogroup's nice while trials run and it keeps up;
    ``deadline_s``: it gets nice 0 while its oldest unrecorded call is older
    than this (None: never, a fixed ``nice`` while trials run).
    """

    nice: int = NICE
    deadline_s: float | None = DEADLINE_S

    def nice_for(self, trials_running: bool, lag_s: float) -> int:
        """The nice for a tracking process ``lag_s`` behind, while trials run or not."""
        if not trials_running:
            return 0
        if self.deadline_s is not None and lag_s > self.deadline_s:
            return 0
        return self.nice


def has_autogroups() -> bool:
    """Whether this Linux shares the CPU between sessions (autogroups), so that their nice can be changed."""
    try:
        enabled = Path("/proc/sys/kernel/sched_autogroup_enabled").read_text().strip() == "1"
    except OSError:
        return False
    return enabled and autogroup_nice() is not None


def lower_priority(nice: int = NICE) -> None:
    """In the tracking process: its autogroup at ``nice`` (the orchestrator changes it as it goes).

    Without autogroups, nothing: the process's own nice could not be lowered
    again, and a fixed nice above 0 falls behind a busy machine for good.
    """
    if has_autogroups():
        set_autogroup_nice("self", nice)


def autogroup_nice(pid: int | str = "self") -> int | None:
    """The nice of ``pid``'s autogroup; None without autogroups (or the process is gone)."""
    try:
        text = Path(f"/proc/{pid}/autogroup").read_text()  # "/autogroup-464 nice 19"
        return int(text.split()[-1])
    except (OSError, ValueError, IndexError):
        return None


def set_autogroup_nice(pid: int | str, nice: int) -> None:
    """Set ``pid``'s autogroup nice if it differs; best effort, so callers set it again on their next turn.

    It fails without autogroups, for a process of another user, and within
    100 ms of the machine's last change (EAGAIN: the kernel's rate limit).
    """
    if autogroup_nice(pid) in (None, nice):
        return
    try:
        with open(f"/proc/{pid}/autogroup", "w") as f:
            f.write(str(nice))
    except OSError:
        pass


def is_tracking_process(pid: int) -> bool:
    """Whether ``pid`` runs a tracking process (a pid read from a lock file may have been reused)."""
    try:
        return TRACKING_ENTRY.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
