"""What the study's MLflow tracking costs its trials, and how far behind it is, by priority and batching, on a loaded machine.

The study: 4 function trials, ``n_jobs`` 2, ``--iterations`` iterations each
of ``--work-ms`` ms of CPU (a busy loop measured on the process's CPU clock)
and a result of 30 numbers, tracked in the default SQLite store (created
beforehand, as a tracked user has one). Beside it, a CPU hog: one busy-loop
process per core, each in a session of its own (as other jobs of a shared
machine are), started before the first variant and stopped after the last.

Variants (``Priority(nice, deadline_s)`` of :mod:`rltune.tracking._priority`
and the tracking process's ``result_hold_s``), each in a fresh process,
interleaved over ``--rounds`` rounds:

- ``off``: no tracking (the trials' baseline);
- ``nice19``: nice 19 while trials run, 0 at the study's end, each result
  sent at once (rltune before issue 24); ``nice10``, ``nice5``, ``nice0``
  the same at a fixed nice 10, 5, 0;
- ``deadline``: nice 19 unless the oldest unrecorded call is over 2 s old;
- ``+hold``: a result waits up to 1 s for more of its trial's results, to go
  in one ``log_batch`` call (``nice19+hold``, ``nice0+hold``,
  ``deadline+hold``: rltune's default).

First, the cost of one MLflow call: the CPU of ``TrialTracker.log_results``
with 1, 5 and 20 results of 30 numbers in one ``log_batch`` call.

Figures per variant (medians over the rounds): the tracking process's CPU
seconds (``/proc`` while it runs, ``wait4``'s rusage at its end) while the
trials ran, of which its start-up (importing mlflow, opening the store and
the study's parent run: until it has handled its first message), per result
after it and per trial, and at the study's end (final plots, parent
run, reconciliation); the start-up's wall time; the lag after it, while
trials ran (age of the oldest unrecorded call, sampled every 0.25 s: median,
95th percentile, max); the wait at the study's end (its last trial's end to
the tracking closed); and the trials' own wall time against ``off`` (what
the tracking took from them: on a machine shared with other work, noise of
+-15% hides it; the CPU seconds are the measure).

    .venv/bin/python benchmarks/bench_tracking_priority.py                 # ~30 min
    .venv/bin/python benchmarks/bench_tracking_priority.py --rounds 1 --variants off,nice19,deadline+hold
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import base_parser, child_main, finish, machine_info, markdown_block, ok, parse_variants, print_header, run_all, text_table  # noqa: E402,E501

# variant -> (tracking, nice, deadline_s, result_hold_s)
VARIANTS: dict[str, tuple[bool, int, float | None, float]] = {
    "off": (False, 0, None, 0.0),
    "nice19": (True, 19, None, 0.0),
    "nice10": (True, 10, None, 0.0),
    "nice5": (True, 5, None, 0.0),
    "nice0": (True, 0, None, 0.0),
    "deadline": (True, 19, 2.0, 0.0),
    "nice19+hold": (True, 19, None, 1.0),
    "nice0+hold": (True, 0, None, 1.0),
    "deadline+hold": (True, 19, 2.0, 1.0),
}
TRIALS = 4
METRICS = 30


def burn(config: dict[str, Any], reporter: Any) -> None:
    """``iterations`` iterations of ``work_ms`` ms of CPU, each reporting 30 numbers."""
    import time

    for i in range(1, config["iterations"] + 1):
        end = time.process_time() + config["work_ms"] / 1000
        while time.process_time() < end:
            pass
        reporter(score=float(i * config["x"]), **{f"m{k}": float(k * i) for k in range(METRICS - 1)})


# -- child: one study ----------------------------------------------------------------------------
def _cpu_s(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def run_study(task: dict[str, Any]) -> dict[str, Any]:
    from rltune import tune
    from rltune.orchestrator import _runner
    from rltune.tracking import _process
    from rltune.tracking._priority import Priority

    tracking, nice, deadline, hold = VARIANTS[task["variant"]]
    results_dir = task["tmp"]
    trackers: list[Any] = []
    original_init = _process.TrackingProcess.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, priority=Priority(nice, deadline), result_hold_s=hold, **kwargs)
        trackers.append(self)

    _process.TrackingProcess.__init__ = init
    usage: dict[str, Any] = {}

    def stop_process(self: Any, *, wait: bool) -> None:  # the tracking process's rusage as it is reaped
        _, status, rusage = os.wait4(self.proc.pid, 0)
        self.proc.returncode = os.waitstatus_to_exitcode(status)
        usage["cpu_s"] = rusage.ru_utime + rusage.ru_stime
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    _process.TrackingProcess._stop_process = stop_process
    marks: dict[str, float] = {}
    original_close = _runner.StudyRunner._close_tracking

    def close(self: Any) -> None:
        marks["end"] = time.monotonic()
        if trackers:
            marks["cpu_at_end"] = _cpu_s(trackers[0].proc.pid) or 0.0
        original_close(self)
        marks["closed"] = time.monotonic()

    _runner.StudyRunner._close_tracking = close
    lags: list[float] = []  # after the start-up
    lags_all: list[float] = []
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.25):
            if trackers and "end" not in marks:
                try:
                    lag = trackers[0].lag()
                except (IndexError, RuntimeError):  # the queue changed under the sampler
                    continue
                lags_all.append(lag.seconds)
                if "started" in marks:
                    lags.append(lag.seconds)
                elif not trackers[0]._posted or trackers[0]._posted[0][0] > 0:  # its init done: the tracker is open
                    marks["started"] = time.monotonic() - start
                    marks["cpu_started"] = _cpu_s(trackers[0].proc.pid) or 0.0

    start = time.monotonic()
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    analysis = tune.run(burn, name="priority", results_dir=results_dir, tracking=tracking, verbose=0, n_jobs=2,
                        config={"x": tune.grid_search(list(range(1, TRIALS + 1))), "iterations": task["iterations"],
                                "work_ms": task["work_ms"]}, metric="score", mode="max")
    done.set()
    trials = [t for t in analysis.study.get_trials() if t.datetime_complete is not None]
    trial_wall = sum((t.datetime_complete - t.datetime_start).total_seconds() for t in trials)
    results = sum(t.last_result["training_iteration"] for t in analysis.trials)
    record = {"wall_s": time.monotonic() - start, "trial_wall_s": trial_wall, "results": results,
              "trials": len(trials), "states": sorted({t.state for t in analysis.trials})}
    if tracking:
        lags.sort()
        lags_all.sort()
        running_cpu = marks.get("cpu_at_end", 0.0)
        record.update({
            "cpu_running_s": running_cpu, "cpu_end_s": usage.get("cpu_s", 0.0) - running_cpu,
            "startup_s": marks.get("started", float("nan")), "cpu_startup_s": marks.get("cpu_started", float("nan")),
            "lag_p50_s": lags[len(lags) // 2] if lags else 0.0,
            "lag_p95_s": lags[int(len(lags) * 0.95)] if lags else 0.0, "lag_max_s": lags[-1] if lags else 0.0,
            "end_wait_s": marks["closed"] - marks["end"], "unrecorded": len(trackers[0].unrecorded),
            # a tracking process that did not even start while trials ran: its lag over the whole run
            "lag_all_p50_s": lags_all[len(lags_all) // 2] if lags_all else 0.0,
            "lag_all_p95_s": lags_all[int(len(lags_all) * 0.95)] if lags_all else 0.0,
            "lag_all_max_s": lags_all[-1] if lags_all else 0.0,
        })
    return record


def calls(task: dict[str, Any]) -> dict[str, Any]:
    """CPU of one ``log_results`` call (one ``log_batch``) by the number of results it carries."""
    from rltune.tracking import StudyTracker

    tracker = StudyTracker(None, task["tmp"], "calls", "grid", "none")
    run = tracker.open_trial(0, {"x": 1}, {"x": 1})
    step, cpu = 0, {}
    for size in (1, 5, 20):
        start = time.process_time()
        for _ in range(40):
            run.log_results([{"training_iteration": step + q + 1, **{f"m{k}": float(k) for k in range(METRICS)}}
                             for q in range(size)])
            step += size
        cpu[str(size)] = (time.process_time() - start) / 40
    tracker.close()
    return {"cpu_per_call_s": cpu}


def make_store(task: dict[str, Any]) -> dict[str, Any]:
    from rltune.tracking import StudyTracker

    StudyTracker(None, task["tmp"], "warm-up", "grid", "none").close()
    return {}


def dispatch(task: dict[str, Any]) -> dict[str, Any]:
    return {"store": make_store, "calls": calls}.get(task["variant"], run_study)(task)


# -- parent ------------------------------------------------------------------------------------
class Hog:
    """One busy-loop process per core, each in a session (an autogroup) of its own, like other users' jobs."""

    def __init__(self, processes: int) -> None:
        self.procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
                      for _ in range(processes)]

    def stop(self) -> None:
        for proc in self.procs:
            proc.kill()
            proc.wait()


