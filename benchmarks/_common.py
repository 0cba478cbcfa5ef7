"""Plumbing shared by the benchmark scripts: one run per fresh subprocess, machine info, summaries, tables.

Each benchmark script is both the parent (it parses the flags, runs the tasks
one after the other and prints the figures) and the child (``script.py
--_child TASK_JSON OUT_JSON`` runs one task in a fresh interpreter and writes
its result dict to OUT_JSON). A fresh interpreter per run means that torch's
thread settings, imports and allocator state of one run never leak into the
next, and runs never compete for the cores.

Nothing here imports torch, rltune or Stable-Baselines3: the parent stays
light, and each child imports what its task needs.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from importlib import metadata
from typing import Any, Callable, Iterable, Sequence

CHILD_FLAG = "--_child"
SOLVED_CARTPOLE = 475.0  # gymnasium's reward_threshold for CartPole-v1


# -- running one task per subprocess ------------------------------------------------------
def child_main(run_task: Callable[[dict[str, Any]], dict[str, Any]]) -> bool:
    """If this process was started as a child (``CHILD_FLAG TASK OUT``), run the task, write its result, return True."""
    if len(sys.argv) != 4 or sys.argv[1] != CHILD_FLAG:
        return False
    task = json.loads(sys.argv[2])
    result = run_task(task)
    with open(sys.argv[3], "w") as fh:
        json.dump(result, fh)
    return True


def run_isolated(
    script: str, task: dict[str, Any], *, timeout: float | None = None, python: str | None = None
) -> dict[str, Any]:
    """Run one task of ``script`` in a fresh interpreter; its result dict, or ``{"error": ...}`` if it failed.

    ``python`` is the interpreter (default: this one's), e.g. a peer's own
    venv whose pins clash with rltune's. A failed run does not stop the
    benchmark: the error is shown and counted in the summary, and the other
    runs go on.
    """
    with tempfile.TemporaryDirectory(prefix="rltune_bench_") as tmp:
        out = os.path.join(tmp, "result.json")
        env = dict(os.environ, RLTUNE_RESULTS_DIR=os.path.join(tmp, "results"), PYTHONUNBUFFERED="1")
        cmd = [python or sys.executable, script, CHILD_FLAG, json.dumps(task), out]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            return {"error": f"timed out after {timeout:.0f} s"}
        if proc.returncode != 0 or not os.path.exists(out):
            lines = [line for line in proc.stderr.strip().splitlines() if line.strip()]
            last = lines[-1] if lines else f"exit status {proc.returncode}, no output"
            return {"error": last, "stderr_tail": "\n".join(lines[-15:])}
        with open(out) as fh:
            return json.load(fh)


def run_all(
    script: str,
    tasks: Sequence[dict[str, Any]],
    describe: Callable[[dict[str, Any], dict[str, Any]], str],
    *,
    timeout: float | None = None,
    verbose: bool = False,
    python_of: Callable[[dict[str, Any]], str | None] | None = None,
) -> list[dict[str, Any]]:
    """Run ``tasks`` one after the other, each in its own subprocess; print one line per finished run.

    ``python_of(task)`` picks each task's interpreter (None: this one).
    Returns one record per task: the task's keys plus its result's (or ``error``).
    """
    records = []
    start = time.perf_counter()
    for i, task in enumerate(tasks, 1):
        t0 = time.perf_counter()
        python = python_of(task) if python_of else None
        result = run_isolated(script, task, timeout=timeout, python=python)
        record = {**task, **result, "run_wall_s": time.perf_counter() - t0}
        records.append(record)
        head = f"[{i:>2}/{len(tasks)} {time.perf_counter() - start:7.1f}s]"
        if "error" in result:
            print(f"{head} {task_label(task)}: FAILED: {result['error']}", flush=True)
            if verbose and result.get("stderr_tail"):
                print(_indent(result["stderr_tail"]), flush=True)
        else:
            print(f"{head} {task_label(task)}: {describe(task, result)}", flush=True)
    return records


def task_label(task: dict[str, Any]) -> str:
    """``variant seed=S`` (or the variant alone, or the task's own ``label``) for progress lines."""
    if task.get("label"):
        return str(task["label"])
    seed = task.get("seed")
    return f"{task['variant']}" + (f" seed={seed}" if seed is not None else "")


def _indent(text: str, prefix: str = "      | ") -> str:
    return "\n".join(prefix + line for line in text.splitlines())


# -- command line -----------------------------------------------------------------------
def base_parser(description: str) -> argparse.ArgumentParser:
    """The flags every benchmark takes: ``--markdown``, ``--json PATH``, ``--verbose``."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--markdown", action="store_true", help="also print the result rows for benchmarks/README.md")
    parser.add_argument("--json", metavar="PATH", help="write every run's raw record and the machine info to PATH")
    parser.add_argument("--verbose", action="store_true", help="show the stderr tail of failed runs")
    return parser


def parse_variants(text: str, known: Sequence[str]) -> list[str]:
    """A comma-separated list of variant names, each checked against ``known``."""
    chosen = [v.strip() for v in text.split(",") if v.strip()]
    unknown = [v for v in chosen if v not in known]
    if unknown or not chosen:
        raise SystemExit(f"--variants: unknown {unknown or text!r}; choose from {', '.join(known)}")
    return chosen


# -- machine and versions ------------------------------------------------------------------
def machine_info() -> dict[str, Any]:
    """CPU, core count, load, OS, Python and the versions of the packages measured."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    versions = {}
    for dist in ("rltune", "torch", "gymnasium", "stable-baselines3", "numpy"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = "not installed"
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "loadavg_at_start": _loadavg(),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "versions": versions,
        "rltune_commit": _git_commit(),
        "date": time.strftime("%Y-%m-%d %H:%M"),
    }


def _loadavg() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def _git_commit() -> str:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        commit = subprocess.run(
            ["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", root, "status", "--porcelain", "--untracked-files=no", "rltune"],
            capture_output=True, text=True, timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (commit or "unknown") + ("+dirty" if dirty else "")


def print_header(title: str, info: dict[str, Any], settings: Iterable[str] = ()) -> None:
    """The benchmark's title, the machine, the versions and the settings of this run."""
    v = info["versions"]
    print(f"== {title}")
    print(f"machine: {info['cpu']}, {info['cores']} cores, {info['os']}, Python {info['python']}")
    print(
        f"versions: rltune {v['rltune']} ({info['rltune_commit']}), torch {v['torch']}, "
        f"gymnasium {v['gymnasium']}, stable-baselines3 {v['stable-baselines3']}, numpy {v['numpy']}"
    )
    load = info["loadavg_at_start"]
    note = ""
    if load is not None and info["cores"] and load > 0.25 * info["cores"]:
        note = "  (busy machine: throughput figures are lower and noisier than on a quiet one)"
    print(f"load average at start: {load}{note}")
    for line in settings:
        print(line)
    print(flush=True)


def finish(records: list[dict[str, Any]], info: dict[str, Any], json_path: str | None, extra: dict[str, Any] | None = None) -> None:
    """Add the end load to ``info`` and write the raw records to ``json_path`` if given."""
    info["loadavg_at_end"] = _loadavg()
    if json_path:
        with open(json_path, "w") as fh:
            json.dump({"machine": info, **(extra or {}), "runs": records}, fh, indent=1, default=str)
        print(f"\nraw records written to {json_path}")


# -- numbers -----------------------------------------------------------------------------
def ok(records: Iterable[dict[str, Any]], variant: str) -> list[dict[str, Any]]:
    """The records of ``variant`` that finished without error."""
    return [r for r in records if r["variant"] == variant and "error" not in r]


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (0 for a single value, NaN for none)."""
    if not values:
        return math.nan, math.nan
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def fmt_mean_std(values: Sequence[float], digits: int = 0) -> str:
    """``mean ± std`` with ``digits`` decimals, or ``-`` for no values."""
    if not values:
        return "-"
    m, s = mean_std(values)
    return f"{m:,.{digits}f} ± {s:,.{digits}f}"


def ratio(a: float, b: float) -> float:
    """a / b, NaN when either is missing or b is 0."""
    if a is None or b is None or not b or math.isnan(a) or math.isnan(b):
        return math.nan
    return a / b


def fmt_ratio(value: float) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.2f}x"


def verdict(passed: bool | None, judged: bool = True) -> str:
    """PASS/FAIL; ``not judged`` for a run shorter than the target's budget, ``n/a`` without a figure."""
    if passed is None:
        return "n/a"
    if not judged:
        return f"not judged (short run; would be {'PASS' if passed else 'FAIL'})"
    return "PASS" if passed else "FAIL"


# -- tables ------------------------------------------------------------------------------
def text_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], *, left: int = 1) -> str:
    """A plain aligned table: the first ``left`` columns left-aligned, the others right-aligned."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]

    def line(row: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))

    out = [line(cells[0]), "  ".join("-" * w for w in widths)]
    out += [line(row) for row in cells[1:]]
    return "\n".join(out)


def markdown_rows(rows: Sequence[Sequence[Any]]) -> str:
    """Rows as markdown table lines (to paste under the headers in benchmarks/README.md)."""
    return "\n".join("| " + " | ".join(str(c) for c in row) + " |" for row in rows)


def markdown_block(title: str, headers: Sequence[str], rows: Sequence[Sequence[Any]], info: dict[str, Any]) -> str:
    """A README section: the header row, its separator and the rows, with the run's date and commit."""
    head = "| " + " | ".join(headers) + " |\n|" + "|".join(" --- " for _ in headers) + "|\n"
    load = info.get("loadavg_at_start")
    note = (
        f"\n\n{info['date']}, rltune {info['rltune_commit']}, {info['cpu']} ({info['cores']} cores), "
        f"load average at start {load}"
    )
    return f"\n--- markdown: {title} ---\n{head}{markdown_rows(rows)}{note}\n"
