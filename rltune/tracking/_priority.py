"""The tracking process's share of the CPU: it yields to its study's trials while it keeps up with them.

Linux with autogroups (the default on desktops and many servers) shares the
CPU between sessions first, and nice only orders the processes of one
session. Each trial runs in a session of its own, and so does the tracking
process (``start_new_session``): its autogroup's nice is what makes it yield.
Unlike a process's nice, an autogroup's nice can be set back down to 0 by an
unprivileged process of the same user, so the orchestrator sets it on every
turn of its loop (:meth:`Priority.nice_for`):

- **nice 19 while trials run and the tracking keeps up**: the tracking's
  start-up (importing mlflow, torch and matplotlib, migrating a new store)
  and its calls come second to the trials;
- **nice 0 when the oldest call not yet recorded is older than
  ``deadline_s``** (2 s), and whenever no trial of the orchestrator runs
  (its study's end among them).

Why a deadline and not a fixed nice (``benchmarks/README.md``, "MLflow
tracking: priority and batching", measured with a CPU hog beside the
study): priority does not change what the tracking costs, only when it runs.
At a fixed nice 19 the tracking got ~1.5% of a core that trials keep busy,
and less beside other work: it recorded a study after its end (minutes
later, the study's end waiting for it), and MLflow showed nothing while the
study ran. At nice 0 it kept up, and cost the trials the same CPU seconds.
What makes it cheap is batching (one MLflow call per trial for the results
of ~1 s, :mod:`._server`), not priority. The deadline keeps the start-up's
imports (seconds of CPU) off the first trials' CPU when the tracking has
nothing due, and bounds the lag when it does.

Without autogroups (or off Linux) the process's own nice is what applies,
and an unprivileged process cannot lower it again: the tracking process
then stays at ``FIXED_NICE``, a level that keeps up with the trials (see the
benchmark). A tracking process waiting for the one a killed orchestrator
left (:mod:`._server`'s lock) hands that one its own nice.
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
