"""MLflow logging cost of one trial: 200 iterations of 30 metrics, batched (rltune) vs one call per metric.

Variants, each in a fresh subprocess, seeds interleaved (``--repeats`` rounds):

- ``rltune-batched``: ``TrialTracker.log_result(result)`` per iteration, one
  ``MlflowClient.log_batch`` call for the iteration's metrics (what the
  orchestrator's trials do).
- ``per-metric``: one ``MlflowClient.log_metric(run_id, key, value, step)``
  call per metric (the peer: a logger that sends each result key on its own,
  as per-key MLflow loggers of tuning tools do).

Both log the same flattened result (30 numeric entries, nested keys as in a
PPO result) at ``step = training_iteration`` into a fresh run of a fresh
store; only the logging loop is timed (imports, store creation and run
creation are not). Each run checks afterwards that every value was stored.

Stores: ``sqlite`` (the default embedded store under the results dir) and,
with ``--with-server``, an ``mlflow server`` started on 127.0.0.1 for the
benchmark (HTTP + SQLite), stopped at the end. Measured on 2 busy cores
(load ~4): about 1.5 min for SQLite (3 rounds; the per-metric variant makes
6,000 commits per run), 5 more with ``--with-server``; ``--quick``: 50
iterations, 1 round, SQLite, about 40 s::

    .venv/bin/python benchmarks/bench_tracking.py
    .venv/bin/python benchmarks/bench_tracking.py --with-server --repeats 3
    .venv/bin/python benchmarks/bench_tracking.py --quick
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import (  # noqa: E402
    base_parser,
    child_main,
    finish,
    fmt_ratio,
    machine_info,
    markdown_block,
    ok,
    print_header,
    ratio,
    run_all,
    text_table,
)

VARIANTS = ("rltune-batched", "per-metric")
TARGET_RATIO = 5.0  # batched must be at least this many times faster than one call per metric (SQLite)


def make_result(iteration: int, n_metrics: int) -> dict[str, Any]:
    """A PPO-like result with ``n_metrics`` numeric leaves (learner stats and custom metrics nested)."""
    result: dict[str, Any] = {"training_iteration": iteration, "timesteps_total": 4000 * iteration}
    learner: dict[str, float] = {}
    custom: dict[str, float] = {}
    flat_keys = ["episode_reward_mean", "episode_reward_min", "episode_reward_max", "episode_len_mean",
                 "episodes_this_iter", "time_this_iter_s", "time_total_s", "env_steps_per_s"]
    i = 0
    while len(result) + len(learner) + len(custom) < n_metrics:
        if i < len(flat_keys):
            result[flat_keys[i]] = float(iteration * (i + 1))
        elif i % 2:
            learner[f"stat_{i}"] = 1.0 / (iteration + i)
        else:
            custom[f"metric_{i}_mean"] = float(i) + 0.1 * iteration
        i += 1
    result["info"] = {"learner": {"default_policy": learner}}
    result["custom_metrics"] = custom
    return result


# -- child: one measurement ------------------------------------------------------------------
def run_task(task: dict[str, Any]) -> dict[str, Any]:
    from mlflow import MlflowClient

    from rltune.tracking import TrialTracker, flatten_metrics, make_client

    uri = task["uri"]
    if uri.startswith("sqlite:///"):
        db = Path(uri[len("sqlite:///"):])
        shutil.copy(task["template"], db)  # a fresh, migrated store
    client: MlflowClient = make_client(uri)
    experiment = client.create_experiment(f"bench-{task['variant']}-{task['seed']}-{time.time_ns()}",
                                          artifact_location=Path(task["tmp"]).as_uri())
    run_id = client.create_run(experiment).info.run_id
    results = [make_result(i, task["metrics"]) for i in range(1, task["iterations"] + 1)]
    n_values = sum(len(flatten_metrics(r)) for r in results)
    if task["variant"] == "rltune-batched":
        tracker = TrialTracker(run_id, uri)
        tracker._shared.client = client
        start = time.perf_counter()
        for result in results:
            tracker.log_result(result)
        elapsed = time.perf_counter() - start
        lost = len(tracker.unrecorded)
    else:
        start = time.perf_counter()
        for result in results:
            step = result["training_iteration"]
            for key, value in flatten_metrics(result).items():
                client.log_metric(run_id, key, value, step=step)
        elapsed = time.perf_counter() - start
        lost = 0
    history = client.get_metric_history(run_id, "episode_reward_mean")
    stored = len(client.get_run(run_id).data.metrics)
    if len(history) != task["iterations"] or stored != task["metrics"] or lost:
        raise RuntimeError(f"not everything was stored: {len(history)} steps, {stored} metric keys, {lost} lost")
    return {"seconds": elapsed, "values": n_values, "calls": task["iterations"] if task["variant"] == "rltune-batched"
            else n_values}


def make_template(task: dict[str, Any]) -> dict[str, Any]:
    from mlflow import MlflowClient

    MlflowClient(f"sqlite:///{task['template']}").search_experiments()  # creates and migrates the store
    return {}


def dispatch(task: dict[str, Any]) -> dict[str, Any]:
    return make_template(task) if task["variant"] == "template" else run_task(task)


# -- parent ------------------------------------------------------------------------------------
class Server:
    """``mlflow server`` on 127.0.0.1 (no job execution) for the ``--with-server`` store."""

    def __init__(self, directory: Path, template: Path) -> None:
        shutil.copy(template, directory / "server.db")
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        self.uri = f"http://127.0.0.1:{port}"
        env = dict(os.environ, MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false", MLFLOW_DISABLE_TELEMETRY="true")
        self.log = open(directory / "server.log", "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", f"sqlite:///{directory / 'server.db'}",
             "--artifacts-destination", str(directory / "artifacts"), "--host", "127.0.0.1", "--port", str(port),
             "--workers", "1"],
            stdout=self.log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        deadline = time.monotonic() + 180
        while True:
            try:
                with opener.open(f"{self.uri}/health", timeout=2):
                    return
            except (urllib.error.URLError, OSError):
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise SystemExit(f"mlflow server did not start; see {directory / 'server.log'}")
                time.sleep(0.25)

    def stop(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=20)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.log.close()


def main() -> None:
    parser = base_parser(__doc__)
    parser.add_argument("--iterations", type=int, default=200, help="iterations logged per trial (default 200)")
    parser.add_argument("--metrics", type=int, default=30, help="numeric entries per result (default 30)")
    parser.add_argument("--repeats", type=int, default=3, help="rounds of both variants per store (default 3)")
    parser.add_argument("--with-server", action="store_true", help="also measure against a local mlflow server")
    parser.add_argument("--quick", action="store_true", help="50 iterations, 1 round (a smoke test)")
    args = parser.parse_args()
    if args.quick:
        args.iterations, args.repeats = 50, 1
    script = os.path.abspath(__file__)
    info = machine_info()
    from importlib import metadata

    print_header("MLflow logging of one trial: batched vs one call per metric", info, [
        f"mlflow {metadata.version('mlflow')}; {args.iterations} iterations x {args.metrics} metrics, "
        f"{args.repeats} round(s) per store; stores: sqlite{' and server' if args.with_server else ''}",
    ])
    records: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="rltune_bench_tracking_") as tmp:
        template = Path(tmp) / "template.db"
        prep = run_all(script, [{"variant": "template", "template": str(template)}], lambda t, r: "store ready",
                       verbose=args.verbose)
        if "error" in prep[0]:
            raise SystemExit("could not create the MLflow store")
        stores = {"sqlite": None}
        server = None
        try:
            if args.with_server:
                server_dir = Path(tmp) / "server"
                server_dir.mkdir()
                server = Server(server_dir, template)
                stores["server"] = server.uri
            for store, server_uri in stores.items():
                tasks = []
                for seed in range(args.repeats):
                    for variant in VARIANTS:
                        run_tmp = Path(tmp) / f"{store}-{variant}-{seed}"
                        run_tmp.mkdir()
                        uri = server_uri or f"sqlite:///{run_tmp / 'mlflow.db'}"
                        tasks.append({"variant": variant, "seed": seed, "store": store, "uri": uri, "tmp": str(run_tmp),
                                      "template": str(template), "iterations": args.iterations, "metrics": args.metrics})
                print(f"-- store: {store}")
                records += run_all(script, tasks, lambda t, r: f"{r['seconds']:.2f} s ({r['calls']} calls)",
                                   timeout=1800, verbose=args.verbose)
        finally:
            if server is not None:
                server.stop()
    rows = []
    for store in stores:
        in_store = [r for r in records if r.get("store") == store]
        medians = {v: statistics.median([r["seconds"] for r in ok(in_store, v)]) if ok(in_store, v) else float("nan")
                   for v in VARIANTS}
        per_iter = {v: 1000 * medians[v] / args.iterations for v in VARIANTS}
        rows.append([store, f"{medians['rltune-batched']:.2f} s ({per_iter['rltune-batched']:.1f} ms/iter)",
                     f"{medians['per-metric']:.2f} s ({per_iter['per-metric']:.1f} ms/iter)",
                     fmt_ratio(ratio(medians["per-metric"], medians["rltune-batched"]))])
    headers = ["store", "rltune batched (median)", "one call per metric (median)", "speed-up"]
    print()
    print(text_table(headers, rows))
    sqlite_ratio = ratio(*[statistics.median([r["seconds"] for r in ok(
        [r for r in records if r.get("store") == "sqlite"], v)] or [float("nan")]) for v in ("per-metric", "rltune-batched")])
    print(f"\ntarget: batched >= {TARGET_RATIO:.0f}x faster on SQLite: {'PASS' if sqlite_ratio >= TARGET_RATIO else 'FAIL'}"
          f" ({fmt_ratio(sqlite_ratio)})")
    if args.markdown:
        print(markdown_block("bench_tracking", headers, rows, info))
    finish(records, info, args.json)


if __name__ == "__main__":
    if not child_main(dispatch):
        main()