def _median(records: list[dict[str, Any]], key: str) -> float:
    values = [r[key] for r in records if key in r]
    return statistics.median(values) if values else float("nan")


def _lags(run: dict[str, Any]) -> tuple[float, float, float] | None:
    """The lag after the start-up; over the whole run for a tracking process that did not start while trials ran."""
    if run.get("startup_s") == run.get("startup_s"):  # not NaN: it started
        return run["lag_p50_s"], run["lag_p95_s"], run["lag_max_s"]
    if "lag_all_p50_s" in run:
        return run["lag_all_p50_s"], run["lag_all_p95_s"], run["lag_all_max_s"]
    return None


def summarize(records: list[dict[str, Any]], variants: list[str]) -> tuple[list[str], list[list[str]]]:
    base = _median(ok(records, "off"), "trial_wall_s")
    headers = ["variant", "tracking CPU while trials ran", "of which start-up", "per result after it", "per trial",
               "CPU at the end", "start-up (wall)", "lag p50 / p95 / max", "end wait", "trials' wall vs off"]
    rows = []
    for variant in variants:
        runs = ok(records, variant)
        if not runs:
            continue
        wall = _median(runs, "trial_wall_s")
        versus = f"{100 * (wall / base - 1):+.1f}%" if variant != "off" and base == base else "-"
        if not VARIANTS[variant][0]:
            rows.append([variant, "-", "-", "-", "-", "-", "-", "-", "-", f"{wall:.1f} s"])
            continue
        cpu = _median(runs, "cpu_running_s")
        started = [r for r in runs if r["startup_s"] == r["startup_s"]]
        startup_cpu = f"{_median(started, 'cpu_startup_s'):.2f} s" if started else "-"
        startup = f"{_median(started, 'startup_s'):.1f} s" if len(started) == len(runs) else "after the trials"
        per_result = statistics.median((r["cpu_running_s"] - (r["cpu_startup_s"] if r in started else 0.0))
                                       / r["results"] for r in runs)
        lags = [lag for lag in map(_lags, runs) if lag is not None]
        lag = " / ".join(f"{statistics.median(x[k] for x in lags):.1f}" for k in range(3)) + " s" if lags else "-"
        rows.append([variant, f"{cpu:.2f} s", startup_cpu, f"{1000 * per_result:.1f} ms", f"{cpu / TRIALS:.2f} s",
                     f"{_median(runs, 'cpu_end_s'):.2f} s", startup, lag, f"{_median(runs, 'end_wait_s'):.1f} s",
                     versus])
    return headers, rows


