"""Tracking overhead: the same CartPole PPO study with MLflow tracking on and off, same seeds.

Each variant runs ``tune.run`` in its own fresh process (2 trials, grid over
lr, n_jobs 1, 40 iterations of 1,000 steps each), alternating on/off for
``--repeats`` rounds. Printed: study wall time, the extra wall time per
training iteration with tracking on, and that as a share of the mean
iteration time (target: < 5%). The MLflow store is created before the timed
study (a tracked user has one already); ``--cold`` counts its creation too.

    .venv/bin/python benchmarks/bench_tracking_overhead.py            # ~3 min
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

CHILD = r"""
import json, os, sys, time
from rltune import tune
tracking, results_dir, iterations, cold = sys.argv[1] == "on", sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
if tracking and not cold:
    from rltune.orchestrator._tracking import StudyTracker
    warm = StudyTracker(None, results_dir, "warm-up", "grid", "none", background=True)
    warm.close()
start = time.perf_counter()
analysis = tune.run(
    "PPO", name="overhead", results_dir=results_dir, tracking=tracking, verbose=0, n_jobs=1,
    config={"env": "CartPole-v1", "seed": 0, "train_batch_size": 1000, "rollout_fragment_length": 125,
            "num_envs_per_worker": 8, "sgd_minibatch_size": 250, "num_sgd_iter": 4, "model": {"fcnet_hiddens": [64, 64]},
            "lr": tune.grid_search([3e-4, 1e-3])},
    stop={"training_iteration": iterations}, metric="episode_reward_mean", mode="max", checkpoint_freq=10,
)
wall = time.perf_counter() - start
iters = sum(t.last_result["training_iteration"] for t in analysis.trials)
iter_time = sum(t.last_result["time_total_s"] for t in analysis.trials) / iters
print(json.dumps({"wall": wall, "iterations": iters, "iter_time": iter_time}))
"""


def run(tracking: bool, iterations: int, cold: bool) -> dict:
    with tempfile.TemporaryDirectory(prefix="rltune_track_") as tmp:
        out = subprocess.run(
            [sys.executable, "-c", CHILD, "on" if tracking else "off", tmp, str(iterations), "1" if cold else "0"],
            capture_output=True, text=True, check=True, env={**os.environ, "RLTUNE_TRACKING": "1"},
        )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=40)
    parser.add_argument("--cold", action="store_true", help="count the creation of the MLflow store")
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    on, off = [], []
    for r in range(args.repeats):
        for tracking, bucket in ((False, off), (True, on)):
            record = run(tracking, args.iterations, args.cold)
            bucket.append(record)
            print(f"round {r + 1} tracking {'on ' if tracking else 'off'}: study {record['wall']:.2f} s, "
                  f"{record['iterations']} iterations, {record['iter_time'] * 1000:.0f} ms per iteration", flush=True)
    wall_on = statistics.median(x["wall"] for x in on)
    wall_off = statistics.median(x["wall"] for x in off)
    iterations = on[0]["iterations"]
    iter_time = statistics.median(x["iter_time"] for x in off)
    extra = (wall_on - wall_off) / iterations
    print(f"\nstudy wall time (median): tracking off {wall_off:.2f} s, on {wall_on:.2f} s")
    print(f"extra wall time per training iteration: {extra * 1000:.1f} ms = {100 * extra / iter_time:.1f}% "
          f"of the {iter_time * 1000:.0f} ms iteration (target < 5%)")


if __name__ == "__main__":
    main()
