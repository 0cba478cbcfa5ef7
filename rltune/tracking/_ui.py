"""``rltune ui``: the MLflow UI on the tracking store of a results directory.

:func:`run_ui` starts ``mlflow ui`` (MLflow's server) on the same store the
studies write to (see :func:`rltune.tracking.resolve_tracking_uri`),
bound to 127.0.0.1, waits until it answers, prints its address and runs
until Ctrl-C (or SIGTERM), then stops the server and its workers. The
server's own log goes to ``<results_dir>/mlflow_ui.log`` (to the temporary
directory when the results are read-only), and the server gets SIGTERM if
this process dies, SIGKILL included (it would keep its port). When the store is
an MLflow server already, there is nothing to start: its address is printed.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, BinaryIO, TextIO

from rltune.errors import ConfigError, RLTuneError
from rltune._parent_death import spawn_arguments
from rltune._secrets import redact_text, redact_url
from rltune.tracking._store import DB_FILE, artifact_root, is_remote, resolve_tracking_uri
from rltune.tracking._ui_links import browser_url, study_links

UI_LOG = "mlflow_ui.log"
START_TIMEOUT_S = 120.0  # the first start on a new store creates its tables (slow on a busy machine)


def ui_command(results_dir: Path, host: str, port: int) -> list[str]:
    """The ``mlflow ui`` command line for the artifact root of ``results_dir``.

    The store is not on it: it may carry a password, and a command line is
    visible to every user (``ps``); :func:`ui_env` passes it.
    """
    root = artifact_root(results_dir).as_uri()
    return [sys.executable, "-m", "mlflow", "ui",
            "--default-artifact-root", root,
            "--artifacts-destination", root,
            "--host", host, "--port", str(port),
            "--workers", "1"]


def ui_env(tracking_uri: str) -> dict[str, str]:
    """The server's environment: the store as ``MLFLOW_BACKEND_STORE_URI`` (what ``mlflow server
    --backend-store-uri`` reads when the flag is not given); MLflow's job execution (GenAI evaluation
    jobs, several worker processes) is off unless the user set MLFLOW_SERVER_ENABLE_JOB_EXECUTION;
    a viewer needs none."""
    env = dict(os.environ, MLFLOW_BACKEND_STORE_URI=tracking_uri)
    env.setdefault("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", "false")
    return env


class UIServer:
    """A running ``mlflow ui`` process: ``url``, ``stop()``; a context manager."""

    def __init__(self, proc: subprocess.Popen, url: str, log_path: Path) -> None:
        self.proc = proc
        self.url = url
        self.log_path = log_path

    def stop(self, timeout: float = 15.0) -> None:
        """Stop the server and every process it started (see :func:`stop_process_tree`)."""
        stop_process_tree(self.proc, timeout=timeout)

    def __enter__(self) -> "UIServer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def stop_process_tree(proc: subprocess.Popen, sig: int = signal.SIGTERM, timeout: float = 15.0) -> None:
    """Stop ``proc`` (started with ``start_new_session``), its process group and every descendant.

    ``sig`` goes to the group; what is left after ``timeout`` s gets SIGKILL.
    Descendants are listed before signalling (from /proc, with their start
    times, so that a reused pid is never hit): MLflow's job runner starts
    its consumers in sessions of their own, outside the server's group.
    """
    tree = _descendants(proc.pid)
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass
    for pid in tree:
        _signal_if_same(pid, tree[pid], sig)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        proc.poll()  # reap the leader
        if proc.returncode is not None and not _group_alive(proc.pid) and not any(
                _start_time(pid) == start for pid, start in tree.items()):
            return
        time.sleep(0.1)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    for pid in tree:
        _signal_if_same(pid, tree[pid], signal.SIGKILL)
    proc.wait(timeout=10)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def _start_time(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return None if fields[0] == "Z" else fields[19]  # a zombie counts as gone
    except (OSError, IndexError):
        return None


def _descendants(root: int) -> dict[int, str]:
    """Every descendant of ``root`` with its start time (empty where /proc is missing)."""
    children: dict[int, list[int]] = {}
    try:
        entries = [int(e) for e in os.listdir("/proc") if e.isdigit()]
    except OSError:
        return {}
    for pid in entries:
        try:
            with open(f"/proc/{pid}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(pid)
    found: dict[int, str] = {}
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        start = _start_time(pid)
        if start is not None and pid not in found:
            found[pid] = start
            todo.extend(children.get(pid, []))
    return found


def _signal_if_same(pid: int, start: str, sig: int) -> None:
    if _start_time(pid) == start:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def start_ui(results_dir: str | os.PathLike[str], port: int = 5000, tracking_uri: str | None = None, *,
             host: str = "127.0.0.1", timeout_s: float = START_TIMEOUT_S) -> UIServer:
    """Start ``mlflow ui`` on the store of ``results_dir`` and return once it answers on ``host:port``."""
    uri = resolve_tracking_uri(tracking_uri, results_dir)
    root = Path(os.path.expanduser(str(results_dir))).resolve()
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"results directory {str(root)!r} cannot be created: {exc.strerror}") from None
    _check_port_free(host, port)
    log, log_path = _open_log(root)
    with log:
        proc = subprocess.Popen(_bound_to_this_process(ui_command(root, host, port)), stdin=subprocess.DEVNULL,
                                stdout=log, stderr=subprocess.STDOUT, env=ui_env(uri),
                                start_new_session=True)  # its own group: we stop it
    server = UIServer(proc, f"http://{host}:{port}", log_path)
    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            raise RLTuneError(f"mlflow ui exited with code {proc.returncode} before it answered; "
                              f"its log is {log_path}:\n{_tail(log_path)}")
        if _answers(f"{server.url}/health"):
            return server
        if time.monotonic() > deadline:
            server.stop()
            raise RLTuneError(f"mlflow ui did not answer on {server.url} within {timeout_s:.0f} s; its log is {log_path}")
        time.sleep(0.25)


def _bound_to_this_process(command: list[str]) -> list[str]:
    """``command`` started so that it gets SIGTERM if this process dies, SIGKILL included (the server
    would keep its port: the next ``rltune ui`` would find it taken)."""
    pid, by_main_thread = spawn_arguments()
    launcher = (f"import sys; from rltune._parent_death import exec_dying_with_parent; "
                f"exec_dying_with_parent({pid}, {by_main_thread!r}, sys.argv[1:])")
    return [sys.executable, "-c", launcher, *command]


def _open_log(root: Path) -> tuple[BinaryIO, Path]:
    """The server's log, in ``root`` or, when ``root`` is read-only (browsing results one may not change),
    in the temporary directory."""
    try:
        return open(root / UI_LOG, "ab"), root / UI_LOG
    except OSError:
        handle = tempfile.NamedTemporaryFile(prefix="rltune-mlflow-ui-", suffix=".log", delete=False)
        return handle, Path(handle.name)


def run_ui(results_dir: str | os.PathLike[str] | None = None, port: int = 5000, tracking_uri: str | None = None, *,
           host: str = "127.0.0.1", out: TextIO | None = None) -> int:
    """``rltune ui``: serve the MLflow UI of ``results_dir``'s store until Ctrl-C; the exit status (0).

    ``results_dir`` None: ``$RLTUNE_RESULTS_DIR`` or ``~/rltune_results``.
    Raises :class:`ConfigError` when the port is taken and
    :class:`RLTuneError` when the server does not start (the CLI turns both
    into one message and exit status 2).
    """
    from rltune._results_dir import default_results_dir

    out = out or sys.stdout
    results = Path(os.path.expanduser(str(results_dir))) if results_dir else default_results_dir()
    uri = resolve_tracking_uri(tracking_uri, results)
    if is_remote(uri):
        print(f"The tracking store is the MLflow server {redact_url(uri)}: open it in a browser (nothing to start).",
              file=out)
        base = browser_url(uri)
        if base is not None:
            print_study_links(uri, base, out)
        return 0
    if uri == resolve_tracking_uri(None, results) and not (results / DB_FILE).exists() and not os.environ.get("MLFLOW_TRACKING_URI"):
        print(f"No study has been tracked in {results} yet; the UI starts on an empty store.", file=out)
    previous = _sigterm_as_interrupt()
    server = None
    try:
        server = start_ui(results, port, tracking_uri, host=host)
        print(f"MLflow UI for {redact_url(uri)}: {server.url}  (Ctrl-C stops it)", file=out, flush=True)
        print_study_links(uri, server.url, out)
        server.proc.wait()
        if server.proc.returncode not in (0, None):
            raise RLTuneError(f"mlflow ui stopped with code {server.proc.returncode}; its log is {server.log_path}:\n"
                              f"{_tail(server.log_path)}")
    except KeyboardInterrupt:
        print("stopping the MLflow UI", file=out, flush=True)
    finally:
        if server is not None:
            server.stop()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    return 0


def print_study_links(tracking_uri: str, base_url: str, out: TextIO) -> None:
    """A line per study with the link that opens on its trials (:mod:`._ui_links`), and where to click once."""
    try:
        links, count = study_links(tracking_uri, base_url)
    except Exception as exc:  # noqa: BLE001 - the UI works without the links
        first = (str(exc).strip().splitlines() or [""])[0]
        print(f"(the studies could not be listed: {type(exc).__name__}: {redact_text(first)})", file=out, flush=True)
        return
    for name, url in links:
        print(f"  study {name!r}: {url}", file=out)
    if count > len(links):
        print(f"  ... and {count - len(links)} more on the Experiments page", file=out)
    if links:
        print("  (these links open the runs of a study with every trial listed; elsewhere, click \"Model training\" "
              "at the top left once, and close the Assistant panel with its x: docs/mlflow-ui.md)", file=out)
    out.flush()


def _sigterm_as_interrupt() -> Any:
    """In the main thread, make SIGTERM stop the UI like Ctrl-C (the server is in its own process group)."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    return signal.signal(signal.SIGTERM, handler)


def _check_port_free(host: str, port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds it
        try:
            sock.bind((host, port))
        except OSError:
            raise ConfigError(f"port {port} on {host} is in use; pass --port with a free port (e.g. --port {port + 1})",
                              where="ui") from None


def _answers(url: str) -> bool:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # 127.0.0.1 never goes through a proxy
    try:
        with opener.open(url, timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return redact_text("\n".join(path.read_text(errors="replace").splitlines()[-lines:]))
    except OSError:
        return ""