def _reprint(path: str, markdown: bool) -> None:
    """The table of the records a run wrote with ``--json``."""
    import json

    saved = json.load(open(path))
    records = [r for r in saved["runs"] if r.get("variant") in VARIANTS]
    variants = [v for v in VARIANTS if any(r["variant"] == v for r in records)]
    headers, rows = summarize(records, variants)
    print(text_table(headers, rows))
    if markdown:
        print(markdown_block("bench_tracking_priority", headers, rows, saved["machine"]))


def main() -> None:
    parser = base_parser(__doc__)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--iterations", type=int, default=150, help="per trial (4 trials)")
    parser.add_argument("--work-ms", type=float, default=50.0, help="CPU per iteration")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--no-hog", action="store_true", help="no CPU hog beside the study")
    parser.add_argument("--from-json", metavar="PATH", help="print the table of the records of an earlier --json run")
    args = parser.parse_args()
    if args.from_json:
        _reprint(args.from_json, args.markdown)
        return
    variants = parse_variants(args.variants, list(VARIANTS))
    script = os.path.abspath(__file__)
    info = machine_info()
    print_header("MLflow tracking: priority and batching, on a loaded machine", info, [
        f"{TRIALS} function trials x {args.iterations} iterations x {args.work_ms:.0f} ms CPU, n_jobs 2, "
        f"{METRICS} numbers a result; {args.rounds} round(s); hog: "
        f"{'none' if args.no_hog else f'{os.cpu_count()} busy processes'}"])
    records: list[dict[str, Any]] = []
    hog = None if args.no_hog else Hog(os.cpu_count() or 1)
    try:
        with tempfile.TemporaryDirectory(prefix="rltune_bench_priority_") as tmp:
            template = Path(tmp) / "template"
            template.mkdir()
            run_all(script, [{"variant": "store", "tmp": str(template)}], lambda t, r: "store ready")
            subprocess.run(["cp", "-r", str(template), str(Path(tmp) / "calls")], check=True)
            call_records = run_all(script, [{"variant": "calls", "tmp": str(Path(tmp) / "calls")}], lambda t, r: ", ".join(
                f"{size} result(s) a call: {1000 * s:.1f} ms CPU ({1000 * s / int(size):.1f} ms a result)"
                for size, s in r["cpu_per_call_s"].items()))
            for round_ in range(args.rounds):
                tasks = []
                for variant in variants:
                    run_dir = Path(tmp) / f"{variant}-{round_}"
                    run_dir.mkdir()
                    subprocess.run(["cp", str(template / "mlflow.db"), str(run_dir / "mlflow.db")], check=True)
                    tasks.append({"variant": variant, "seed": round_, "tmp": str(run_dir),
                                  "iterations": args.iterations, "work_ms": args.work_ms})
                records += run_all(script, tasks, lambda t, r: (
                    f"trials {r['trial_wall_s']:.1f} s" + (
                        f", tracking CPU {r['cpu_running_s']:.2f} s + {r['cpu_end_s']:.2f} s at the end, lag max "
                        f"{r['lag_max_s']:.1f} s, end wait {r['end_wait_s']:.1f} s" if "cpu_running_s" in r else "")),
                    timeout=1800, verbose=args.verbose)
    finally:
        if hog is not None:
            hog.stop()
    headers, rows = summarize(records, variants)
    print()
    print(text_table(headers, rows))
    if args.markdown:
        print(markdown_block("bench_tracking_priority", headers, rows, info))
    finish(records + call_records, info, args.json)


if __name__ == "__main__":
    if not child_main(dispatch):
        main()
