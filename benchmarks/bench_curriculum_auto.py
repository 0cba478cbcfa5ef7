"""Automatic curricula vs uniform task sampling vs the hardest task only: env steps until PPO solves the
20-cell corridor; and the curriculum machinery's cost while sampling.

The env, PPO settings and "solved" rule are those of ``examples/curriculum_auto.py``:

- tasks: corridor lengths 2, 4, ..., 20 (``LengthCorridor.task_space``);
  reward 1.0 at the end, episodes cut after 2 steps per cell;
- ``learning_progress`` / ``plr``: ``curriculum: {type: ...}``, every env
  draws its next length at each reset; ``uniform``: the same machinery with
  every length alike; ``hardest``: the 20-cell corridor only, no curriculum;
- solved: after every other iteration (512 env steps each), 50 episodes of the
  policy in the 20-cell corridor, actions sampled, reach its end >= 90% of the
  time; the figure is the training env steps so far.

Overhead (``--overhead``): one process, three trainers on 8 corridors of one
length (``tasks: [20]``, so every variant steps the same episodes):
``none``, ``learning_progress`` and ``plr``. Rounds of 512 env steps of the
local worker's ``sample()`` are timed in interleaved cycles; the overhead is
the median of the paired per-cycle ratios, plus the driver's per-iteration
update (``AutoCurriculumCallback.on_train_result``, timed over real
iterations) as a share of one round's sampling time.

Runs (each run its own subprocess, seeds alternating between variants)::

    .venv/bin/python benchmarks/bench_curriculum_auto.py                 # seeds 0 1, budget 60k
    .venv/bin/python benchmarks/bench_curriculum_auto.py --seeds 5 --max-steps 150000
    .venv/bin/python benchmarks/bench_curriculum_auto.py --overhead --cycles 15
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Any

import _common as common

VARIANTS = ("learning_progress", "plr", "uniform", "hardest")
HEADERS = ["variant", "sampling", "vs none (paired)", "picker (in sample())", "driver update", "machinery"]
REPO = Path(__file__).resolve().parents[1]


# -- children ------------------------------------------------------------------------------------
def run_task(task: dict[str, Any]) -> dict[str, Any]:
    sys.path.insert(0, str(REPO))
    if task["variant"] == "overhead":
        return measure_overhead(task["cycles"], task["rounds"])
    from examples.curriculum_auto import train_until_solved

    run = train_until_solved(task["variant"], task["seed"], task["max_steps"], verbose=False)
    return {"steps": run["steps"], "iterations": run["iterations"], "seconds": run["seconds"]}


def measure_overhead(cycles: int, rounds: int) -> dict[str, Any]:
    """Per-cycle sampling seconds of each variant (interleaved), and the driver update's seconds per iteration."""
    from examples.curriculum_auto import CONFIG
    from rltune.callbacks import AutoCurriculumCallback
    from rltune.callbacks._auto_curriculum import find_picker
    from rltune.trainers import PPO

    blocks = {"none": None, "learning_progress": {"type": "learning_progress", "tasks": [20]},
              "plr": {"type": "plr", "tasks": [20]}}
    trainers = {}
    for name, block in blocks.items():
        config = {**CONFIG, "seed": 0, **({"curriculum": block} if block else {})}
        trainers[name] = PPO(config=config, results_dir="/tmp/rltune_bench")
    try:
        for trainer in trainers.values():
            trainer.workers.local_worker.sample()  # warm up
        times: dict[str, list[float]] = {name: [] for name in trainers}
        picker_times: dict[str, list[float]] = {name: [] for name in trainers if name != "none"}
        for name in picker_times:  # the picker's own time, measured inside the same sample() calls
            picker = find_picker(trainers[name].workers.local_worker.callbacks)

            def timed_picker(*, _original=picker.on_sample_end, _spent=picker_times[name], **kwargs: Any) -> None:
                start = time.perf_counter()
                _original(**kwargs)
                _spent.append(time.perf_counter() - start)

            picker.on_sample_end = timed_picker  # type: ignore[method-assign]
        for _ in range(cycles):
            for name, trainer in trainers.items():
                worker = trainer.workers.local_worker
                start = time.perf_counter()
                for _ in range(rounds):
                    worker.sample()
                times[name].append(time.perf_counter() - start)
        update: dict[str, float] = {}
        for name in ("learning_progress", "plr"):
            callback = next(c for c in getattr(trainers[name].callbacks, "callbacks", [trainers[name].callbacks])
                            if isinstance(c, AutoCurriculumCallback))
            spent, original = [], callback.on_train_result

            def timed(*, _original=original, _spent=spent, **kwargs: Any) -> None:
                start = time.perf_counter()
                _original(**kwargs)
                _spent.append(time.perf_counter() - start)

            callback.on_train_result = timed  # type: ignore[method-assign]
            for _ in range(5):
                trainers[name].train()
            update[name] = statistics.median(spent)
    finally:
        for trainer in trainers.values():
            trainer.stop()
    picker_share = {name: sum(spent) / sum(times[name]) for name, spent in picker_times.items()}
    return {"times": times, "update_s": update, "rounds": rounds, "picker_share": picker_share}


