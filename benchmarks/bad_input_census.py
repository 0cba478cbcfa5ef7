"""Count how rltune handles the bad-input corpus of tests/bad_input/: clear, unclear, traceback, accepted, hang.

Runs the same case tables as ``tests/test_bad_input.py``, in this process,
each against its own copy of one recorded results dir (a finished study and
a trained PPO checkpoint), with a per-case time limit, and prints the counts
by kind of input and the cases that were not refused clearly::

    PYTHONPATH=. python benchmarks/bad_input_census.py [--timeout 30]

"changed" counts the cases after which a file recorded before was missing or
different. There is no peer to compare with: the numbers are rltune's alone.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1] / "tests"
sys.path.insert(0, str(TESTS))  # the case tables, and the trainables their studies run
os.environ.setdefault("RLTUNE_TRACKING", "0")

from bad_input import checkpoints, cli_flags, python_api, study_files  # noqa: E402
from bad_input.harness import OUTCOMES, build_recorded, changed, copy_context, digest, run_case  # noqa: E402

TABLES = {"study/train files": study_files.CASES, "CLI flags": cli_flags.CASES, "Python API": python_api.CASES,
          "checkpoints": checkpoints.CASES}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds before a case counts as a hang")
    parser.add_argument("--skip", action="append", default=[], metavar="ID",
                        help="count this case as a hang without running it (one that takes the machine's memory "
                             "in native code, where the time limit cannot interrupt it)")
    args = parser.parse_args()
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        recorded = build_recorded(Path(tmp))
        build_s = time.perf_counter() - start
        counts: dict[str, Counter] = {}
        bad: list[tuple[str, str, str]] = []
        for table, cases in TABLES.items():
            counts[table] = Counter()
            for i, case in enumerate(cases):
                if case.id in args.skip:
                    counts[table]["hang"] += 1
                    bad.append((case.id, "hang", "skipped (--skip)"))
                    continue
                ctx = copy_context(recorded, Path(tmp) / f"{table[:5]}{i}")
                before = digest(ctx.results)
                outcome = run_case(case, ctx, timeout_s=args.timeout)
                counts[table][outcome.kind] += 1
                if changed(before, ctx.results):
                    counts[table]["changed"] += 1
                if outcome.kind != "clear":
                    bad.append((case.id, outcome.kind, outcome.detail.splitlines()[-1][:200] if outcome.detail else ""))
    columns = ("tried", *OUTCOMES, "changed")
    print(f"{'input':20}" + "".join(f"{c:>10}" for c in columns))
    total = Counter()
    for table, c in counts.items():
        c["tried"] = sum(c[k] for k in OUTCOMES)
        total.update(c)
        print(f"{table:20}" + "".join(f"{c[k]:>10}" for k in columns))
    print(f"{'total':20}" + "".join(f"{total[k]:>10}" for k in columns))
    print(f"(recorded results dir built in {build_s:.1f}s; whole run {time.perf_counter() - start:.1f}s)")
    for case_id, kind, detail in bad:
        print(f"  {kind:10} {case_id}: {detail}")
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
