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

Each round is one subprocess holding both variants of both workloads (the
PPO trainers built with the same seed, so they train in step); after
``--warmup`` iterations of each (the PPO config compiles its learner step
after 25 iterations when inductor's cache is warm: the warm-up covers it),
each cycle runs ``--block`` iterations of each variant, the order rotating
every cycle. Per cycle: the mean wall time of an iteration of each variant,
and the process's CPU time (the writer's thread included). A block lasts
several of the writer's flush intervals (1 s), and its time includes
waiting for the writer to write and flush the block's last results, so
that all of the writer's work is counted in its own block. The figure
judged is the median over all cycles of the paired ratio on / off (a change
in machine load between cycles cancels out of it). Target, from issue 17:
TensorBoard is on by default in studies only if it costs at most 2% of a
PPO iteration.

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


def run_task(task: dict[str, Any]) -> dict[str, Any]:
    from rltune.orchestrator._reporter import Reporter
    from rltune.orchestrator._tensorboard import open_trial_writer

    make = {"ppo": _ppo_step, "function": _function_step}[task["workload"]]
    variants = ("off", "on")
    out: dict[str, list[float]] = {f"{v}_{k}": [] for v in variants for k in ("ms", "cpu_ms")}
    with tempfile.TemporaryDirectory(prefix="rltune_tb_") as tmp:
        loops, reporters, writers, stops = {}, {}, {}, []
        for variant in variants:
            step, stop = make(task["round"])
            stops.append(stop)
            trial_dir = os.path.join(tmp, variant)
            writers[variant] = [open_trial_writer(trial_dir)] if variant == "on" else []
            reporters[variant] = Reporter(None, trial_dir=trial_dir, trial_number=0, observers=writers[variant])
            loops[variant] = step
        try:
            def iterate(variant: str, n: int) -> tuple[float, float]:
                step, reporter = loops[variant], reporters[variant]
                wall, cpu = time.perf_counter(), time.process_time()
                for _ in range(n):
                    reporter(**step())  # what train_loop does
                for writer in writers[variant]:  # the block's last events written and flushed: counted, none spills
                    writer.wait()
                return (time.perf_counter() - wall) / n * 1e3, (time.process_time() - cpu) / n * 1e3

            for variant in variants:
                iterate(variant, task["warmup"])
            for cycle in range(task["cycles"]):
                for variant in (variants if cycle % 2 == 0 else variants[::-1]):
                    ms, cpu_ms = iterate(variant, task["block"])
                    out[f"{variant}_ms"].append(ms)
                    out[f"{variant}_cpu_ms"].append(cpu_ms)
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
    tasks = [{"variant": w, "workload": w, "round": r, "cycles": args.cycles, "block": blocks[w],
              "warmup": args.warmup if w == "ppo" else args.warmup * 100}
             for r in range(args.rounds) for w in workloads]
    records = common.run_all(__file__, tasks, describe, verbose=args.verbose)
    done = {w: common.ok(records, w) for w in workloads}
    if not any(done.values()):
        print("every round failed")
        sys.exit(1)

    headers = ["workload", "iteration off (median)", "on (median)", "on / off (median of paired ratios)",
               "ratio IQR", "extra wall per iteration", "CPU on / off", "extra CPU per iteration"]
    rows, ratios = [], {}
    for w in workloads:
        if not done[w]:
            continue
        off = [x for r in done[w] for x in r["off_ms"]]
        on = [x for r in done[w] for x in r["on_ms"]]
        paired = _paired(done[w], "ms")
        ratios[w] = statistics.median(paired)
        q1, _, q3 = statistics.quantiles(paired, n=4) if len(paired) > 1 else (ratios[w], 0, ratios[w])
        extra_wall = statistics.median([a - b for r in done[w] for a, b in zip(r["on_ms"], r["off_ms"])])
        extra_cpu = statistics.median([a - b for r in done[w] for a, b in zip(r["on_cpu_ms"], r["off_cpu_ms"])])
        cpu_ratio = statistics.median(_paired(done[w], "cpu_ms"))
        rows.append([w, f"{statistics.median(off):.3f} ms", f"{statistics.median(on):.3f} ms",
                     f"{100 * (ratios[w] - 1):+.2f}%", f"{100 * (q1 - 1):+.2f}%..{100 * (q3 - 1):+.2f}%",
                     f"{extra_wall * 1e3:+.0f} µs", f"{100 * (cpu_ratio - 1):+.2f}%", f"{extra_cpu * 1e3:+.0f} µs"])
    print()
    print(common.text_table(headers, rows))
    print()
    full = args.rounds >= 3 and args.cycles >= 10 and args.warmup >= 30
    if not full:
        print("(short run: noisy; the full run uses --rounds 3 --cycles 10 --warmup 30)")
    if "ppo" in ratios:
        cheap = ratios["ppo"] - 1 <= MAX_COST
        print(f"ppo: TensorBoard costs {100 * (ratios['ppo'] - 1):+.2f}% per iteration (studies' default on if "
              f"<= {MAX_COST:.0%}): {common.verdict(cheap, full)} -> default {'on' if cheap else 'off'}")
    if args.markdown:
        print(common.markdown_block("TensorBoard overhead", headers, rows, info))
    common.finish(records, info, args.json, {"rounds": args.rounds, "cycles": args.cycles, "blocks": blocks})


if __name__ == "__main__":
    if not common.child_main(run_task):
        main()