# -- the parent ----------------------------------------------------------------------------------
def steps_text(steps: int | None, budget: int) -> str:
    return f"not solved within {budget:,}" if steps is None else f"{steps:,}"


def describe(task: dict[str, Any], r: dict[str, Any]) -> str:
    if task["variant"] == "overhead":
        return "overhead measured"
    return f"{steps_text(r['steps'], task['max_steps'])} env steps ({r['iterations']} iterations, {r['seconds']:.1f} s)"


def report_solve(records: list[dict[str, Any]], variants: list[str], seeds: int, budget: int) -> list[list[Any]]:
    rows = []
    for seed in range(seeds):
        row: list[Any] = [seed]
        for v in variants:
            r = next((x for x in records if x["variant"] == v and x["seed"] == seed), None)
            row.append("failed" if r is None or "error" in r else steps_text(r["steps"], budget))
        rows.append(row)
    print("\nenv steps until the 20-cell corridor is solved, per seed:")
    print(common.text_table(["seed", *variants], rows))
    print()
    for v in variants:
        steps = [r["steps"] for r in common.ok(records, v)]
        solved = [s for s in steps if s is not None]
        median = statistics.median([s if s is not None else float("inf") for s in steps]) if steps else float("nan")
        shown = f"> {budget:,}" if median == float("inf") else f"{median:,.0f}"
        print(f"{v}: median {shown} env steps; solved in {len(solved)} of {len(steps)} runs")
    return rows


def report_overhead(record: dict[str, Any]) -> list[list[Any]]:
    times, rounds = record["times"], record["rounds"]
    base = times["none"]
    rows = []
    print(f"\nsampling time per {rounds} x 512 env steps (median of cycles), and the curriculum's cost:")
    for name in ("none", "learning_progress", "plr"):
        median = statistics.median(times[name])
        if name == "none":
            rows.append([name, f"{median * 1000:.1f} ms", "-", "-", "-", "-"])
            continue
        ratios = sorted(t / b - 1.0 for t, b in zip(times[name], base))
        paired = statistics.median(ratios)
        share = record["picker_share"][name]
        update = record["update_s"][name] / (statistics.median(base) / rounds)
        rows.append([name, f"{median * 1000:.1f} ms", f"{paired:+.1%}", f"{share:.1%}", f"{update:.1%}",
                     f"{share + update:.1%}"])
    print(common.text_table(HEADERS, rows))
    print("(workers vs none: paired per-cycle ratios, noisy on a busy machine; picker: its own time inside the same "
          "sample() calls; driver: one update per 512-step iteration; machinery = picker + driver)")
    return rows


def main() -> None:
    parser = common.base_parser(__doc__)
    parser.add_argument("--seeds", type=int, default=2, help="seeds per variant (default 2: seeds 0, 1)")
    parser.add_argument("--max-steps", type=int, default=60_000, help="env step budget of each run (default 60000)")
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated, from {', '.join(VARIANTS)}")
    parser.add_argument("--overhead", action="store_true", help="measure the machinery's cost instead")
    parser.add_argument("--cycles", type=int, default=9, help="--overhead: interleaved cycles (default 9)")
    parser.add_argument("--rounds", type=int, default=4, help="--overhead: sample() rounds per cycle (default 4)")
    args = parser.parse_args()
    info = common.machine_info()
    if args.overhead:
        common.print_header("Automatic curricula: the machinery's cost while sampling (PPO, 8 corridors)", info,
                            [f"{args.cycles} cycles x {args.rounds} rounds of 512 env steps per variant, interleaved"])
        records = common.run_all(__file__, [{"variant": "overhead", "cycles": args.cycles, "rounds": args.rounds}],
                                 describe, verbose=args.verbose)
        rows = report_overhead(records[0]) if "error" not in records[0] else []
        common.finish(records, info, args.json, {"cycles": args.cycles, "rounds": args.rounds})
        if args.markdown and rows:
            print(common.markdown_block("curriculum overhead", HEADERS, rows, info))
        return
    variants = common.parse_variants(args.variants, VARIANTS)
    common.print_header(
        "Automatic curricula: env steps until PPO solves the 20-cell corridor (examples/curriculum_auto.py)", info,
        [f"budget {args.max_steps:,} env steps per run, seeds 0..{args.seeds - 1}, variants {', '.join(variants)}",
         "solved: 50 sampled-action episodes in the 20-cell corridor, >= 90% reaching its end"],
    )
    tasks = [{"variant": v, "seed": s, "max_steps": args.max_steps} for s in range(args.seeds) for v in variants]
    records = common.run_all(__file__, tasks, describe, verbose=args.verbose)
    rows = report_solve(records, variants, args.seeds, args.max_steps)
    common.finish(records, info, args.json, {"seeds": args.seeds, "max_steps": args.max_steps})
    if args.markdown:
        print(common.markdown_block("automatic curricula", ["seed", *variants], rows, info))


if __name__ == "__main__":
    if not common.child_main(run_task):
        main()
        sys.exit(0)
