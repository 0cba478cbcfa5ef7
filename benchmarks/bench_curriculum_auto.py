"""Automatic curricula vs uniform task sampling vs the hardest task only: env steps until PPO solves the
longest corridor of a task space; and the curriculum machinery's cost while sampling.

The env, PPO settings and "solved" rule are those of ``examples/curriculum_auto.py``:

- tasks (``--space``): ``long`` (default), corridor lengths 2, 4, ..., 60
  (``LongCorridor.task_space``), or ``short``, lengths 2, 4, ..., 20
  (``LengthCorridor.task_space``); reward 1.0 at the end, episodes cut after
  2 steps per cell;
- ``learning_progress`` / ``plr``: ``curriculum: {type: ...}``, every env
  draws its next length at each reset; ``uniform``: the same machinery with
  every length alike; ``hardest``: the longest corridor only, no curriculum;
- solved: after every other iteration (512 env steps each), 50 episodes of the
  policy in the longest corridor, actions sampled, reach its end >= 90% of the
  time; the figure is the training env steps so far (a run not solved within
  the budget counts as the budget in the median).

Overhead (``--overhead``): one process, three trainers on 8 corridors of one
length (``tasks: [20]``, so every variant steps the same episodes):
``none``, ``learning_progress`` and ``plr``. Rounds of 512 env steps of the
local worker's ``sample()`` are timed in interleaved cycles (wall time and
the thread's CPU time); the machinery is the worker-side picker's own time
inside those ``sample()`` calls, plus the driver's per-iteration update
(``AutoCurriculumCallback.on_train_result``, median over 9 real iterations)
as a share of one round's sampling time; "vs none" is the median of the
paired per-cycle wall ratios.

Runs (each run its own subprocess, seeds alternating between variants)::

    .venv/bin/python benchmarks/bench_curriculum_auto.py                 # seeds 0 1, budget 60k, lengths 2..60
    .venv/bin/python benchmarks/bench_curriculum_auto.py --seeds 5 --max-steps 100000
    .venv/bin/python benchmarks/bench_curriculum_auto.py --space short --seeds 5
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
HEADERS = ["variant", "sampling", "vs none (paired)", "picker (in sample())", "driver update", "machinery",
           "machinery (CPU time)"]
REPO = Path(__file__).resolve().parents[1]
LONGEST = {"long": 60, "short": 20}  # each task space's hardest task (examples/curriculum_auto.py's SPACES)


# -- children ------------------------------------------------------------------------------------
def run_task(task: dict[str, Any]) -> dict[str, Any]:
    sys.path.insert(0, str(REPO))
    if task["variant"] == "overhead":
        return measure_overhead(task["cycles"], task["rounds"])
    from examples.curriculum_auto import train_until_solved

    run = train_until_solved(task["variant"], task["seed"], task["max_steps"], space=task["space"], verbose=False)
    return {"steps": run["steps"], "iterations": run["iterations"], "seconds": run["seconds"]}


def _clocks() -> tuple[float, float]:
    """Wall time and this thread's CPU time (the local worker samples in this thread; torch runs on 1 thread)."""
    return time.perf_counter(), time.thread_time()


def _timed(function: Any, spent: list[tuple[float, float]]) -> Any:
    """``function``, appending the (wall, CPU) seconds of each call to ``spent``."""

    def timed(**kwargs: Any) -> None:
        start = _clocks()
        function(**kwargs)
        spent.append(tuple(end - begin for end, begin in zip(_clocks(), start)))  # type: ignore[arg-type]

    return timed


def measure_overhead(cycles: int, rounds: int) -> dict[str, Any]:
    """Per-cycle (wall, CPU) sampling seconds of each variant (interleaved); the picker's and the driver update's."""
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
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in trainers}
        picker_times: dict[str, list[tuple[float, float]]] = {name: [] for name in trainers if name != "none"}
        for name, spent in picker_times.items():  # the picker's own time, measured inside the same sample() calls
            picker = find_picker(trainers[name].workers.local_worker.callbacks)
            picker.on_sample_end = _timed(picker.on_sample_end, spent)  # type: ignore[method-assign]
        for _ in range(cycles):
            for name, trainer in trainers.items():
                worker = trainer.workers.local_worker
                start = _clocks()
                for _ in range(rounds):
                    worker.sample()
                times[name].append(tuple(end - begin for end, begin in zip(_clocks(), start)))
        update: dict[str, list[float]] = {}
        for name in ("learning_progress", "plr"):
            callback = next(c for c in getattr(trainers[name].callbacks, "callbacks", [trainers[name].callbacks])
                            if isinstance(c, AutoCurriculumCallback))
            spent: list[tuple[float, float]] = []
            callback.on_train_result = _timed(callback.on_train_result, spent)  # type: ignore[method-assign]
            for _ in range(9):
                trainers[name].train()
            update[name] = [statistics.median(clock) for clock in zip(*spent)]
    finally:
        for trainer in trainers.values():
            trainer.stop()
    picker_share = {name: [sum(c) / sum(t) for c, t in zip(zip(*spent), zip(*times[name]))]
                    for name, spent in picker_times.items()}
    return {"times": times, "update_s": update, "rounds": rounds, "picker_share": picker_share}


