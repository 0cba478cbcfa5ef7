"""Sampling-only throughput: rltune's rollout workers vs gymnasium's own vector env (the ceiling).

Eight CartPole-v1 envs in every variant:

- ``gym-sample``: ``gymnasium.make_vec("CartPole-v1", num_envs=8,
  vectorization_mode="sync")`` stepped with ``envs.action_space.sample()``:
  the ceiling, no policy at all.
- ``gym-prebuilt``: the same vector env stepped with a precomputed array of
  random actions (excludes the cost of sampling the actions).
- ``gym+torch-policy``: the same vector env stepped with the actions of a
  plain torch actor-critic of the same size as rltune's (policy and value MLPs,
  Categorical sample) - what any torch-policy sampler pays for inference; a
  reference, not a target.
- ``rltune-local``: a PPO trainer with num_workers 0, num_envs_per_worker 8,
  rollout_fragment_length 256, timing ``trainer.workers.sample(N)``: envs,
  the policy's batched forward each step (with the value head),
  postprocessing (GAE) and episode bookkeeping.
- ``rltune-1x8``: 1 rollout worker process x 8 envs (adds the pipe transfer).
- ``rltune-2x4``: 2 rollout worker processes x 4 envs each (in parallel).
- ``rltune-agent-rows``: ``rltune-local`` with each CartPole a one-agent
  ``MultiAgentEnv`` (``make_multi_agent("CartPole-v1")``): the collector's per-agent row layout
  (``AgentRows``) on the same env, against its dense one (``EnvRows``).

Each variant runs in its own subprocess: one warm-up, then ``--repeats``
timed measurements of at least ``--steps`` env steps; the median is reported.
Target: rltune (num_workers 0) >= 40% of the ``gym-sample`` ceiling.

Full run (about 2 minutes)::

    .venv/bin/python benchmarks/bench_sampling.py --markdown --json sampling.json

Smoke test (about 20 seconds)::

    .venv/bin/python benchmarks/bench_sampling.py --quick
"""

from __future__ import annotations

import statistics
import sys
import time
from typing import Any, Callable

import _common as common

NUM_ENVS = 8
FRAGMENT = 256
VARIANTS = ("gym-sample", "gym-prebuilt", "gym+torch-policy", "rltune-local", "rltune-1x8", "rltune-2x4", "rltune-agent-rows")
# (num_workers, envs per worker)
RLTUNE_LAYOUT = {"rltune-local": (0, 8), "rltune-1x8": (1, 8), "rltune-2x4": (2, 4), "rltune-agent-rows": (0, 8)}
CEILING = "gym-sample"
MIN_FRACTION = 0.40


def _measure(step_block: Callable[[], int], min_steps: int, repeats: int) -> list[float]:
    """Steps per second of ``repeats`` measurements, each calling ``step_block`` until ``min_steps`` steps."""
    step_block()  # warm-up: first resets, lazy allocations, worker pipes
    rates = []
    for _ in range(repeats):
        steps = 0
        start = time.perf_counter()
        while steps < min_steps:
            steps += step_block()
        rates.append(steps / (time.perf_counter() - start))
    return rates


# -- one variant (in a child process) -------------------------------------------------------
def run_task(task: dict[str, Any]) -> dict[str, Any]:
    import torch

    torch.set_num_threads(1)  # as rltune's torch_num_threads default; gym variants do not use torch
    variant = task["variant"]
    if variant in RLTUNE_LAYOUT:
        rates = _run_rltune(task)
    else:
        rates = _run_gym(task)
    return {"rates": rates, "steps_per_s": statistics.median(rates)}


