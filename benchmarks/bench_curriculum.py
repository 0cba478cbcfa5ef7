"""Curriculum vs hardest-task-from-the-start: env steps until PPO solves the longest corridor.

The env, PPO settings, curriculum and "solved" rule are those of
``examples/curriculum.py`` (imported from there):

- ``Corridor``: walk from cell 0 to the end of a corridor whose length is
  the task; reward 1.0 at the end, 0.0 elsewhere; episodes cut after 2 steps
  per cell. A random walk reaches the end of the 20-cell corridor in about
  0.2% of its episodes.
- ``curriculum``: a ``CurriculumCallback`` grows the corridor 4 -> 8 -> 12 ->
  16 -> 20, each time the success rate has been >= 0.8 for 2 iterations.
- ``from-start``: the same PPO in the 20-cell corridor from the first step.
- solved: after an iteration, the last 50 training episodes all ran in the
  20-cell corridor and >= 90% of them reached its end (checked after every
  iteration of 512 env steps; the figure is the env steps sampled so far,
  curriculum phases included).

Each run has a budget (``--max-steps``, default 150,000 env steps); a run
that does not solve it within the budget is reported as "not solved within
N", and counts as more than N in the medians. Every run is its own
subprocess; seeds alternate between the variants.

Full run (5 seeds, about 1 minute on 2 quiet cores)::

    .venv/bin/python benchmarks/bench_curriculum.py --json curriculum.json

Smoke test (2 seeds, 30,000-step budget, about 15 seconds)::

    .venv/bin/python benchmarks/bench_curriculum.py --quick
"""

from __future__ import annotations

import math
import os
import statistics
import sys
from pathlib import Path
from typing import Any

import _common as common

VARIANTS = ("curriculum", "from-start")
REPO = Path(__file__).resolve().parents[1]


# -- one run (in a child process) ----------------------------------------------------------------
def run_task(task: dict[str, Any]) -> dict[str, Any]:
    sys.path.insert(0, str(REPO))
    from examples.curriculum import train_until_solved

    run = train_until_solved(
        task["variant"] == "curriculum",
        task["seed"],
        task["max_steps"],
        verbose=False,
        results_dir=os.environ.get("RLTUNE_RESULTS_DIR"),
    )
    return {"steps": run["steps"], "iterations": run["iterations"], "seconds": run["seconds"], "phases": run["phases"]}


# -- the parent ----------------------------------------------------------------------------------
def steps_text(steps: int | None, budget: int) -> str:
    return f"not solved within {budget:,}" if steps is None else f"{steps:,}"


def describe(task: dict[str, Any], r: dict[str, Any]) -> str:
    text = steps_text(r["steps"], task["max_steps"])
    return f"{text} env steps ({r['iterations']} iterations, {r['seconds']:.1f} s)"


def censored_median(values: list[int | None], budget: int) -> tuple[float, bool]:
    """Median with unsolved runs counted as more than ``budget``.

    Returns (median, False), or (a lower bound, True) when the median depends on an unsolved run.
    """
    keyed = sorted(math.inf if v is None else float(v) for v in values)
    if not keyed:
        return math.nan, False
    mid = len(keyed) // 2
    middle = keyed[mid : mid + 1] if len(keyed) % 2 else keyed[mid - 1 : mid + 1]
    censored = any(math.isinf(m) for m in middle)
    return statistics.fmean(min(m, budget) for m in middle), censored


def main() -> None:
    parser = common.base_parser(__doc__)
    parser.add_argument("--seeds", type=int, default=5, help="seeds per variant (default 5: seeds 0..4)")
    parser.add_argument("--max-steps", type=int, default=150_000, help="env step budget of each run (default 150000)")
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated, from {', '.join(VARIANTS)}")
    parser.add_argument("--quick", action="store_true", help="smoke test: --seeds 2 --max-steps 30000")
    args = parser.parse_args()
    if args.quick:
        args.seeds, args.max_steps = 2, 30_000
    variants = common.parse_variants(args.variants, VARIANTS)

    info = common.machine_info()
    common.print_header(
        "Curriculum learning: env steps until PPO solves the 20-cell corridor (examples/curriculum.py)",
        info,
        [
            f"budget: {args.max_steps:,} env steps per run, seeds 0..{args.seeds - 1}, variants {', '.join(variants)}",
            "solved: the last 50 training episodes all in the 20-cell corridor, >= 90% of them reaching its end",
            "each run in its own subprocess, sequentially, seeds alternating between the variants",
        ],
    )
    tasks = [{"variant": v, "seed": s, "max_steps": args.max_steps} for s in range(args.seeds) for v in variants]
    records = common.run_all(__file__, tasks, describe, verbose=args.verbose)

    def steps_of(variant: str, seed: int) -> tuple[bool, int | None]:
        r = next((x for x in records if x["variant"] == variant and x["seed"] == seed), None)
        return (r is not None and "error" not in r), (None if r is None else r.get("steps"))

    print("\nenv steps until solved, per seed:")
    headers = ["seed"] + list(variants) + (["from-start / curriculum"] if len(variants) == 2 else [])
    rows = []
    for seed in range(args.seeds):
        row: list[Any] = [seed]
        figures = {}
        for v in variants:
            ok, steps = steps_of(v, seed)
            row.append(steps_text(steps, args.max_steps) if ok else "failed")
            figures[v] = steps if ok else None
        if len(variants) == 2:
            cur, start = figures["curriculum"], figures["from-start"]
            if cur is None:
                row.append("-")
            elif start is None:
                row.append(f"> {args.max_steps / cur:.1f}x")
            else:
                row.append(f"{start / cur:.1f}x")
        rows.append(row)
    print(common.text_table(headers, rows))

    print()
    medians = {}
    for v in variants:
        done = common.ok(records, v)
        steps = [r["steps"] for r in done]
        median, censored = censored_median(steps, args.max_steps)
        medians[v] = (median, censored)
        solved = sum(s is not None for s in steps)
        shown = f"> {median:,.0f}" if censored else f"{median:,.0f}"
        failed = args.seeds - len(done)
        print(f"{v}: median {shown} env steps; solved in {solved} of {len(done)} runs (failed runs: {failed})")
    if len(variants) == 2 and not math.isnan(medians["curriculum"][0]) and not medians["curriculum"][1]:
        (start, start_censored), (cur, _) = medians["from-start"], medians["curriculum"]
        ratio = start / cur
        print(
            f"median env steps from-start / curriculum: {'> ' if start_censored else ''}{ratio:.1f}x "
            f"(the curriculum needs {'more than ' if start_censored else ''}{ratio:.1f}x fewer env steps)"
        )
    if args.seeds < 5 or args.max_steps < 150_000:
        print("(not the full run of 5 seeds with a 150,000-step budget)")

    common.finish(records, info, args.json, {"seeds": args.seeds, "max_steps": args.max_steps})
    if args.markdown:
        md_rows = [[f"seed {row[0]}", *row[1:]] for row in rows]
        print(common.markdown_block("curriculum corridor", ["run", *headers[1:]], md_rows, info))


if __name__ == "__main__":
    if not common.child_main(run_task):
        main()
        sys.exit(0)
