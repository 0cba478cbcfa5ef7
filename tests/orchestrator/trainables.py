"""Function trainables for the orchestrator's tests: fast, deterministic, and each failing in one known way.

Every trainable checkpoints its step counter with ``reporter.checkpoint_dir()`` when
``reporter.should_checkpoint`` and continues from ``reporter.restored_checkpoint``,
so that resume and retry tests can count iterations exactly.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path


def orchestrator_pid() -> int:
    """The pid of the orchestrator running this trial: its parent, or its parent's parent when the trial was
    forked from the orchestrator's warm template (rltune._warm)."""
    parent = os.getppid()
    with open(f"/proc/{parent}/cmdline", "rb") as f:
        if b"rltune._warm_server" not in f.read():
            return parent
    with open(f"/proc/{parent}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def _start(reporter) -> int:
    if reporter.restored_checkpoint:
        with open(os.path.join(reporter.restored_checkpoint, "state.json")) as f:
            return json.load(f)["step"]
    return 0


def _save(reporter, step: int) -> None:
    if reporter.should_checkpoint:
        with reporter.checkpoint_dir() as d:
            with open(os.path.join(d, "state.json"), "w") as f:
                json.dump({"step": step}, f)


def counter(config, reporter):
    """``steps`` iterations of ``score = x * step`` (plus ``noise``), ``sleep`` seconds each; records its pid.

    With ``wait_for`` (a path), every iteration after the first waits until that file exists.
    """
    (reporter.trial_dir / f"pid_{os.getpid()}").write_text(str(os.getpid()))
    start = _start(reporter)
    with open(reporter.trial_dir / "starts.txt", "a") as f:
        f.write(f"{start}\n")
    for step in range(start, config.get("steps", 5)):
        time.sleep(config.get("sleep", 0.0))
        while step > 0 and config.get("wait_for") and not os.path.exists(config["wait_for"]):
            time.sleep(0.05)
        try:
            reporter(score=config.get("x", 1.0) * (step + 1) + config.get("noise", 0.0), step=step + 1)
        finally:
            _save(reporter, step + 1)


def evaluated(config, reporter):
    """``steps`` iterations reporting ``evaluation/episode_reward_mean = x * step + 0.123456789`` (a long metric name,
    a value with many digits); checkpoints as ``counter``."""
    for step in range(_start(reporter), config.get("steps", 3)):
        try:
            reporter(evaluation={"episode_reward_mean": config.get("x", 1.0) * (step + 1) + 0.123456789})
        finally:
            _save(reporter, step + 1)


def filling_the_disk(config, reporter):
    """``counter`` (``steps``, score ``x * step``) that fills the file system of ``fill`` (a directory) once, after
    its checkpoint of step ``fill_at``: a later checkpoint (or result) of a trial finds the disk full."""
    from mounts import fill

    start = _start(reporter)
    with open(reporter.trial_dir / "starts.txt", "a") as f:
        f.write(f"{start}\n")
    for step in range(start, config["steps"]):
        try:
            reporter(score=config["x"] * (step + 1), step=step + 1)
        finally:
            _save(reporter, step + 1)
        if step + 1 == config["fill_at"] and not os.path.exists(os.path.join(config["fill"], "ballast")):
            fill(config["fill"])


def misbehaving(config, reporter):
    """``mode``: ok, raise (ValueError at step 2), exit (os._exit(3) at step 2), hang (sleeps), flaky (raises once),
    until (raises at step 2 until the file ``until`` exists)."""
    mode = config["mode"]
    start = _start(reporter)
    for step in range(start, config.get("steps", 4)):
        if step == 2 and (mode == "raise" or (mode == "until" and not os.path.exists(config["until"]))):
            raise ValueError("boom at step 2")
        if step == 2 and mode == "exit":
            os._exit(3)
        if step == 2 and mode == "hang":
            time.sleep(1000)
        if step == 2 and mode == "flaky" and not (reporter.trial_dir / "failed_once").exists():
            (reporter.trial_dir / "failed_once").write_text("1")
            raise RuntimeError("flaky failure")
        try:
            reporter(score=float(step + 1), mode_ok=1)
        finally:
            _save(reporter, step + 1)


def rerunning(config, reporter):
    """``steps`` iterations of ``score = step + 10 * attempt`` (attempt 1, 2, ... counted in ``attempts.txt``).

    A step run again after a restore gets another value than its first run.
    The first attempt SIGKILLs, right after the result of step ``kill_at`` was
    answered (before any checkpoint of it), ``kill``: "trial" (its own
    process) or "orchestrator" (its parent).
    """
    import signal

    attempts = reporter.trial_dir / "attempts.txt"
    attempt = len(attempts.read_text().split()) + 1 if attempts.exists() else 1
    with open(attempts, "a") as f:
        f.write(f"{attempt}\n")
    for step in range(_start(reporter), config.get("steps", 5)):
        reporter(score=float(step + 1 + 10 * attempt))
        if attempt == 1 and step + 1 == config.get("kill_at"):
            os.kill(os.getpid() if config.get("kill") == "trial" else orchestrator_pid(), signal.SIGKILL)
            time.sleep(5)  # (the orchestrator killed: the trial process exits when it sees its parent gone)
        _save(reporter, step + 1)


def counter_killing_its_orchestrator_at_stop(config, reporter):
    """``counter``; when told to stop, it checkpoints, then SIGKILLs the orchestrator (once) before it returns.

    That leaves a trial whose last result met ``stop`` and whose checkpoint is
    saved, RUNNING in storage: the orchestrator died before it heard ``done``.
    """
    import signal

    from rltune.tune import TrialStopped

    try:
        counter(config, reporter)
    except TrialStopped:
        marker = reporter.trial_dir / "killed_orchestrator"
        if not marker.exists():
            marker.write_text("1")
            os.kill(orchestrator_pid(), signal.SIGKILL)
            time.sleep(5)  # the trial process exits when it sees its parent gone
        raise


def stuck_in_native_code(config, reporter):
    """Reports once, records its pid, then hangs in C code that holds the GIL: no thread of the trial runs."""
    import ctypes

    reporter(score=1.0)
    (reporter.trial_dir / f"pid_{os.getpid()}").write_text(str(os.getpid()))
    ctypes.PyDLL(None).sleep(10**6)  # PyDLL: the GIL stays held


def report_then_wait(config, reporter):
    """Reports ``score = x`` at step 1, waits (at most ``wait_s``) for the file ``go`` in its trial directory, then
    reports ``steps - 1`` more results: a test checks what MLflow holds while the trial runs, then lets it go on."""
    reporter(score=float(config["x"]), step=1)
    deadline = time.monotonic() + config.get("wait_s", 240.0)
    while not (reporter.trial_dir / "go").exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no 'go' file in {reporter.trial_dir} after {config.get('wait_s', 240.0)} s")
        time.sleep(0.05)
    for step in range(2, config.get("steps", 3) + 1):
        reporter(score=float(config["x"] * step), step=step)


def _tracking_processes(orchestrator_pid: int) -> list[int]:
    """Pids of the tracking processes the orchestrator started (children running tracking_entry)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == orchestrator_pid and "tracking_entry" in cmdline:
            found.append(int(entry.name))
    return found


def kill_tracking_then_train(config, reporter):
    """Trial 0 (``x`` 0) kills the study's tracking process (SIGKILL) after its first result; every trial reports 5 results."""
    for i in range(5):
        reporter(score=float(i + config["x"]))
        if config["x"] == 0 and i == 0:
            for pid in _tracking_processes(orchestrator_pid()):
                os.kill(pid, signal.SIGKILL)
            time.sleep(0.5)


def seeded(config, reporter):
    """A score that depends on the seed: ``score = x * step + bonus``, where ``bonus`` is ``lucky`` for the
    configuration ``x == lucky_x`` on the seeds ``lucky_seeds`` only (a luck the other seeds do not reproduce).

    Records ``config["seed"]`` in ``seeds.txt`` of its directory; checkpoints as ``counter``.
    """
    seed = config["seed"]
    with open(reporter.trial_dir / "seeds.txt", "a") as f:
        f.write(f"{seed}\n")
    lucky = config.get("x") == config.get("lucky_x") and seed in config.get("lucky_seeds", [])
    bonus = config.get("lucky", 0.0) if lucky else 0.0
    for step in range(_start(reporter), config.get("steps", 3)):
        time.sleep(config.get("sleep", 0.0))
        try:
            reporter(score=config.get("x", 1.0) * (step + 1) + bonus, step=step + 1)
        finally:
            _save(reporter, step + 1)
