"""Overhead of the tuning orchestrator: a study of trivial trials, and the time to the first result.

Two figures, each measured ``--repeats`` times in fresh processes (the median is shown):

- study wall time: ``tune.run`` of 20 function trials that report 3 results
  each, ``n_jobs`` 2, from the call to the returned analysis (each trial is a
  process of its own; Optuna journal storage). Target: < 10 s.
- first result: from starting ``rltune tune STUDY.yaml --quiet`` (a function
  trial) to the line of the trial's first result on its stdout. Target: < 1.5 s.

Nothing here needs torch. About 10-20 s::

    .venv/bin/python benchmarks/bench_orchestrator_overhead.py
    .venv/bin/python benchmarks/bench_orchestrator_overhead.py --repeats 5 --trials 20
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

STUDY_TARGET_S = 10.0
FIRST_RESULT_TARGET_S = 1.5

TRAINABLE = '''
def trivial(config, reporter):
    for i in range(3):
        reporter(score=config["x"] * (i + 1))
'''


def time_study(tmp: Path, trials: int, n_jobs: int) -> float:
    """Wall time of one tune.run of ``trials`` trivial trials, in a fresh interpreter."""
    (tmp / "bench_trainable.py").write_text(TRAINABLE)
    script = textwrap.dedent(f"""
        import sys, time, json
        sys.path.insert(0, {str(tmp)!r})
        start = time.perf_counter()
        from rltune import tune
        from bench_trainable import trivial
        analysis = tune.run(trivial, config={{"x": tune.uniform(0, 1)}}, metric="score", n_trials={trials},
                            n_jobs={n_jobs}, search_alg="random", results_dir={str(tmp / "results")!r},
                            name="overhead", verbose=0)
        assert analysis.counts() == {{"COMPLETE": {trials}}}, analysis.counts()
        print(json.dumps(time.perf_counter() - start))
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr)
    return float(proc.stdout.strip().splitlines()[-1])


def time_first_result(tmp: Path) -> float:
    """Seconds from starting ``rltune tune`` to the first result line of its trial."""
    (tmp / "bench_trainable.py").write_text(TRAINABLE)
    study = tmp / "first.yaml"
    study.write_text("run: bench_trainable:trivial\nmetric: score\nconfig: {x: 1.0}\n")
    rltune = Path(sys.executable).parent / "rltune"
    start = time.perf_counter()
    proc = subprocess.Popen([str(rltune), "tune", str(study), "--results-dir", str(tmp / "results"), "--quiet"],
                            cwd=tmp, env={**os.environ, "PYTHONPATH": str(tmp)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    elapsed = None
    for line in proc.stdout:
        if " iter 1:" in line:
            elapsed = time.perf_counter() - start
            break
    proc.communicate(timeout=60)
    if elapsed is None:
        raise RuntimeError(f"no result line; exit {proc.returncode}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--n-jobs", type=int, default=2)
    args = parser.parse_args()
    studies, firsts = [], []
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory(prefix="rltune_bench_") as tmp:
            studies.append(time_study(Path(tmp), args.trials, args.n_jobs))
        with tempfile.TemporaryDirectory(prefix="rltune_bench_") as tmp:
            firsts.append(time_first_result(Path(tmp)))
    study_s, first_s = statistics.median(studies), statistics.median(firsts)
    print(f"machine: {os.cpu_count()} CPUs, Python {sys.version.split()[0]}")
    print(f"study of {args.trials} trivial function trials, n_jobs {args.n_jobs}: median {study_s:.2f} s "
          f"(runs: {', '.join(f'{s:.2f}' for s in studies)}; target < {STUDY_TARGET_S:g} s) "
          f"{'OK' if study_s < STUDY_TARGET_S else 'MISSED'}")
    print(f"rltune tune to the first reported result: median {first_s:.2f} s "
          f"(runs: {', '.join(f'{s:.2f}' for s in firsts)}; target < {FIRST_RESULT_TARGET_S:g} s) "
          f"{'OK' if first_s < FIRST_RESULT_TARGET_S else 'MISSED'}")
    print(json.dumps({"study_s": studies, "first_result_s": firsts}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
