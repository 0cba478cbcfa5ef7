"""What callbacks cost while sampling: rltune's sampling throughput with and without callbacks.

Eight CartPole-v1 envs in the trainer's process (PPO, ``num_workers`` 0,
``rollout_fragment_length`` 256, the 64x64 policy of the PPO benchmark),
timing ``trainer.workers.sample(N)`` (envs, batched policy forward with the
value head, GAE, episode bookkeeping) with ``config["callbacks"]``:

- ``none``: not set;
- ``default``: ``DefaultCallbacks`` (every hook a no-op);
- ``train-result``: a class overriding ``on_train_result`` only (a
  curriculum or a metric added to results: nothing runs while sampling);
- ``episode-hooks``: a class overriding ``on_episode_start/step/end`` (the
  pole-angle tracking of ``examples/callbacks_pole_angle.py``): what
  per-step Python hooks cost; a reference, not judged.

Hooks that are not overridden are never called and episodes are only
tracked when an episode hook is overridden, so ``default`` and
``train-result`` should sample as fast as ``none``. Target: ``default``
within 3% of ``none`` (median env steps/s).

Each round is one subprocess holding one trainer per variant; after a
warm-up of each, it runs ``--repeats`` cycles, each timing every variant once
in quick succession (the order rotates every cycle). The figure judged is
the median over all cycles of the paired ratio (variant / ``none`` in the
same cycle): a change in machine load between cycles cancels out of it. The
median throughputs are shown too, but on a busy machine they spread with
the load.

Full run (about 1 minute on 2 quiet cores)::

    .venv/bin/python benchmarks/bench_callbacks_overhead.py --json callbacks_overhead.json

Smoke test (about 5-10 seconds)::

    .venv/bin/python benchmarks/bench_callbacks_overhead.py --quick
"""

from __future__ import annotations

import statistics
import sys
import time
from typing import Any

import _common as common

NUM_ENVS = 8
FRAGMENT = 256
VARIANTS = ("none", "default", "train-result", "episode-hooks")
BASELINE = "none"
TARGET = "default"
MAX_SLOWDOWN = 0.03


# -- one round (in a child process) ------------------------------------------------------------------
def _callbacks(variant: str) -> Any:
    from rltune.callbacks import DefaultCallbacks

    class TrainResultOnly(DefaultCallbacks):
        def on_train_result(self, *, trainer, result, **kwargs):
            result["seen_by_callback"] = True

    class EpisodeHooks(DefaultCallbacks):
        def on_episode_start(self, *, episode, **kwargs):
            episode.user_data["angles"] = [abs(float(episode.last_observation()[2]))]

        def on_episode_step(self, *, episode, **kwargs):
            episode.user_data["angles"].append(abs(float(episode.last_observation()[2])))

        def on_episode_end(self, *, episode, **kwargs):
            angles = episode.user_data["angles"]
            episode.custom_metrics["pole_angle"] = sum(angles) / len(angles)

    return {
        "none": None,
        "default": DefaultCallbacks,
        "train-result": TrainResultOnly,
        "episode-hooks": EpisodeHooks,
    }[variant]


def run_task(task: dict[str, Any]) -> dict[str, Any]:
    import torch

    from rltune.trainers import PPO

    torch.set_num_threads(1)
    trainers = {}
    for variant in task["variants"]:
        config = {
            "env": "CartPole-v1",
            "num_workers": 0,
            "num_envs_per_worker": NUM_ENVS,
            "rollout_fragment_length": FRAGMENT,
            "train_batch_size": FRAGMENT * NUM_ENVS,
            "sgd_minibatch_size": 128,
            "model": {"fcnet_hiddens": [64, 64], "fcnet_activation": "tanh"},
            "seed": task["round"],
        }
        callbacks = _callbacks(variant)
        if callbacks is not None:
            config["callbacks"] = callbacks
        trainers[variant] = PPO(config=config)
    try:
        def measure(variant: str) -> float:
            workers = trainers[variant].workers
            steps = 0
            start = time.perf_counter()
            while steps < task["steps"]:
                steps += workers.sample(FRAGMENT * NUM_ENVS).env_steps
            return steps / (time.perf_counter() - start)

        for variant in task["variants"]:  # warm-up: first resets, lazy allocations
            trainers[variant].workers.sample(FRAGMENT * NUM_ENVS)
        rates: dict[str, list[float]] = {v: [] for v in task["variants"]}
        order = list(task["variants"])
        for repeat in range(task["repeats"]):
            shift = repeat % len(order)
            for variant in order[shift:] + order[:shift]:
                rates[variant].append(measure(variant))
        return {"rates": rates}
    finally:
        for trainer in trainers.values():
            trainer.stop()


