"""Multi-objective pruning: rltune's Pareto rule against Optuna's own multi-objective study (which cannot prune).

The trainable: a synthetic learning curve, ``reward(step) = q * (1 - exp(-step / 8))``
(max) and ``cost = size`` (min), ``--steps`` steps, where a trial's config
draws ``q`` in [0, 1] and ``size`` in [1, 10]; each step sleeps ``--step-ms``
(the work of one training iteration). The same configs in every variant: a
random sampler with the same seed draws the same sequence whatever the results.

Variants, one after the other in one process:

- ``optuna``: Optuna's ``study.optimize`` with ``directions=[maximize, minimize]``
  and a ``RandomSampler`` (Optuna has no pruner for several objectives,
  optuna#3450): every trial runs every step, in this process;
- ``rltune-none``: ``tune.run`` of the same, ``scheduler: none``;
- ``rltune-pareto``: ``scheduler: {type: pareto, k: 2, warmup_steps: 3}`` (``--k``, ``--warmup-steps``).

Figures: steps trained (the compute), wall time, the final front's
hypervolume (reference point reward 0, size 11) and the ratio of each to the
``optuna`` peer; the target is the same front (hypervolume ratio >= 0.95) for
at most 60% of the peer's steps.

    .venv/bin/python benchmarks/bench_multiobj.py                     # ~2-3 min
    .venv/bin/python benchmarks/bench_multiobj.py --trials 8 --steps 10
"""

from __future__ import annotations

import argparse
import math
import os
import tempfile
import time
from typing import Any

STEP_SCALE = 8.0


def curve(config: dict[str, Any], reporter: Any) -> None:
    """The synthetic trial: reward rises to ``q`` with the steps; cost is the size."""
    for step in range(1, config["steps"] + 1):
        time.sleep(config["step_ms"] / 1000)
        reporter(reward=config["q"] * (1 - math.exp(-step / STEP_SCALE)), size=config["size"])


def hypervolume(points: list[tuple[float, float]], reference: tuple[float, float] = (0.0, 11.0)) -> float:
    """The area that a (reward max, size min) front dominates, up to the reference point."""
    area, best_reward = 0.0, reference[0]
    for reward, size in sorted(points, key=lambda p: p[1]):  # by size, smallest first
        if reward > best_reward:
            area += (reward - best_reward) * (reference[1] - size)
            best_reward = reward
    return area


def run_optuna(args: argparse.Namespace) -> dict[str, Any]:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    steps = 0

    def objective(trial: Any) -> tuple[float, float]:
        nonlocal steps
        config = {"q": trial.suggest_float("q", 0, 1), "size": trial.suggest_int("size", 1, 10),
                  "steps": args.steps, "step_ms": args.step_ms}
        last: dict[str, float] = {}
        curve(config, lambda **result: last.update(result))
        steps += args.steps
        return last["reward"], last["size"]

    start = time.perf_counter()
    study = optuna.create_study(directions=["maximize", "minimize"], sampler=optuna.samplers.RandomSampler(seed=args.seed))
    study.optimize(objective, n_trials=args.trials)
    wall = time.perf_counter() - start
    return {"steps": steps, "wall_s": wall, "hv": hypervolume([tuple(t.values) for t in study.best_trials]),
            "pruned": 0}


def run_rltune(args: argparse.Namespace, scheduler: Any) -> dict[str, Any]:
    from rltune import tune

    with tempfile.TemporaryDirectory(prefix="bench_multiobj_") as results:
        start = time.perf_counter()
        analysis = tune.run(curve, config={"q": tune.uniform(0, 1), "size": tune.randint(1, 11), "steps": args.steps,
                                           "step_ms": args.step_ms},
                            metric=["reward", "size"], mode=["max", "min"], search_alg="random", seed=args.seed,
                            n_trials=args.trials, scheduler=scheduler, results_dir=results, name="bench",
                            verbose=0, tracking=False)
        wall = time.perf_counter() - start
    steps = sum(t.training_iteration for t in analysis.trials)
    return {"steps": steps, "wall_s": wall, "hv": hypervolume([tuple(t.value) for t in analysis.best_trials]),
            "pruned": sum(t.state == "PRUNED" for t in analysis.trials)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=24)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--step-ms", type=float, default=20.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--k", type=int, default=2, help="the Pareto rule's k")
    parser.add_argument("--warmup-steps", type=int, default=3)
    args = parser.parse_args()
    print(f"{args.trials} trials of {args.steps} steps ({args.step_ms:g} ms each), seed {args.seed}, "
          f"pareto k {args.k}, warmup_steps {args.warmup_steps}; load average {os.getloadavg()[0]:.1f}")
    runs = {"optuna": run_optuna(args), "rltune-none": run_rltune(args, "none"),
            "rltune-pareto": run_rltune(args, {"type": "pareto", "k": args.k, "warmup_steps": args.warmup_steps})}
    peer = runs["optuna"]
    print(f"{'variant':14} {'steps':>6} {'pruned':>6} {'wall s':>7} {'hypervolume':>11} "
          f"{'steps/peer':>10} {'hv/peer':>7}")
    for name, r in runs.items():
        print(f"{name:14} {r['steps']:>6} {r['pruned']:>6} {r['wall_s']:>7.1f} {r['hv']:>11.3f} "
              f"{r['steps'] / peer['steps']:>10.2f} {r['hv'] / peer['hv']:>7.3f}")
    pareto = runs["rltune-pareto"]
    met = pareto["steps"] <= 0.6 * peer["steps"] and pareto["hv"] >= 0.95 * peer["hv"]
    print(f"target (same front, hv ratio >= 0.95, for <= 60% of the peer's steps): {'MET' if met else 'NOT MET'}")


if __name__ == "__main__":
    main()
