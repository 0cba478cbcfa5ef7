"""Warm start (rltune._warm): a child forked from the template is the process a cold start makes.

Same stdio (C-level writes too), environment, working directory, umask,
sys.path, session, torch thread settings, exit codes of a crash, and it dies
with the process that asked for it; only its parent (the template) and its
numpy seed (fresh, as a cold process's) differ by design.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from processes import kill_left, process_alive, wait_gone

from rltune import _ipc, _warm
from rltune._ipc import ChannelClosed

TESTS = Path(__file__).parent
PRELOAD = ["numpy", "torch", "rltune._ipc"]


@pytest.fixture(scope="module")
def template():
    started = _warm.Template.start(PRELOAD)
    assert started.wait_ready(300), started.failed
    yield started
    started.close()


def _start(template, entry: str, out: Path | None = None, **kwargs):
    stdio = {} if out is None else {"stdout": open(out, "ab"), "stderr": subprocess.STDOUT}
    try:
        proc, channel = _warm.spawn(f"warm_entries:{entry}", template=template, stdin=subprocess.DEVNULL,
                                    new_session=True, **stdio, **kwargs)
    finally:
        if stdio:
            stdio["stdout"].close()
    _ipc.send_init(channel, b"the payload")
    return proc, channel


def _describe(template, out: Path, env: dict[str, str] | None = None):
    proc, channel = _start(template, "describe", out, env=env)
    try:
        assert channel.poll(120), out.read_text()
        return proc, channel.receive()
    finally:
        channel.close()
        proc.wait(30)


def test_a_warm_child_has_the_stdio_environment_cwd_session_and_threads_of_a_cold_one(template, tmp_path, monkeypatch):
    # all set after the template started: the child gets this process's, not the template's
    monkeypatch.setenv("RLTUNE_TEST_VALUE", "set after the template started")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    old_mask = os.umask(0o027)
    try:
        warm_proc, warm = _describe(template, tmp_path / "warm.log")
        cold_env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]))
        cold_proc, cold = _describe(None, tmp_path / "cold.log", env=cold_env)
    finally:
        os.umask(old_mask)
    assert isinstance(warm_proc, _warm.WarmProcess) and isinstance(cold_proc, subprocess.Popen)
    assert warm["ppid"] != os.getpid() and cold["ppid"] == os.getpid()  # the template is the warm one's parent
    for child in (warm, cold):
        assert child["sid"] == child["pgid"] == child["pid"]  # a session of its own: Ctrl-C is not for it
        assert child["cwd"] == str(tmp_path) and child["umask"] == 0o027
        assert child["env"]["RLTUNE_TEST_VALUE"] == "set after the template started"
        assert child["sys_path"] == sys.path and child["payload"] == b"the payload"
        assert child["modules"] == [] and child["product_finite"]
        assert "from warm_entries import describe" in child["cmdline"]
    assert warm["threads"] == cold["threads"]  # torch's intra-op and inter-op pool sizes
    assert set(warm["env"]) == set(os.environ)
    for name in ("warm", "cold"):
        log = (tmp_path / f"{name}.log").read_text()
        for line in ("stdout of python", "stderr of python", "stdout of os.write", "stdout of C puts"):
            assert line in log, (name, log)
    assert warm_proc.returncode == cold_proc.returncode


def test_each_warm_child_seeds_numpy_afresh_as_a_cold_process_does(template, tmp_path):
    draws = {_describe(template, tmp_path / f"{i}.log")[1]["numpy_draw"] for i in range(2)}
    assert len(draws) == 2


@pytest.mark.parametrize("entry, code, text", [
    ("segfault", -signal.SIGSEGV, ""),
    ("exit_3", 3, ""),
    ("raise_error", 1, "RuntimeError: raised in the child"),
])
def test_a_warm_child_that_crashes_exits_as_a_cold_one(template, tmp_path, entry, code, text):
    proc, channel = _start(template, entry, tmp_path / "out.log")
    try:
        with pytest.raises(ChannelClosed):
            channel.receive()
        assert proc.wait(60) == code
        assert proc.poll() == code
        assert text in (tmp_path / "out.log").read_text()
    finally:
        channel.close()


def test_kill_and_wait_of_a_warm_child(template, tmp_path):
    proc, channel = _start(template, "describe", tmp_path / "out.log")
    try:
        assert channel.poll(120)
        assert proc.poll() is None
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(0.1)
        os.killpg(proc.pid, signal.SIGKILL)  # as the orchestrator kills a trial: its whole group
        assert proc.wait(30) == -signal.SIGKILL
    finally:
        channel.close()


def test_a_warm_child_dies_with_the_process_that_asked_for_it_sigkill_included(tmp_path):
    script = textwrap.dedent(f"""
        import subprocess, sys, time
        sys.path.insert(0, {str(TESTS)!r})
        from rltune import _ipc, _warm
        template = _warm.Template.start({PRELOAD!r})
        assert template.wait_ready(300)
        proc, channel = _warm.spawn("warm_entries:describe", template=template, new_session=True,
                                     stdout=subprocess.DEVNULL)
        _ipc.send_init(channel, b"")
        print(channel.receive()["pid"], template._proc.pid, flush=True)
        time.sleep(300)
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    pids: list[int] = []
    try:
        pids = [int(p) for p in parent.stdout.readline().split()]
        assert len(pids) == 2 and all(process_alive(p) for p in pids)
        parent.kill()
        parent.wait(30)
        assert wait_gone(pids, 30) == [], "the warm child or its template outlived their SIGKILLed parent"
    finally:
        parent.kill()
        kill_left(pids)


