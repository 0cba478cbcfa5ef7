"""``run_ui`` (``rltune ui``) in a real headless Chromium: the link it prints opens the study's runs with every trial
listed (not MLflow 3's GenAI pages), a trial's metric charts, the study run's plots (the pages and PNGs of
scripts/ui_screenshots.py); Ctrl-C.

Needs the Debian packages ``chromium`` and ``chromium-driver`` and the
``selenium`` package (the test extra). Without them the browser test is
skipped, except under CI (``CI`` set), where it must run. Selenium is
given the browser and driver paths, so it never downloads either.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from mounts import read_only

from rltune.errors import ConfigError
from rltune.tracking._ui import run_ui, stop_process_tree
from rltune.tracking._ui_links import experiment_url

from ._study import STUDY
from .conftest import answers, free_port, mlflow_env, new_store

UI_START_TIMEOUT_S = 180.0
PAGE_TIMEOUT_S = 90.0


def _browser() -> tuple[str, str]:
    """Paths of chromium and chromedriver; skip (or fail under CI) when they or selenium are missing."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    try:
        import selenium  # noqa: F401
        has_selenium = True
    except ImportError:
        has_selenium = False
    missing = [name for name, ok in (("chromium", chromium), ("chromium-driver", driver), ("selenium", has_selenium))
               if not ok]
    if missing:
        reason = (f"no {', '.join(missing)}: apt-get install -y chromium chromium-driver and "
                  f".venv/bin/pip install -e '.[test]' to run the browser test")
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the browser test, but there is {reason}")
        pytest.skip(reason)
    return chromium, driver


class RunUI:
    """``run_ui`` in a child process (as ``rltune ui`` would run), its stdout read line by line."""

    def __init__(self, results_dir: Path, port: int) -> None:
        code = "import sys; from rltune.tracking._ui import run_ui; sys.exit(run_ui(sys.argv[1], int(sys.argv[2])))"
        self.proc = subprocess.Popen([sys.executable, "-c", code, str(results_dir), str(port)],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     env=mlflow_env(), start_new_session=True, preexec_fn=_default_sigint)
        self.lines: queue.Queue[str] = queue.Queue()
        self.output: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line)

    def wait_for(self, text: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.5)
            except queue.Empty:
                if self.proc.poll() is not None:
                    break
                continue
            self.output.append(line)
            if text in line:
                return line
        raise AssertionError(f"run_ui never printed {text!r}; its output:\n{''.join(self.output)}")

    def interrupt(self) -> int:
        """Ctrl-C: SIGINT to the run_ui process; its exit status."""
        self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"run_ui did not stop within 60 s of SIGINT ({_sigint_disposition(self.proc.pid)}); "
                                 f"its output so far:\n{''.join(self.output)}") from None
        finally:
            stop_process_tree(self.proc)  # whatever is left if it did not stop (a failing test)
            while not self.lines.empty():
                self.output.append(self.lines.get())


