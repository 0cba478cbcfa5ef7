"""Tracking overhead: the same CartPole PPO study with MLflow tracking on and off, same seeds.

Each variant runs ``tune.run`` in its own fresh process (2 trials, grid over
lr, n_jobs 1, ``--iterations`` iterations of 1,000 steps each), alternating
on/off for ``--repeats`` rounds. The study's wall time splits in two:

- while trials run (start to the last trial's end): what tracking adds here,
  divided by the number of iterations, is the extra wall time per training
  iteration; the target is < 5% of the iteration's own time;
- closing the tracking (the last trial's model, the study's final plots,
  the parent run's end): a fixed cost per study, printed in seconds.

The MLflow store is created before the timed study (a tracked user has one
already); ``--cold`` counts its creation too.

    .venv/bin/python benchmarks/bench_tracking_overhead.py            # ~4 min
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
if tracking and not cold:  # the store, made in another process: the orchestrator itself never imports mlflow
    import subprocess
    subprocess.run([sys.executable, "-c", "import sys; from rltune.tracking import StudyTracker; "
                    "StudyTracker(None, sys.argv[1], 'warm-up', 'grid', 'none').close()", results_dir], check=True)
from rltune.orchestrator import _runner
closing = []
_close = _runner.StudyRunner._close_tracking
def timed_close(self):
    t = time.perf_counter()
    _close(self)
    closing.append(time.perf_counter() - t)
_runner.StudyRunner._close_tracking = timed_close
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
print(json.dumps({"wall": wall, "close": sum(closing), "iterations": iters, "iter_time": iter_time}))
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
    parser.add_argument("--iterations", type=int, default=100, help="per trial (2 trials)")
    parser.add_argument("--cold", action="store_true", help="count the creation of the MLflow store")
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    on, off = [], []
    for r in range(args.repeats):
        for tracking, bucket in ((False, off), (True, on)):
            record = run(tracking, args.iterations, args.cold)
            bucket.append(record)
            print(f"round {r + 1} tracking {'on ' if tracking else 'off'}: study {record['wall']:.2f} s "
                  f"(closing {record['close']:.2f} s), {record['iterations']} iterations, "
                  f"{record['iter_time'] * 1000:.0f} ms per iteration", flush=True)
    def median(records: list, key) -> float:
        return statistics.median(key(x) for x in records)

    wall_on, wall_off = median(on, lambda x: x["wall"]), median(off, lambda x: x["wall"])
    running_on = median(on, lambda x: x["wall"] - x["close"])
    running_off = median(off, lambda x: x["wall"] - x["close"])
    close_on, close_off = median(on, lambda x: x["close"]), median(off, lambda x: x["close"])
    iterations = on[0]["iterations"]
    iter_time = median(off, lambda x: x["iter_time"])
    extra = (running_on - running_off) / iterations
    print(f"\nstudy wall time (median): tracking off {wall_off:.2f} s, on {wall_on:.2f} s "
          f"(+{100 * (wall_on - wall_off) / wall_off:.1f}% for {iterations} iterations)")
    print(f"while trials run: off {running_off:.2f} s, on {running_on:.2f} s")
    print(f"extra wall time per training iteration: {extra * 1000:.1f} ms = {100 * extra / iter_time:.1f}% "
          f"of the {iter_time * 1000:.0f} ms iteration (target < 5%: {'met' if extra / iter_time < 0.05 else 'NOT met'})")
    print(f"closing the tracking at the study's end (fixed per study): {close_on:.2f} s (off: {close_off:.2f} s)")

if __name__ == "__main__":
    main()