# -- the parent ----------------------------------------------------------------------------------
def steps_text(steps: int | None, budget: int) -> str:
    return f"not solved within {budget:,}" if steps is None else f"{steps:,}"


def describe(task: dict[str, Any], r: dict[str, Any]) -> str:
    if task["variant"] == "overhead":
        return "overhead measured"
    return f"{steps_text(r['steps'], task['max_steps'])} env steps ({r['iterations']} iterations, {r['seconds']:.1f} s)"


def report_solve(records: list[dict[str, Any]], variants: list[str], seeds: int, budget: int,
                 longest: int) -> list[list[Any]]:
    rows = []
    for seed in range(seeds):
        row: list[Any] = [seed]
        for v in variants:
            r = next((x for x in records if x["variant"] == v and x["seed"] == seed), None)
            row.append("failed" if r is None or "error" in r else steps_text(r["steps"], budget))
        rows.append(row)
    print(f"\nenv steps until the {longest}-cell corridor is solved, per seed:")
    print(common.text_table(["seed", *variants], rows))
    print()
    for v in variants:
        steps = [r["steps"] for r in common.ok(records, v)]
        solved = [s for s in steps if s is not None]
        median = statistics.median([budget if s is None else s for s in steps]) if steps else float("nan")
        shown = f">= {budget:,}" if median >= budget else f"{median:,.0f}"
        print(f"{v}: median {shown} env steps (unsolved counted as the budget); solved in {len(solved)} of "
              f"{len(steps)} runs")
    return rows


def report_overhead(record: dict[str, Any]) -> list[list[Any]]:
    times, rounds = record["times"], record["rounds"]
    rows = []
    print(f"\nsampling time per {rounds} x 512 env steps (median of cycles), and the curriculum's cost:")
    for name in ("none", "learning_progress", "plr"):
        wall = statistics.median(t[0] for t in times[name])
        if name == "none":
            rows.append([name, f"{wall * 1000:.1f} ms", "-", "-", "-", "-", "-"])
            continue
        shares = []
        for clock in (0, 1):  # wall, then CPU
            base = statistics.median(t[clock] for t in times["none"]) / rounds  # one iteration's sampling
            shares.append(record["picker_share"][name][clock] + record["update_s"][name][clock] / base)
        paired = statistics.median(t[0] / b[0] - 1.0 for t, b in zip(times[name], times["none"]))
        picker, update = record["picker_share"][name][0], shares[0] - record["picker_share"][name][0]
        rows.append([name, f"{wall * 1000:.1f} ms", f"{paired:+.1%}", f"{picker:.1%}", f"{update:.1%}",
                     f"{shares[0]:.1%}", f"{shares[1]:.1%}"])
    print(common.text_table(HEADERS, rows))
    print("(vs none: paired per-cycle wall ratios, noisy on a busy machine; picker: its own wall time inside the same "
          "sample() calls; driver: one update per 512-step iteration; machinery = picker + driver, in wall time and "
          "in this thread's CPU time, which a busy machine inflates less)")
    return rows


def main() -> None:
    parser = common.base_parser(__doc__)
    parser.add_argument("--seeds", type=int, default=2, help="seeds per variant (default 2: seeds 0, 1)")
    parser.add_argument("--max-steps", type=int, default=60_000, help="env step budget of each run (default 60000)")
    parser.add_argument("--space", choices=sorted(LONGEST), default="long",
                        help="task space: long (lengths 2..60, default) or short (2..20)")
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
    variants, longest = common.parse_variants(args.variants, VARIANTS), LONGEST[args.space]
    common.print_header(
        f"Automatic curricula: env steps until PPO solves the {longest}-cell corridor (examples/curriculum_auto.py)",
        info,
        [f"tasks: lengths 2, 4, ..., {longest}; budget {args.max_steps:,} env steps per run, seeds "
         f"0..{args.seeds - 1}, variants {', '.join(variants)}",
         f"solved: 50 sampled-action episodes in the {longest}-cell corridor, >= 90% reaching its end"],
    )
    tasks = [{"variant": v, "seed": s, "max_steps": args.max_steps, "space": args.space}
             for s in range(args.seeds) for v in variants]
    records = common.run_all(__file__, tasks, describe, verbose=args.verbose)
    rows = report_solve(records, variants, args.seeds, args.max_steps, longest)
    common.finish(records, info, args.json, {"seeds": args.seeds, "max_steps": args.max_steps, "space": args.space})
    if args.markdown:
        print(common.markdown_block("automatic curricula", ["seed", *variants], rows, info))


if __name__ == "__main__":
    if not common.child_main(run_task):
        main()
        sys.exit(0)