# -- the parent --------------------------------------------------------------------------------------
def describe(task: dict[str, Any], r: dict[str, Any]) -> str:
    medians = ", ".join(f"{v} {statistics.median(rates):,.0f}" for v, rates in r["rates"].items())
    return f"{medians} env steps/s (medians)"


def main() -> None:
    parser = common.base_parser(__doc__)
    parser.add_argument("--steps", type=int, default=20_000, help="env steps per timed measurement (default 20000)")
    parser.add_argument(
        "--repeats", type=int, default=15, help="cycles (one measurement of each variant) per round (default 15)"
    )
    parser.add_argument("--rounds", type=int, default=3, help="subprocesses, one after the other (default 3)")
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated, from {', '.join(VARIANTS)}")
    parser.add_argument("--quick", action="store_true", help="smoke test: --steps 10000 --repeats 5 --rounds 1")
    args = parser.parse_args()
    if args.quick:
        args.steps, args.repeats, args.rounds = 10_000, 5, 1
    variants = common.parse_variants(args.variants, VARIANTS)
    if BASELINE not in variants:
        variants.insert(0, BASELINE)

    info = common.machine_info()
    common.print_header(
        "Callback overhead while sampling: 8 CartPole-v1 envs, PPO policy 64x64, num_workers 0",
        info,
        [
            f"budget: {args.rounds} round(s) x {args.repeats} cycles, each timing every variant once "
            f"over >= {args.steps:,} env steps, after one warm-up",
            f"trainer.workers.sample({FRAGMENT * NUM_ENVS}) per call (rollout_fragment_length {FRAGMENT}); "
            "torch 1 thread",
        ],
    )
    tasks = [
        {"variant": "all", "round": r, "variants": variants, "steps": args.steps, "repeats": args.repeats}
        for r in range(args.rounds)
    ]
    records = common.run_all(__file__, tasks, describe, verbose=args.verbose)
    done = [r for r in records if "error" not in r]
    if not done:
        print("every round failed")
        sys.exit(1)
    rates = {v: [x for r in done for x in r["rates"][v]] for v in variants}
    # Paired ratios: each cycle's measurement of a variant over that cycle's measurement of the baseline.
    paired = {v: [x / b for r in done for x, b in zip(r["rates"][v], r["rates"][BASELINE])] for v in variants}
    medians = {v: statistics.median(rates[v]) for v in variants}
    ratios = {v: statistics.median(paired[v]) for v in variants}

    headers = ["callbacks", "env steps/s (median)", "min..max", f"vs {BASELINE} (median of paired ratios)", "ratio IQR"]
    rows = []
    for v in variants:
        q1, _, q3 = statistics.quantiles(paired[v], n=4) if len(paired[v]) > 1 else (ratios[v], 0, ratios[v])
        rows.append([
            v,
            f"{medians[v]:,.0f}",
            f"{min(rates[v]):,.0f}..{max(rates[v]):,.0f}",
            f"{100 * (ratios[v] - 1):+.1f}%",
            f"{100 * (q1 - 1):+.1f}%..{100 * (q3 - 1):+.1f}%",
        ])
    print()
    print(common.text_table(headers, rows))
    print()
    full = args.steps >= 20_000 and args.repeats >= 15 and args.rounds >= 3
    if not full:
        print("(short run: noisy; the full run uses --steps 20000 --repeats 15 --rounds 3)")
    for v in variants:
        if v == BASELINE:
            continue
        verdict = ""
        if v == TARGET:
            verdict = f" (target: within {MAX_SLOWDOWN:.0%}): {common.verdict(ratios[v] >= 1 - MAX_SLOWDOWN, full)}"
        print(f"{v} / {BASELINE}: {ratios[v]:.3f}{verdict}")

    common.finish(records, info, args.json, {"steps": args.steps, "repeats": args.repeats, "rounds": args.rounds})
    if args.markdown:
        print(common.markdown_block("callback overhead", headers, rows, info))


if __name__ == "__main__":
    if not common.child_main(run_task):
        main()
        sys.exit(0)
