"""Screenshots of the MLflow UI on a study, as `rltune ui` serves it (docs/mlflow-ui.md shows and describes them).

    .venv/bin/python scripts/ui_screenshots.py                     # runs a 6-trial study first (about a minute)
    .venv/bin/python scripts/ui_screenshots.py --results-dir ~/rltune_results --study cartpole-ppo-tpe-asha

It starts the MLflow UI on the results directory's store (127.0.0.1, a free
port), opens five pages in headless Chromium at 1280x800 and writes them to
--out (default docs/images): the study's experiment as a first visit of
MLflow's UI shows it (mlflow-ui-first-visit.png), on the link `rltune ui`
prints (mlflow-ui-experiment.png) and in its chart view
(mlflow-ui-experiment-charts.png), the best trial's metric charts
(mlflow-ui-trial.png) and a plot among the study run's artifacts
(mlflow-ui-study-plots.png). After the first one it closes the MLflow
Assistant panel, as docs/mlflow-ui.md tells users to. Needs Debian's
chromium and chromium-driver (`apt-get install -y chromium chromium-driver`)
and selenium (`.venv/bin/pip install -e '.[test]'`); Selenium is given both
paths, so it downloads nothing. tests/tracking/test_ui.py drives the same
pages (`capture`) and checks what they show.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
STUDY_FILE = ROOT / "studies" / "cartpole-ppo-tpe-asha.yaml"
VIEWPORT = (1280, 800)
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage", "--no-proxy-server", "--hide-scrollbars"]
PAGE_TIMEOUT_S = 90.0
ASSISTANT_CLOSE = "[data-component-id='mlflow.assistant.chat_panel.close']"
PAGES = {"first-visit": "mlflow-ui-first-visit.png", "experiment": "mlflow-ui-experiment.png",
         "charts": "mlflow-ui-experiment-charts.png",
         "trial": "mlflow-ui-trial.png", "plots": "mlflow-ui-study-plots.png"}


def browser_paths() -> tuple[str | None, str | None]:
    """Chromium's and chromedriver's paths (None where missing)."""
    return shutil.which("chromium") or shutil.which("chromium-browser"), shutil.which("chromedriver")


def chrome(chromium: str, driver_path: str, profile: str | os.PathLike[str]) -> Any:
    """Headless Chromium with a 1280x800 page and a profile of its own (what a first visit sees)."""
    os.environ["SE_OFFLINE"] = "true"  # Selenium Manager never downloads a browser or driver
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in CHROMIUM_FLAGS + [f"--user-data-dir={profile}", f"--window-size={VIEWPORT[0]},{VIEWPORT[1]}"]:
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": VIEWPORT[0], "height": VIEWPORT[1], "deviceScaleFactor": 1, "mobile": False})
    return driver


def _wait_for_text(driver: Any, texts: list[str], timeout: float) -> str:
    """The page's text once it shows every one of ``texts``."""
    from selenium.webdriver.common.by import By

    deadline = time.monotonic() + timeout
    body = ""
    while time.monotonic() < deadline:
        try:
            body = driver.find_element(By.TAG_NAME, "body").text
        except Exception:  # noqa: BLE001 - the page is still loading
            body = ""
        if all(text in body for text in texts):
            return body
        time.sleep(0.5)
    missing = [text for text in texts if text not in body]
    raise TimeoutError(f"{driver.current_url} did not show {missing} within {timeout:.0f} s; it shows:\n{body[:2000]}")


def _close_assistant(driver: Any) -> bool:
    """Close the MLflow Assistant panel if it is open (after the "Got it" of a GenAI page's tip); whether it was."""
    from selenium.webdriver.common.by import By

    for tip in driver.find_elements(By.XPATH, "//button[normalize-space()='Got it']"):
        tip.click()
        time.sleep(0.5)
    buttons = driver.find_elements(By.CSS_SELECTOR, ASSISTANT_CLOSE)
    if buttons:
        buttons[0].click()
        time.sleep(1.0)
    return bool(buttons)


def _settle(driver: Any, seconds: float = 3.0) -> None:
    """Let charts and images finish drawing (they load after the page's text)."""
    time.sleep(seconds)