def _default_sigint() -> None:
    """In the UI's process: Ctrl-C acts as in a terminal, even when pytest runs where SIGINT is ignored.

    A shell without job control starts a background job (``.ci/run &``) with
    SIGINT ignored, and every process below inherits that; ``rltune ui``
    respects it, as a background command should.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _sigint_disposition(pid: int) -> str:
    """Whether process ``pid`` ignores, catches or takes the default action on SIGINT (from /proc)."""
    try:
        fields = dict(line.split(":\t", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":\t" in line)
    except OSError:
        return "process gone"
    bit = 1 << (signal.SIGINT - 1)
    if int(fields["SigIgn"], 16) & bit:
        return "SIGINT ignored"
    return "SIGINT caught" if int(fields["SigCgt"], 16) & bit else "SIGINT default"


@pytest.fixture(scope="session")
def browser() -> tuple[str, str]:
    """Checked before the (session) study fixture, so that a skip costs nothing."""
    return _browser()


def _screenshots_script():
    """scripts/ui_screenshots.py as a module (scripts/ is no package)."""
    path = Path(__file__).resolve().parents[2] / "scripts" / "ui_screenshots.py"
    spec = importlib.util.spec_from_file_location("ui_screenshots", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_ui_opens_the_study_on_its_trials_a_trial_on_its_charts_and_the_study_run_on_its_plots(
        browser, local_study, tmp_path):
    """``rltune ui`` as a user runs it: the link it prints, then the pages of scripts/ui_screenshots.py."""
    chromium, driver_path = browser
    shots = _screenshots_script()
    port = free_port()
    ui = RunUI(local_study["results_dir"], port)
    driver = None
    try:
        line = ui.wait_for("MLflow UI for", UI_START_TIMEOUT_S)
        url = f"http://127.0.0.1:{port}"
        assert url in line and local_study["tracking_uri"] in line
        link = ui.wait_for(f"study '{STUDY}': ", 60).split(": ", 1)[1].strip()
        assert link == experiment_url(url, local_study["experiment_id"])
        assert "workflowType=machine_learning" in link  # MLflow 3's "Model training" view, not its GenAI pages
        assert "Model training" in ui.wait_for("Assistant", 10)  # where to click, for the pages without the link
        driver = shots.chrome(chromium, driver_path, tempfile.mkdtemp(prefix="rltune_chromium_", dir=tmp_path))
        pages = shots.capture(driver, local_study["tracking_uri"], url, STUDY, tmp_path, timeout=PAGE_TIMEOUT_S)
    finally:
        if driver is not None:
            driver.quit()
        status = ui.interrupt()
    # what docs/mlflow-ui.md says a first visit without the link shows: the GenAI/Model training switch, the Assistant
    assert "Model training" in pages["first-visit"] and pages["assistant_was_open"] == "yes"
    # the experiment: on its runs, every trial listed without a click (not folded under the study's run)
    experiment = pages["experiment"]
    for number in range(3):
        assert f"trial_{number:05d} lr=" in experiment
    assert STUDY in experiment and "Sort: Run Name" in experiment and "Model training" in experiment
    assert "Detect Issues" not in experiment and "Token Usage" not in experiment  # not the GenAI traces overview
    # its chart view, a trial's metric charts, the study run's plots
    assert "trial_00002" in pages["charts"] and "Step" in pages["charts"]
    trial = " ".join(pages["trial"].split())
    assert "trial_00000 lr=" in trial and "Model metrics" in trial
    # a chart per metric, grouped by prefix (the sections below the first ones are drawn when scrolled to)
    for shown in ("custom_metrics (3)", "pole_angle_mean", "info/learner/default_policy (12)", "clip_fraction", "Step"):
        assert shown in trial, shown
    plots = pages["plots"]
    assert "trials.csv" in plots and "optimization_history.png" in plots
    for name in shots.PAGES.values():
        assert (tmp_path / name).stat().st_size > 10_000, name
    assert status == 0, "".join(ui.output)
    assert "stopping the MLflow UI" in "".join(ui.output)
    assert not answers(f"http://127.0.0.1:{port}/health")  # Ctrl-C stopped the server too


def test_ui_on_a_busy_port_is_a_config_error(tmp_path):
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        with pytest.raises(ConfigError, match=r"port \d+ on 127.0.0.1 is in use; pass --port"):
            run_ui(tmp_path, busy.getsockname()[1])


def test_ui_of_a_server_store_only_prints_its_address(tmp_path):
    import io

    out = io.StringIO()
    assert run_ui(tmp_path, 5000, "http://mlflow.example:5000", out=out) == 0
    assert "MLflow server http://mlflow.example:5000" in out.getvalue()
    assert not (tmp_path / "mlflow_ui.log").exists()


def _gone(url: str, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not answers(url):
            return True
        time.sleep(0.5)
    return False


def test_the_server_dies_with_a_sigkilled_rltune_ui(template_db, tmp_path):
    """kill -9 of ``rltune ui`` takes its MLflow server along: the port is free for the next one."""
    results = new_store(template_db, tmp_path / "results")
    port = free_port()
    ui = RunUI(results, port)
    servers: list[int] = []
    try:
        ui.wait_for("MLflow UI for", UI_START_TIMEOUT_S)
        assert answers(f"http://127.0.0.1:{port}/health")
        servers = [int(pid) for pid in Path(f"/proc/{ui.proc.pid}/task/{ui.proc.pid}/children").read_text().split()]
        os.kill(ui.proc.pid, signal.SIGKILL)
        assert _gone(f"http://127.0.0.1:{port}/health", 30), "the MLflow server outlived rltune ui"
    finally:
        stop_process_tree(ui.proc)
        for pid in servers:  # each leads its own process group (a failing test must not leave it running)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)


def test_ui_serves_a_read_only_results_dir(local_study, tmp_path):
    """Browsing results one may not change: the server's log goes to the temporary directory instead."""
    results = tmp_path / "results"
    shutil.copytree(local_study["results_dir"], results)
    port = free_port()
    with read_only(results):
        ui = RunUI(results, port)
        try:
            line = ui.wait_for("MLflow UI for", UI_START_TIMEOUT_S)
            assert f"http://127.0.0.1:{port}" in line
            assert f"study '{STUDY}': " in ui.wait_for(f"study '{STUDY}': ", 60)
        finally:
            assert ui.interrupt() == 0, "".join(ui.output)
    assert not (results / "mlflow_ui.log").exists()