def _run_gym(task: dict[str, Any]) -> list[float]:
    import gymnasium as gym
    import numpy as np

    envs = gym.make_vec("CartPole-v1", num_envs=NUM_ENVS, vectorization_mode="sync")
    envs.reset(seed=0)
    block = FRAGMENT  # vector steps per block, like one rltune fragment
    variant = task["variant"]
    try:
        if variant == "gym-sample":
            envs.action_space.seed(0)

            def step_block() -> int:
                for _ in range(block):
                    envs.step(envs.action_space.sample())
                return block * NUM_ENVS

        elif variant == "gym-prebuilt":
            actions = np.random.default_rng(0).integers(0, 2, size=(block, NUM_ENVS))

            def step_block() -> int:
                for t in range(block):
                    envs.step(actions[t])
                return block * NUM_ENVS

        else:
            policy = _TorchActorCritic(envs.single_observation_space.shape[0], 2, task["hiddens"])
            obs_box = {"obs": envs.reset(seed=0)[0]}

            def step_block() -> int:
                obs = obs_box["obs"]
                for _ in range(block):
                    obs = envs.step(policy.act(obs))[0]
                obs_box["obs"] = obs
                return block * NUM_ENVS

        return _measure(step_block, task["steps"], task["repeats"])
    finally:
        envs.close()


class _TorchActorCritic:
    """Policy and value MLPs (tanh) with a Categorical sample: the inference a PPO sampler does per step."""

    def __init__(self, obs_size: int, num_actions: int, hiddens: list[int]) -> None:
        import torch
        from torch import nn

        def body() -> nn.Sequential:
            layers: list[nn.Module] = []
            size = obs_size
            for h in hiddens:
                layers += [nn.Linear(size, h), nn.Tanh()]
                size = h
            return nn.Sequential(*layers)

        self.torch = torch
        self.pi = nn.Sequential(body(), nn.Linear(hiddens[-1], num_actions))
        self.vf = nn.Sequential(body(), nn.Linear(hiddens[-1], 1))
        self.generator = torch.Generator().manual_seed(0)

    def act(self, obs: Any) -> Any:
        torch = self.torch
        with torch.inference_mode():
            x = torch.from_numpy(obs.astype("float32", copy=False))
            logits = self.pi(x)
            self.vf(x)
            probs = torch.softmax(logits, dim=-1)
            actions = torch.multinomial(probs, 1, generator=self.generator).squeeze(-1)
        return actions.numpy()


def _run_rltune(task: dict[str, Any]) -> list[float]:
    from rltune.env import make_multi_agent
    from rltune.trainers import PPO

    num_workers, envs_per_worker = RLTUNE_LAYOUT[task["variant"]]
    trainer = PPO(
        config={
            "env": make_multi_agent("CartPole-v1") if task["variant"] == "rltune-agent-rows" else "CartPole-v1",
            "num_workers": num_workers,
            "num_envs_per_worker": envs_per_worker,
            "rollout_fragment_length": FRAGMENT,
            "train_batch_size": FRAGMENT * NUM_ENVS,
            "sgd_minibatch_size": 128,
            "model": {"fcnet_hiddens": task["hiddens"], "fcnet_activation": "tanh"},
            "seed": 0,
            **({"observation_filter": task["observation_filter"]} if task.get("observation_filter") else {}),
        }
    )
    try:
        workers = trainer.workers
        return _measure(lambda: workers.sample(task["steps_per_call"]).env_steps, task["steps"], task["repeats"])
    finally:
        trainer.stop()


# -- the parent ---------------------------------------------------------------------------
def describe(task: dict[str, Any], r: dict[str, Any]) -> str:
    rates = ", ".join(f"{x:,.0f}" for x in r["rates"])
    return f"median {r['steps_per_s']:,.0f} env steps/s (runs: {rates})"