def capture(driver: Any, tracking_uri: str, base_url: str, study: str, out_dir: Path | None = None,
            timeout: float = PAGE_TIMEOUT_S) -> dict[str, str]:
    """Open the study's pages; their text by page name (and a PNG each in ``out_dir`` if given).

    ``"first-visit"``: the experiment as MLflow's own links open it, in a
    browser that never chose between GenAI and Model training.
    ``"experiment"``: the link ``rltune ui`` prints for the study; it is
    shown once every trial's run is listed. ``"charts"``: the same in the
    chart view (every metric, a line per run). ``"trial"``: the best trial's
    (else the first trial's) Model metrics tab. ``"plots"``: the study run's
    Artifacts tab with its plots folder open and the first plot previewed.
    ``"assistant_was_open"`` is ``"yes"`` if the first page opened with the
    Assistant panel (then closed, as the docs tell users).
    """
    from selenium.webdriver.common.by import By

    sys.path.insert(0, str(ROOT))
    from rltune.tracking._store import TAG_ROLE, make_client
    from rltune.tracking._ui_links import experiment_url, run_url

    client = make_client(tracking_uri)
    experiment = client.get_experiment_by_name(study)
    if experiment is None:
        raise ValueError(f"no study {study!r} in {tracking_uri}")
    eid = experiment.experiment_id
    runs = client.search_runs([eid])
    parent = next(r for r in runs if r.data.tags.get(TAG_ROLE) == "study")
    trials = sorted((r for r in runs if r.data.tags.get(TAG_ROLE) == "trial"), key=lambda r: r.info.run_name)
    best = parent.data.tags.get("rltune.best_run_id") or trials[0].info.run_id
    texts: dict[str, str] = {}

    def shoot(page: str) -> None:
        if out_dir is not None:
            _settle(driver)
            save_png(driver, out_dir / PAGES[page])

    driver.get(f"{base_url.rstrip('/')}/#/experiments/{eid}")  # the experiment as MLflow links it
    texts["first-visit"] = _wait_for_text(driver, [study, "Model training"], timeout)
    shoot("first-visit")
    texts["assistant_was_open"] = "yes" if _close_assistant(driver) else "no"

    driver.get(experiment_url(base_url, eid))
    texts["experiment"] = _wait_for_text(driver, [study] + [r.info.run_name.split(" ")[0] for r in trials], timeout)
    shoot("experiment")

    driver.get(experiment_url(base_url, eid, charts=True))
    texts["charts"] = _wait_for_text(driver, ["Step", trials[-1].info.run_name.split(" ")[0]], timeout)
    shoot("charts")

    driver.get(run_url(base_url, eid, best, "model-metrics"))
    texts["trial"] = _wait_for_text(driver, ["Model metrics", "Step"], timeout)
    shoot("trial")

    driver.get(run_url(base_url, eid, parent.info.run_id, "artifacts"))
    _wait_for_text(driver, ["plots", "trials.csv"], timeout)
    driver.find_element(By.XPATH, "//*[normalize-space(text())='plots']").click()
    plots = sorted(Path(a.path).name for a in client.list_artifacts(parent.info.run_id, "plots"))
    _wait_for_text(driver, plots[:1], timeout)
    driver.find_element(By.XPATH, f"//*[normalize-space(text())='{plots[0]}']").click()
    _wait_for_image(driver, timeout)
    texts["plots"] = driver.find_element(By.TAG_NAME, "body").text
    shoot("plots")
    return texts


def _wait_for_image(driver: Any, timeout: float) -> None:
    """Until an artifact image is shown in the preview (a loaded <img> wider than 100 px)."""
    deadline = time.monotonic() + timeout
    script = "return Array.from(document.images).some(i => i.complete && i.naturalWidth > 100 && i.width > 100)"
    while time.monotonic() < deadline:
        if driver.execute_script(script):
            return
        time.sleep(0.5)
    raise TimeoutError(f"{driver.current_url} showed no artifact image within {timeout:.0f} s")


def save_png(driver: Any, path: Path) -> Path:
    """The page as a PNG at ``path``, reduced to a 256-colour palette (a few hundred KB at most)."""
    from io import BytesIO

    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    image = Image.open(BytesIO(driver.get_screenshot_as_png())).convert("RGB")
    image.quantize(colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(path, optimize=True)
    return path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _run_study(results_dir: Path) -> str:
    """The README's quick-start study with 6 trials, tracked in ``results_dir``; its name."""
    from rltune.orchestrator.cli import main as rltune

    code = rltune(["tune", str(STUDY_FILE), "--n-trials", "6", "--results-dir", str(results_dir)])
    if code != 0:
        raise SystemExit(f"the study failed (exit status {code})")
    return "cartpole-ppo-tpe-asha"


def _latest_study(tracking_uri: str) -> str:
    from rltune.tracking._ui_links import study_links

    links, _ = study_links(tracking_uri, "http://unused")
    if not links:
        raise SystemExit(f"no rltune study in {tracking_uri}")
    return links[0][0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results-dir", type=Path, help="a results directory with tracked studies (default: run "
                                                         "studies/cartpole-ppo-tpe-asha.yaml with 6 trials in a "
                                                         "temporary one)")
    parser.add_argument("--study", help="the study to show (default: the most recently updated one)")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images", help="default: docs/images")
    args = parser.parse_args(argv)
    chromium, driver_path = browser_paths()
    if chromium is None or driver_path is None:
        raise SystemExit("needs chromium and chromedriver: apt-get install -y chromium chromium-driver")
    sys.path.insert(0, str(ROOT))
    from rltune.tracking._store import resolve_tracking_uri
    from rltune.tracking._ui import start_ui

    with tempfile.TemporaryDirectory(prefix="rltune_ui_screenshots_") as tmp:
        results = args.results_dir or Path(tmp) / "results"
        study = args.study or (_run_study(results) if args.results_dir is None else None)
        uri = resolve_tracking_uri(None, results)
        study = study or _latest_study(uri)
        with start_ui(results, _free_port()) as server:
            driver = chrome(chromium, driver_path, Path(tmp) / "profile")
            try:
                capture(driver, uri, server.url, study, args.out)
            finally:
                driver.quit()
    for name in PAGES.values():
        path = args.out / name
        print(f"{path} ({path.stat().st_size // 1024} KB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
