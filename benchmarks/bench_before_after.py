"""rltune against an earlier rltune: the figures of the other benchmarks, for two checkouts, interleaved.

A redesign must not cost speed. This runs each benchmark's rltune figure
from two checkouts of the repository (``--before`` and ``--after``, each a
directory holding ``rltune/`` and ``benchmarks/``), each checkout with its
own benchmark script and its own code first on ``PYTHONPATH``, in rounds that
alternate which checkout goes first, and prints the median of each figure
and the after/before ratio (higher is better for throughput, lower for
times), both as the ratio of the medians and as the median of each
round's ratio (a round's two runs are back to back and share the machine's
speed of that moment; the verdict uses this one). The peer of every figure
here is the earlier rltune.

Measures (a short run each; the long runs are the other scripts' job):

- ``ppo``: PPO on CartPole-v1, env steps per second of training
  (``bench_ppo_cartpole.py``, variant ``rltune``: the default config).
- ``ppo-eager``: the same with ``torch_compile_learner`` off where the
  checkout has a switch for it (variant ``rltune-eager``, or ``rltune``
  when the checkout has no such variant).
- ``dqn``: DQN on CartPole-v1, env steps per second (``bench_dqn_cartpole.py``).
- ``sampling``: rollout workers' env steps per second, local and 1 worker x 8
  envs (``bench_sampling.py``).
- ``ma-sampling``: multi-agent sampling, agent steps per second of a local
  worker on 4 envs of 8 cart-poles each (``bench_multi_agent_sampling.py``).
- ``orchestrator``: a study of trivial function trials, and ``rltune tune``
  to its first result (``bench_orchestrator_overhead.py``), seconds.
- ``tracking``: a study's wall time with MLflow tracking on, and the extra
  time per training iteration it costs (``bench_tracking_overhead.py``).

Example (the checkout before the redesign in a git worktree)::

    git worktree add --detach ../before a97f5cb
    .venv/bin/python benchmarks/bench_before_after.py --before ../before --after . --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Optional

# name -> (script, arguments, {figure: (extractor, higher_is_better)})
Extractor = Callable[[dict, str], Optional[float]]


def _runs_rate(variant: str, steps_key: str = "env_steps", time_key: str = "train_wall_s") -> Extractor:
    def get(record: dict, _stdout: str) -> Optional[float]:
        runs = [r for r in record.get("runs", []) if r.get("variant") == variant and r.get(time_key)]
        if not runs:
            return None
        return statistics.median(r[steps_key] / r[time_key] for r in runs)

    return get


def _sampling_rate(variant: str) -> Extractor:
    def get(record: dict, _stdout: str) -> Optional[float]:
        runs = [r for r in record.get("runs", []) if r.get("variant") == variant and r.get("steps_per_s")]
        return statistics.median(r["steps_per_s"] for r in runs) if runs else None

    return get


def _multi_agent_rate(num_agents: int) -> Extractor:
    def get(record: dict, _stdout: str) -> Optional[float]:
        runs = [r for r in record.get("runs", []) if r.get("variant") == "rltune" and r.get("num_agents") == num_agents
                and r.get("agent_steps_per_s")]
        return statistics.median(r["agent_steps_per_s"] for r in runs) if runs else None

    return get


def _last_json(key: str) -> Extractor:
    def get(_record: dict, stdout: str) -> Optional[float]:
        for line in reversed(stdout.strip().splitlines()):
            try:
                values = json.loads(line)
            except ValueError:
                continue
            if isinstance(values, dict) and values.get(key):
                return statistics.median(values[key])
        return None

    return get


def _printed(pattern: str) -> Extractor:
    def get(_record: dict, stdout: str) -> Optional[float]:
        match = re.search(pattern, stdout)
        return float(match.group(1)) if match else None

    return get


MEASURES: dict[str, tuple[str, list[str], dict[str, tuple[Extractor, bool]]]] = {
    "ppo": ("bench_ppo_cartpole.py", ["--steps", "30000", "--seeds", "1", "--variants", "rltune"],
            {"PPO env steps/s (default config)": (_runs_rate("rltune"), True)}),
    "ppo-eager": ("bench_ppo_cartpole.py", ["--steps", "30000", "--seeds", "1", "--variants", "rltune-eager"],
                  {"PPO env steps/s (eager learner)": (_runs_rate("rltune-eager"), True)}),
    "dqn": ("bench_dqn_cartpole.py", ["--steps", "10000", "--seeds", "1", "--eval-every", "5000", "--variants", "rltune"],
            {"DQN env steps/s": (_runs_rate("rltune", time_key="train_time_s"), True)}),
    "sampling": ("bench_sampling.py", ["--steps", "20000", "--repeats", "2", "--variants", "rltune-local,rltune-1x8"],
                 {"sampling env steps/s, local worker": (_sampling_rate("rltune-local"), True),
                  "sampling env steps/s, 1 worker x 8 envs": (_sampling_rate("rltune-1x8"), True)}),
    "ma-sampling": ("bench_multi_agent_sampling.py", ["--agents", "8", "--variants", "rltune", "--rounds", "1",
                                                      "--repeats", "3", "--seconds", "1"],
                    {"multi-agent sampling agent steps/s, 8 agents x 4 envs": (_multi_agent_rate(8), True)}),
    "orchestrator": ("bench_orchestrator_overhead.py", ["--repeats", "1", "--trials", "10"],
                     {"study of 10 trivial trials, s": (_last_json("study_s"), False),
                      "rltune tune to first result, s": (_last_json("first_result_s"), False)}),
    "tracking": ("bench_tracking_overhead.py", ["--repeats", "1", "--iterations", "30"],
                 {"study with tracking on, s": (_printed(r"tracking off [\d.]+ s, on ([\d.]+) s"), False),
                  "tracking's extra time per iteration, ms": (_printed(r"per training iteration: (-?[\d.]+) ms"), False)}),
}


def run_one(checkout: Path, name: str, eager_variant: bool) -> dict[str, Optional[float]]:
    """One run of measure ``name`` from ``checkout``: its figures (None where the run gave none)."""
    script, args, figures = MEASURES[name]
    args = list(args)
    if name == "ppo-eager" and not eager_variant:
        args[args.index("rltune-eager")] = "rltune"  # a checkout without the switch trains eagerly by default
    with tempfile.TemporaryDirectory(prefix="rltune_ab_") as tmp:
        json_path = Path(tmp) / "record.json"
        extra = ["--json", str(json_path)] if name in ("ppo", "ppo-eager", "dqn", "sampling", "ma-sampling") else []
        env = {**os.environ, "PYTHONPATH": str(checkout)}
        proc = subprocess.run([sys.executable, str(checkout / "benchmarks" / script), *args, *extra],
                              cwd=checkout, env=env, capture_output=True, text=True, timeout=1800)
        record = json.loads(json_path.read_text()) if json_path.exists() else {}
    if name == "ppo-eager" and not eager_variant:
        for run in record.get("runs", []):
            run["variant"] = "rltune-eager"
    out = {}
    for figure, (extract, _higher) in figures.items():
        out[figure] = extract(record, proc.stdout) if proc.returncode == 0 else None
    if proc.returncode != 0:
        print(f"    {checkout}: {name} failed (exit {proc.returncode}): {proc.stderr.strip().splitlines()[-1:]}", flush=True)
    return out


def has_eager_variant(checkout: Path) -> bool:
    return "rltune-eager" in (checkout / "benchmarks" / "bench_ppo_cartpole.py").read_text()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="checkout of the earlier rltune")
    parser.add_argument("--after", type=Path, default=Path("."), help="checkout of this rltune (default .)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default=",".join(MEASURES), help=f"comma-separated, from {','.join(MEASURES)}")
    args = parser.parse_args()
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = [n for n in names if n not in MEASURES]
    if unknown:
        parser.error(f"unknown measure(s) {unknown}; known: {list(MEASURES)}")
    checkouts = {"before": args.before.resolve(), "after": args.after.resolve()}
    eager = {side: has_eager_variant(path) for side, path in checkouts.items()}
    print(f"load average at start: {os.getloadavg()[0]:.2f}; before {checkouts['before']}, after {checkouts['after']}", flush=True)
    values: dict[str, dict[str, list[float]]] = {}
    for r in range(args.rounds):
        order = ["before", "after"] if r % 2 == 0 else ["after", "before"]
        for name in names:
            for side in order:
                start = time.perf_counter()
                figures = run_one(checkouts[side], name, eager[side])
                shown = ", ".join(f"{k} {v:.4g}" for k, v in figures.items() if v is not None)
                print(f"round {r + 1} {side:6} {name}: {shown} ({time.perf_counter() - start:.0f} s, "
                      f"load {os.getloadavg()[0]:.2f})", flush=True)
                for figure, value in figures.items():
                    if value is not None:
                        values.setdefault(figure, {}).setdefault(side, []).append(value)
    print(f"\nload average at end: {os.getloadavg()[0]:.2f}\n")
    print("| figure | before (median) | after (median) | after/before (of the medians) | after/before per round (median) | within 5% |")
    print("| --- | --- | --- | --- | --- | --- |")
    higher = {figure: h for _script, _args, figures in MEASURES.values() for figure, (_e, h) in figures.items()}
    for figure, sides in values.items():
        if "before" not in sides or "after" not in sides:
            print(f"| {figure} | {sides.get('before')} | {sides.get('after')} | n/a | n/a | n/a |")
            continue
        b, a = statistics.median(sides["before"]), statistics.median(sides["after"])
        ratio = a / b if b else float("nan")
        # Each round's pair ran back to back, so its ratio shares that moment's machine speed.
        paired = statistics.median(x / y for x, y in zip(sides["after"], sides["before"]) if y) if b else float("nan")
        better = paired >= 0.95 if higher[figure] else paired <= 1.05
        print(f"| {figure} | {b:.4g} (n={len(sides['before'])}) | {a:.4g} (n={len(sides['after'])}) | {ratio:.3f} | "
              f"{paired:.3f} | {'yes' if better else 'NO'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
