"""Scale-out on one machine: trials per minute of a study of short trials, 1, 2 and 4 workers on PostgreSQL,
against one orchestrator running the same number of trials at once on the embedded journal storage.

Every variant runs the same study: ``--trials`` function trials of
``--iterations`` x ``--sleep`` s each (a sleeping trainable: the trial's own
work costs no CPU, so what is measured is orchestration: process start-up,
storage round trips, heartbeats, pruning decisions). MLflow tracking is off.

- ``pg-N``: N ``rltune tune`` workers on one PostgreSQL study (each runs one
  trial at a time), started together;
- ``journal-N``: one ``rltune tune`` on the embedded journal storage with
  ``--max-concurrent N``.

Printed per variant: wall time from the first launch to the last worker's
exit, trials per minute, and the orchestration overhead per trial:
``(wall x N - trials x trial time) / trials``. The ratio column compares
pg-N with journal-N (same parallelism). Needs a PostgreSQL server:
``bash scripts/postgres.sh`` prints its URL (pass it with ``--url`` or
``RLTUNE_TEST_POSTGRES_URL``); each PostgreSQL run gets a fresh database.

    .venv/bin/python benchmarks/bench_shared_storage.py     # ~4 min
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

TRAINABLE = """
import os, time

def nap(config, reporter):
    for i in range(int(os.environ["BENCH_ITERATIONS"])):
        time.sleep(float(os.environ["BENCH_SLEEP"]))
        reporter(score=config["x"] + i)
"""


def study(directory: Path, trials: int) -> Path:
    (directory / "bench_trainables.py").write_text(TRAINABLE)
    path = directory / "bench.yaml"
    path.write_text(textwrap.dedent(f"""\
        name: bench
        run: "bench_trainables:nap"
        metric: score
        mode: max
        n_trials: {trials}
        search_alg: random
        tracking: false
        config:
          x: {{uniform: [0.0, 1.0]}}
        """))
    return path


def database(base: str) -> tuple[str, str]:
    import psycopg

    name = f"rltune_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return name, urlunsplit(urlsplit(base)._replace(path=f"/{name}"))


def drop(base: str, name: str) -> None:
    import psycopg

    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def run(variant: str, workers: int, args: argparse.Namespace) -> float:
    with tempfile.TemporaryDirectory(prefix="rltune_bench_shared_") as tmp:
        path = study(Path(tmp), args.trials)
        env = {**os.environ, "PYTHONPATH": tmp, "BENCH_ITERATIONS": str(args.iterations),
               "BENCH_SLEEP": str(args.sleep), "RLTUNE_TRACKING": "0"}
        base = [sys.executable, "-m", "rltune.orchestrator.cli", "tune", str(path), "--quiet",
                "--results-dir", str(Path(tmp) / "results")]
        name = None
        if variant == "pg":
            name, url = database(args.url)
            commands = [base + ["--storage", url, "--max-concurrent", "1"] for _ in range(workers)]
        else:
            commands = [base + ["--max-concurrent", str(workers)]]
        start = time.perf_counter()
        procs = [subprocess.Popen(c, env=env, cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                 for c in commands]
        for p in procs:
            _, err = p.communicate()
            if p.returncode != 0:
                raise SystemExit(f"{variant}-{workers} failed: {err[-2000:]}")
        wall = time.perf_counter() - start
        if name is not None:
            drop(args.url, name)
        return wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=os.environ.get("RLTUNE_TEST_POSTGRES_URL"),
                        help="a PostgreSQL database URL whose role may create databases")
    parser.add_argument("--trials", type=int, default=24)
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--sleep", type=float, default=0.2, help="seconds per iteration")
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    if not args.url:
        raise SystemExit("no PostgreSQL URL: run `bash scripts/postgres.sh` and pass its last line with --url")
    print(f"load average at start: {os.getloadavg()[0]:.2f}; {args.trials} trials of "
          f"{args.iterations} x {args.sleep} s; {os.cpu_count()} CPUs")
    trial_time = args.iterations * args.sleep
    walls: dict[tuple[str, int], list[float]] = {}
    for r in range(args.repeats):
        for n in (int(w) for w in args.workers.split(",")):
            for variant in ("journal", "pg"):
                wall = run(variant, n, args)
                walls.setdefault((variant, n), []).append(wall)
                print(f"round {r + 1} {variant}-{n}: {wall:.2f} s", flush=True)
    print("\n| variant | workers x trials at once | wall s (median) | trials/min | overhead per trial s | journal / pg time |")
    print("| --- | --- | --- | --- | --- | --- |")
    for (variant, n), values in sorted(walls.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        wall = statistics.median(values)
        overhead = (wall * n - args.trials * trial_time) / args.trials
        ratio = ""
        if variant == "pg":
            ratio = f"{statistics.median(walls[('journal', n)]) / wall:.2f}x"
        layout = f"{n} worker(s) x 1" if variant == "pg" else f"1 x {n}"
        print(f"| {variant}-{n} | {layout} | {wall:.2f} | {60 * args.trials / wall:.1f} | {overhead:.2f} | {ratio} |")


if __name__ == "__main__":
    main()