def main() -> None:
    parser = common.base_parser(__doc__)
    parser.add_argument("--steps", type=int, default=100_000, help="env steps per timed measurement (default 100000)")
    parser.add_argument("--repeats", type=int, default=5, help="timed measurements per variant (default 5)")
    parser.add_argument(
        "--steps-per-call", type=int, default=FRAGMENT * NUM_ENVS,
        help=f"min_steps of each rltune workers.sample() call (default {FRAGMENT * NUM_ENVS}: one round)",
    )
    parser.add_argument("--hiddens", default="64,64", help="policy/value MLP sizes (default 64,64 as in the PPO benchmark)")
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated, from {', '.join(VARIANTS)}")
    parser.add_argument(
        "--observation-filter", metavar="NAME",
        help="observation_filter of the rltune variants (e.g. MeanStdFilter; default: the config's default, NoFilter)",
    )
    parser.add_argument("--quick", action="store_true", help="smoke test: --steps 5000 --repeats 2")
    args = parser.parse_args()
    if args.quick:
        args.steps, args.repeats = 5_000, 2
    variants = common.parse_variants(args.variants, VARIANTS)
    hiddens = [int(h) for h in args.hiddens.split(",")]

    info = common.machine_info()
    common.print_header(
        "Sampling throughput on 8 CartPole-v1 envs: rltune rollout workers vs gymnasium's sync vector env",
        info,
        [
            f"budget: median of {args.repeats} measurements of >= {args.steps:,} env steps each, after one warm-up",
            f"rltune: PPO policy {hiddens} tanh (+ value head), rollout_fragment_length {FRAGMENT}, "
            f"workers.sample({args.steps_per_call}) per call; torch 1 thread in every process"
            + (f"; observation_filter {args.observation_filter}" if args.observation_filter else ""),
        ],
    )
    tasks = [
        {"variant": v, "steps": args.steps, "repeats": args.repeats, "steps_per_call": args.steps_per_call, "hiddens": hiddens,
         "observation_filter": args.observation_filter}
        for v in variants
    ]
    records = common.run_all(__file__, tasks, describe, verbose=args.verbose)

    by_variant = {r["variant"]: r for r in records if "error" not in r}
    ceiling = by_variant.get(CEILING, {}).get("steps_per_s")
    layout = {
        "gym-sample": "1 process x 8 envs",
        "gym-prebuilt": "1 process x 8 envs",
        "gym+torch-policy": "1 process x 8 envs",
        "rltune-local": "trainer process x 8 envs",
        "rltune-1x8": "1 worker process x 8 envs",
        "rltune-2x4": "2 worker processes x 4 envs",
        "rltune-agent-rows": "trainer process x 8 one-agent multi-agent envs",
    }
    headers = ["variant", "layout", "env steps/s (median)", "min..max", "vs gym-sample"]
    rows = []
    for v in variants:
        r = by_variant.get(v)
        if r is None:
            rows.append([v, layout[v], "failed", "-", "-"])
            continue
        rows.append([
            v,
            layout[v],
            f"{r['steps_per_s']:,.0f}",
            f"{min(r['rates']):,.0f}..{max(r['rates']):,.0f}",
            f"{100 * common.ratio(r['steps_per_s'], ceiling):.0f}%" if ceiling else "-",
        ])
    print()
    print(common.text_table(headers, rows, left=2))
    print()
    if args.steps < 100_000 or args.repeats < 5:
        print("(short measurements: noisy; the full run uses --steps 100000 --repeats 5)")
    for v in RLTUNE_LAYOUT:
        if v in by_variant and ceiling:
            frac = common.ratio(by_variant[v]["steps_per_s"], ceiling)
            judged = args.steps >= 100_000 and args.repeats >= 5
            target = f" (target >= {MIN_FRACTION:.0%}): {common.verdict(frac >= MIN_FRACTION, judged)}" if v == "rltune-local" else ""
            print(f"{v} / {CEILING}: {frac:.0%}{target}")
    if "gym+torch-policy" in by_variant and "rltune-local" in by_variant:
        frac = common.ratio(by_variant["rltune-local"]["steps_per_s"], by_variant["gym+torch-policy"]["steps_per_s"])
        print(f"rltune-local / gym+torch-policy (same inference, no bookkeeping): {frac:.0%}")

    common.finish(records, info, args.json, {"steps": args.steps, "repeats": args.repeats, "hiddens": hiddens})
    if args.markdown:
        print(common.markdown_block("Sampling CartPole-v1 x 8", headers, rows, info))


if __name__ == "__main__":
    if not common.child_main(run_task):
        main()
        sys.exit(0)
