"""The tracking process's share of the CPU: it yields to its study's trials, and only while they run.

Linux with autogroups (the default on desktops and many servers) shares the
CPU between sessions first, and nice only orders the processes of one
session. Each trial runs in a session of its own, and so does the tracking
process (``start_new_session``): its autogroup's nice is what makes it yield.
At nice 19 it gets ~1.5% of a core that a trial keeps busy, and less beside
other work: on a machine shared with other jobs it did not get through its
queue in minutes, so a study's end (which waits for that queue) waited too.

Unlike a process's nice, an autogroup's nice can be set back down to 0 by an
unprivileged process of the same user. So the orchestrator keeps its tracking
process at nice 19 while trials of its run and at 0 when none does (its
study's end among them); a tracking process waiting for the one a killed
orchestrator left (:mod:`._server`'s lock) hands that one its own nice.
Without autogroups (or off Linux) only the process nice (19) applies, and
stays.
"""

from __future__ import annotations

import os
from pathlib import Path

NICE = 19
TRACKING_ENTRY = "rltune.tracking._server"  # in a tracking process's command line


def lower_priority() -> None:
    """In the tracking process: nice 19, for the process and for its autogroup."""
    try:
        os.nice(NICE)
    except OSError:
        pass
    set_autogroup_nice("self", NICE)


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
