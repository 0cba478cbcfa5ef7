"""What TensorBoard costs per training iteration: the trial loop with and without the TensorBoard writer.

The loop timed is the one of every trial (``train_loop``): an iteration,
then ``reporter(**result)`` (result.json, then the reporter's observers),
with a :class:`~rltune.orchestrator._reporter.Reporter` that has the
TensorBoard writer (``on``: an event per result, built, written and flushed
to disk by the writer's thread) or not (``off``). Two workloads:

- ``ppo``: the trainer of ``studies/cartpole-ppo.yaml`` (PPO, 8 CartPole-v1
  envs, 256-step batches, 20 SGD steps of a 64x64 net; ~32 numbers and 2
  histograms per result), ``trainer.train()``;
- ``function``: a cheap function trainable's iteration (a few numpy ops,
  then a result of 12 numbers), the worst case: the writer's fixed cost
  over the smallest iteration.

Each round is one subprocess holding both variants of a workload (the PPO
trainers built with the same seed, so they train in step; which one is
built first alternates by round). After ``--warmup`` iterations of each
(the PPO config compiles its learner step after 25 iterations when
inductor's cache is warm: the warm-up covers it), each cycle runs
``--block`` iterations of each variant, the order rotating every cycle. A
block lasts several of the writer's flush intervals (1 s) and ends when the
writer has written and flushed its last result, so that all of the writer's
work falls in its own block. Per block:

- the wall time of an iteration of each variant; the figure is the median
  over all cycles of the paired ratio on / off (a change in machine load
  between cycles cancels out of it). ``--control`` runs the same with no
  writer in either variant (A/A): the measurement's own bias and spread on
  this machine;
- TensorBoard's own CPU time per iteration: the writer's calls in the loop's
  thread (``thread_time``) plus its thread's CPU clock, over the CPU time of
  an ``off`` iteration. This is the figure judged: it does not depend on
  what else the machine runs, where on a shared machine the wall ratio's
  spread is wider than the 2% to be judged.

Also, in fresh processes: what opening the writer adds to the start of a
trial process that has not imported torch (tensorboardX imports it).
Target, from issue 17: TensorBoard is on by default in studies only if it
costs at most 2% per iteration, for both workloads.

Full run (about 3 minutes on 2 quiet cores)::

    .venv/bin/python benchmarks/bench_tensorboard_overhead.py --markdown

Smoke test (about 30 seconds)::

    .venv/bin/python benchmarks/bench_tensorboard_overhead.py --quick
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import threading
import time
from typing import Any, Callable

import _common as common

WORKLOADS = ("ppo", "function")
MAX_COST = 0.02
STUDY_FILE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "studies", "cartpole-ppo.yaml")


# -- one round (in a child process) ------------------------------------------------------------------
def _ppo_step(seed: int) -> tuple[Callable[[], dict[str, Any]], Callable[[], None]]:
    from rltune.orchestrator._train_file import load_train_file
    from rltune.trainers import get_trainer_class

    spec = load_train_file(STUDY_FILE)
    trainer = get_trainer_class(spec.run)(config={**(spec.config or {}), "seed": seed}, env=spec.env)
    return trainer.train, trainer.stop


def _function_step(seed: int) -> tuple[Callable[[], dict[str, Any]], Callable[[], None]]:
    import numpy as np

    rng = np.random.default_rng(seed)
    weights = rng.normal(size=16)
    state = {"steps": 0}

    def step() -> dict[str, Any]:  # a cheap function trainable's iteration: some numpy, then its result
        grad = rng.normal(size=16) * 0.1
        weights[:] -= 0.01 * grad
        state["steps"] += 100
        loss = float(weights @ weights)
        return {"score": -loss, "loss": loss, "timesteps_total": state["steps"],
                "info": {"grad_norm": float(np.linalg.norm(grad)), "lr": 0.01, "weight_max": float(weights.max()),
                         "weight_min": float(weights.min())},
                "custom_metrics": {"a_mean": float(weights[0]), "b_mean": float(weights[1])}}

    return step, lambda: None


class _Counted:
    """The writer as the Reporter's observer, counting the CPU time of its calls in the loop's thread."""

    def __init__(self, writer: Any) -> None:
        self.writer = writer
        self.cpu_s = 0.0

    def result(self, result: dict[str, Any]) -> None:
        start = time.thread_time()
        self.writer.result(result)
        self.cpu_s += time.thread_time() - start

    def close(self) -> None:
        self.writer.close()


def _writer_thread_cpu_s() -> float:
    """The CPU time of this process's TensorBoard writer threads so far (each thread's own clock)."""
    return sum(time.clock_gettime(time.pthread_getcpuclockid(t.ident))
               for t in threading.enumerate() if t.name == "rltune-tensorboard")


def _import_task() -> dict[str, Any]:
    """What opening the writer adds to the start of a trial process that has not imported torch (a function trial)."""
    start = time.perf_counter()
    import rltune.orchestrator._trial_process  # noqa: F401 - what every trial process imports

    base = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="rltune_tb_") as tmp:
        from rltune.orchestrator._tensorboard import open_trial_writer

        open_trial_writer(tmp).close()
    return {"trial_import_ms": (base - start) * 1e3, "writer_open_ms": (time.perf_counter() - base) * 1e3,
            "torch_imported": "torch" in sys.modules}


def run_task(task: dict[str, Any]) -> dict[str, Any]:
    if task["workload"] == "import":
        return _import_task()
    from rltune.orchestrator._reporter import Reporter
    from rltune.orchestrator._tensorboard import open_trial_writer

    make = {"ppo": _ppo_step, "function": _function_step}[task["workload"]]
    variants = ("off", "on")
    out: dict[str, list[float]] = {f"{v}_{k}": [] for v in variants for k in ("ms", "cpu_ms", "tb_cpu_ms")}
    with tempfile.TemporaryDirectory(prefix="rltune_tb_") as tmp:
        loops, reporters, writers, stops = {}, {}, {}, []
        for variant in (variants if task["round"] % 2 == 0 else variants[::-1]):  # no variant always built first
            step, stop = make(task["round"])
            stops.append(stop)
            trial_dir = os.path.join(tmp, variant)
            on = variant == "on" and not task["control"]
            writers[variant] = [_Counted(open_trial_writer(trial_dir))] if on else []
            reporters[variant] = Reporter(None, trial_dir=trial_dir, trial_number=0, observers=writers[variant])
            loops[variant] = step
        try:
            def iterate(variant: str, n: int) -> tuple[float, float, float]:
                step, reporter, counted = loops[variant], reporters[variant], writers[variant]
                loop_cpu, thread_cpu = sum(c.cpu_s for c in counted), _writer_thread_cpu_s()
                wall, cpu = time.perf_counter(), time.process_time()
                for _ in range(n):
                    reporter(**step())  # what train_loop does
                for c in counted:  # the block's last events written and flushed: counted, none spills
                    c.writer.wait()
                wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                own = sum(c.cpu_s for c in counted) - loop_cpu + (_writer_thread_cpu_s() - thread_cpu if counted else 0.0)
                return wall / n * 1e3, cpu / n * 1e3, own / n * 1e3

            for variant in variants:
                iterate(variant, task["warmup"] // 2)
            for variant in variants[::-1]:
                iterate(variant, task["warmup"] - task["warmup"] // 2)
            for cycle in range(task["cycles"]):
                for variant in (variants if cycle % 2 == 0 else variants[::-1]):
                    for key, value in zip(("ms", "cpu_ms", "tb_cpu_ms"), iterate(variant, task["block"])):
                        out[f"{variant}_{key}"].append(value)
        finally:
            for reporter in reporters.values():
                reporter.close()
            for stop in stops:
                stop()
    return out


# -- the parent --------------------------------------------------------------------------------------
def _paired(records: list[dict[str, Any]], key: str) -> list[float]:
    return [on / off for r in records for on, off in zip(r[f"on_{key}"], r[f"off_{key}"])]


def describe(task: dict[str, Any], r: dict[str, Any]) -> str:
    if task["workload"] == "import":
        return (f"a trial process's imports {r['trial_import_ms']:.0f} ms, then opening the writer "
                f"{r['writer_open_ms']:.0f} ms (torch imported: {r['torch_imported']})")
    return (f"{task['workload']}: off {statistics.median(r['off_ms']):.3f} ms, on {statistics.median(r['on_ms']):.3f} "
            f"ms per iteration (medians); on/off {statistics.median(_paired([r], 'ms')):.3f}")


def main() -> None:
    parser = common.base_parser(__doc__)
    parser.add_argument("--rounds", type=int, default=3, help="subprocesses per workload (default 3)")
    parser.add_argument("--cycles", type=int, default=10, help="cycles per round (default 10)")
    parser.add_argument("--block", type=int, default=0,
                        help="iterations of a variant per cycle (default: 40 for ppo, 20000 for function)")
    parser.add_argument("--warmup", type=int, default=30, help="iterations of each variant before timing (default 30)")
    parser.add_argument("--workloads", default=",".join(WORKLOADS), help=f"comma-separated, from {', '.join(WORKLOADS)}")
    parser.add_argument("--control", action="store_true",
                        help="A/A run: 'on' without the writer too, to show the measurement's own bias and spread")
    parser.add_argument("--quick", action="store_true", help="smoke test: --rounds 1 --cycles 2 --warmup 5")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.cycles, args.warmup = 1, 2, 5
    workloads = common.parse_variants(args.workloads, WORKLOADS)
    blocks = {w: args.block or {"ppo": 40, "function": 20000}[w] for w in workloads}

    info = common.machine_info()
    common.print_header(
        "TensorBoard's cost per training iteration: the trial loop (iteration + reporter) with and without the writer",
        info,
        [f"budget: {args.rounds} round(s) per workload x {args.cycles} cycles, each timing a block of iterations of "
         f"each variant (ppo {blocks.get('ppo', '-')}, function {blocks.get('function', '-')}), after "
         f"{args.warmup} warm-up iterations",
         f"ppo: the trainer of {os.path.relpath(STUDY_FILE)}; function: a few numpy ops and a 12-number result"],
    )
    tasks = [{"variant": w, "workload": w, "round": r, "cycles": args.cycles, "block": blocks[w], "control": args.control,
              "warmup": args.warmup if w == "ppo" else args.warmup * 100}
             for r in range(args.rounds) for w in workloads]
    tasks += [{"variant": "import", "workload": "import", "round": r} for r in range(args.rounds)]
    records = common.run_all(__file__, tasks, describe, verbose=args.verbose)
    done = {w: common.ok(records, w) for w in workloads}
    if not any(done.values()):
        print("every round failed")
        sys.exit(1)

    headers = ["workload", "iteration off (wall, median)", "on", "wall on / off (median of paired ratios)",
               "its IQR", "iteration CPU (off)", "TensorBoard's own CPU per iteration", "its share of the iteration's CPU"]
    rows, shares = [], {}
    for w in workloads:
        if not done[w]:
            continue
        wall = _paired(done[w], "ms")
        ratio = statistics.median(wall)
        q1, _, q3 = statistics.quantiles(wall, n=4) if len(wall) > 1 else (ratio, 0, ratio)
        own = [x for r in done[w] for x in r["on_tb_cpu_ms"]]
        shares[w] = statistics.median([t / c for r in done[w] for t, c in zip(r["on_tb_cpu_ms"], r["off_cpu_ms"])])
        rows.append([w, f"{statistics.median(x for r in done[w] for x in r['off_ms']):.3f} ms",
                     f"{statistics.median(x for r in done[w] for x in r['on_ms']):.3f} ms",
                     f"{100 * (ratio - 1):+.2f}%", f"{100 * (q1 - 1):+.2f}%..{100 * (q3 - 1):+.2f}%",
                     f"{statistics.median(x for r in done[w] for x in r['off_cpu_ms']):.3f} ms",
                     f"{statistics.median(own) * 1e3:.0f} µs", f"{100 * shares[w]:.2f}%"])
    print()
    print(common.text_table(headers, rows))
    print()
    full = args.rounds >= 3 and args.cycles >= 10 and args.warmup >= 30
    if not full:
        print("(short run: noisy; the full run uses --rounds 3 --cycles 10 --warmup 30)")
    opened = common.ok(records, "import")
    if opened:
        print(f"opening the writer in a fresh trial process (median of {len(opened)}): "
              f"{statistics.median(r['writer_open_ms'] for r in opened):.0f} ms after the trial's own imports "
              f"({statistics.median(r['trial_import_ms'] for r in opened):.0f} ms); tensorboardX imports torch: "
              f"{all(r['torch_imported'] for r in opened)}")
    if args.control:
        print("control run (A/A): both variants without the writer; the wall ratios show the measurement's bias and "
              "spread on this machine")
    elif shares:
        # Judged on the CPU the writer itself spends (its own thread clocks): on a shared machine the wall ratio's
        # spread (--control) is wider than the 2% to be judged. A study runs trainers and functions alike.
        for w, share in shares.items():
            print(f"{w}: TensorBoard's own CPU is {100 * share:.2f}% of an iteration's (target <= {MAX_COST:.0%}): "
                  f"{common.verdict(share <= MAX_COST, full)}")
        cheap = all(share <= MAX_COST for share in shares.values())
        print(f"studies' default (on only if every workload is within {MAX_COST:.0%}): {'on' if cheap else 'off'}")
    if args.markdown:
        print(common.markdown_block("TensorBoard overhead", headers, rows, info))
    common.finish(records, info, args.json, {"rounds": args.rounds, "cycles": args.cycles, "blocks": blocks})


if __name__ == "__main__":
    if not common.child_main(run_task):
        main()