def test_a_child_whose_startup_variables_differ_from_the_template_s_starts_cold(template, tmp_path):
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(TESTS))  # read when the template imported torch
    proc, info = _describe(template, tmp_path / "out.log", env=env)
    assert isinstance(proc, subprocess.Popen) and info["ppid"] == os.getpid()


def test_a_process_whose_startup_variables_changed_gets_a_template_of_its_own_and_keeps_the_first(
        tmp_path, monkeypatch):
    # torch.compile sets TORCHINDUCTOR_CACHE_DIR in the process that compiles: a study started after it in the
    # same process got cold trials only, from the template started before (an order-dependent test failure)
    monkeypatch.setenv("RLTUNE_WARM_START", "wait")
    monkeypatch.setattr(_warm, "_templates", {})
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)  # set by an earlier test's compile, if any
    light = ["rltune._ipc"]
    before = _warm.template_for(light)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    after = _warm.template_for(light)
    try:
        assert after is not before and before.usable()
        assert _warm.template_for(light) is after  # one per set of start-up variables, not one per child
        proc, info = _describe(after, tmp_path / "after.log")
        assert isinstance(proc, _warm.WarmProcess) and info["env"]["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "inductor")
        env = {k: v for k, v in os.environ.items() if k != "TORCHINDUCTOR_CACHE_DIR"}
        assert _warm.template_for(light, env) is before  # a child of the first environment: the first template
        proc, info = _describe(before, tmp_path / "before.log", env=env)
        assert isinstance(proc, _warm.WarmProcess) and "TORCHINDUCTOR_CACHE_DIR" not in info["env"]
    finally:
        for template in _warm._templates.values():
            template.close()


def test_children_of_ever_new_startup_variables_start_cold_past_a_few_templates(monkeypatch):
    monkeypatch.setattr(_warm, "_templates", {})
    monkeypatch.setattr(_warm, "MAX_TEMPLATES", 2)
    monkeypatch.setattr(_warm.Template, "start", classmethod(lambda cls, preload, startup=None: _Started()))
    started = [_warm.template_for(["x"], dict(os.environ, OMP_NUM_THREADS=str(n))) for n in range(1, 4)]
    assert started[0] is not None and started[1] is not None and started[2] is None


class _Started:
    """A template as template_for sees it, without a process."""

    def usable(self) -> bool:
        return True


def test_a_child_given_its_own_cuda_devices_still_starts_warm(template, tmp_path):
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="1")  # read when CUDA initializes, which the template never does
    proc, info = _describe(template, tmp_path / "out.log", env=env)
    assert isinstance(proc, _warm.WarmProcess) and info["env"]["CUDA_VISIBLE_DEVICES"] == "1"


def test_warm_start_is_off_with_rltune_warm_start_0(monkeypatch):
    monkeypatch.setenv("RLTUNE_WARM_START", "0")
    assert _warm.template_for(PRELOAD) is None and _warm.local_template() is None
    monkeypatch.setenv("RLTUNE_WARM_START", "1")
    assert _warm.enabled()
