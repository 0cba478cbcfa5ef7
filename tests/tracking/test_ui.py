"""``run_ui`` (``rltune ui``) in a real headless Chromium: the study's experiment, a trial's run, its metrics; Ctrl-C.

Needs the Debian packages ``chromium`` and ``chromium-driver`` and the
``selenium`` package (the test extra). Without them the browser test is
skipped, except under CI (``CI`` set), where it must run. Selenium is
given the browser and driver paths, so it never downloads either.
"""

from __future__ import annotations

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

from rltune.errors import ConfigError
from rltune.tracking._ui import run_ui, stop_process_tree

from ._study import STUDY
from .conftest import answers, free_port, mlflow_env

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage", "--no-proxy-server", "--window-size=1400,1000"]
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


def test_ui_shows_the_study_a_trial_and_its_metrics(browser, local_study, tmp_path, monkeypatch):
    chromium, driver_path = browser
    monkeypatch.setenv("SE_OFFLINE", "true")  # Selenium Manager never downloads a browser or driver
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    port = free_port()
    ui = RunUI(local_study["results_dir"], port)
    driver = None
    profile = tempfile.mkdtemp(prefix="rltune_chromium_", dir=tmp_path)
    try:
        line = ui.wait_for("MLflow UI for", UI_START_TIMEOUT_S)
        url = f"http://127.0.0.1:{port}"
        assert url in line and local_study["tracking_uri"] in line
        options = webdriver.ChromeOptions()
        options.binary_location = chromium
        for flag in CHROMIUM_FLAGS + [f"--user-data-dir={profile}"]:
            options.add_argument(flag)
        driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
        wait = WebDriverWait(driver, PAGE_TIMEOUT_S)
        driver.get(url)
        # MLflow 3 opens on its GenAI pages; the runs table is under "Model training" (MLflow 2 has no switch)
        wait.until(EC.presence_of_element_located((By.XPATH, f"//a[normalize-space()='{STUDY}']")))
        switch = driver.find_elements(By.XPATH, "//*[normalize-space(text())='Model training']")
        if switch:
            switch[0].click()
        wait.until(EC.element_to_be_clickable((By.XPATH, f"//a[normalize-space()='{STUDY}']"))).click()
        # the parent run's row: expand it to show the nested trial runs
        wait.until(EC.presence_of_element_located((By.XPATH, f"//a[normalize-space()='{STUDY}']")))
        trial = "//a[contains(normalize-space(), 'trial_00000 lr=')]"
        if not driver.find_elements(By.XPATH, trial):
            wait.until(EC.element_to_be_clickable(
                (By.XPATH, "//button[contains(@data-component-id, 'runnamecellrenderer')]"))).click()
        wait.until(EC.element_to_be_clickable((By.XPATH, trial))).click()
        wait.until(EC.url_contains(local_study["run_ids"][0]))
        wait.until(EC.presence_of_element_located((By.XPATH, "//*[normalize-space(text())='episode_reward_mean']")))
        wait.until(EC.presence_of_element_located(
            (By.XPATH, "//*[normalize-space(text())='info/learner/default_policy/entropy']")))
        screenshot = tmp_path / "mlflow_ui_trial_run.png"
        assert driver.save_screenshot(str(screenshot))
        assert screenshot.stat().st_size > 10_000
        body = driver.find_element(By.TAG_NAME, "body").text
        assert "COMPLETE" in body and "trial_00000" in body
    finally:
        if driver is not None:
            driver.quit()
        status = ui.interrupt()
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
