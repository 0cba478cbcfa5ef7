"""Where one PPO iteration's time goes, rltune vs Stable-Baselines3, and the ceiling their shared arithmetic sets on the ratio.

Same settings as ``bench_ppo_cartpole.py`` (RL Zoo's tuned CartPole-v1 PPO:
8 envs x 32 steps = 256 samples per iteration, 20 full-batch SGD steps of two
64x64 tanh MLPs), both libraries in this one process with 1 torch thread,
their rounds interleaved so that a change in machine load hits both alike.

Measured per iteration, median over the rounds:

- **sampling**: rltune ``trainer.workers.sample(256)`` (envs, batched policy
  forward, GAE); SB3 ``collect_rollouts`` of one rollout (the same work);
- **learning**: rltune's update on that batch; SB3 ``train()`` (20 SGD steps each);
- **arithmetic**: the learner's matrix products and tanh (forward and
  backward), as torch.profiler's self time of ``aten::mm``, ``aten::addmm``,
  ``aten::tanh`` and ``aten::tanh_backward``. Both libraries run these same
  kernels on the same shapes, so this part is the same for both (the two
  figures are printed as a check);
- **env steps alone**: 32 steps of gymnasium's ``SyncVectorEnv`` of 8
  CartPole-v1 with random actions, the part of sampling no implementation avoids.

The ceiling: SB3's iteration time divided by (arithmetic + env steps alone),
the ratio an rltune whose every other cost were zero would reach. A throughput
target above the ceiling cannot be met by the eager PyTorch code both run.

Run (about 1 minute)::

    .venv/bin/python benchmarks/bench_ppo_breakdown.py --markdown
"""

from __future__ import annotations

import statistics
import sys
import time
from typing import Any, Callable

import _common as common
import bench_ppo_cartpole as ppo_bench

ARITHMETIC_OPS = ("aten::mm", "aten::addmm", "aten::tanh", "aten::tanh_backward")
TOTAL_STEPS = 100_000  # for the lr and clip schedules, as in the full benchmark


def kernel_seconds(fn: Callable[[], Any]) -> float:
    """Run ``fn`` under torch.profiler; the self CPU time of :data:`ARITHMETIC_OPS`, in seconds."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    return sum(e.self_cpu_time_total for e in prof.key_averages() if e.key in ARITHMETIC_OPS) / 1e6


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


class RltuneSide:
    """rltune's PPO with the benchmark's config; one iteration split into sampling and learning."""

    def __init__(self) -> None:
        from rltune.trainers import PPO

        self.trainer = PPO(config=ppo_bench.rltune_config(0, TOTAL_STEPS))
        for _ in range(3):
            self.trainer.train()

    def round(self) -> dict[str, float]:
        sample_s, sample = timed(lambda: self.trainer.workers.sample(256))
        batch = sample.batches["default_policy"]
        learn_s, _ = timed(lambda: self.trainer.get_learner().update(batch, timestep=self.trainer.timesteps_total))
        return {"sample": sample_s, "learn": learn_s, "arithmetic": kernel_seconds(lambda: self.trainer.get_learner().update(batch, timestep=self.trainer.timesteps_total))}

    def close(self) -> None:
        self.trainer.stop()


class Sb3Side:
    """SB3's PPO with the same hyperparameters; ``collect_rollouts`` and ``train`` timed apart."""

    def __init__(self) -> None:
        from stable_baselines3 import PPO
        from stable_baselines3.common.env_util import make_vec_env

        self.model = PPO("MlpPolicy", make_vec_env("CartPole-v1", n_envs=8, seed=0), seed=0, device="cpu", verbose=0,
                         **ppo_bench.sb3_kwargs(TOTAL_STEPS))
        self.model.learn(total_timesteps=3 * 256)
        # What learn() does before its loop, so that collect_rollouts can be called on its own.
        _, self.callback = self.model._setup_learn(TOTAL_STEPS, None, reset_num_timesteps=False)
        self.callback.on_training_start(locals(), globals())

    def round(self) -> dict[str, float]:
        m = self.model
        sample_s, _ = timed(lambda: m.collect_rollouts(m.env, self.callback, m.rollout_buffer, n_rollout_steps=m.n_steps))
        learn_s, _ = timed(m.train)
        return {"sample": sample_s, "learn": learn_s, "arithmetic": kernel_seconds(m.train)}

    def close(self) -> None:
        self.model.env.close()


def env_steps_alone(rounds: int) -> float:
    """Median seconds of 32 random-action steps of 8 CartPole-v1 in gymnasium's SyncVectorEnv."""
    import gymnasium as gym
    import numpy as np

    envs = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1") for _ in range(8)])
    envs.reset(seed=0)
    actions = np.random.default_rng(0).integers(0, 2, size=(32, 8))
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for t in range(32):
            envs.step(actions[t])
        times.append(time.perf_counter() - start)
    envs.close()
    return statistics.median(times)


def main() -> None:
    parser = common.base_parser(__doc__)
    parser.add_argument("--rounds", type=int, default=30, help="interleaved iterations per library (default 30)")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)
    info = common.machine_info()
    common.print_header(
        "PPO on CartPole-v1: one iteration (256 samples, 20 SGD steps) taken apart, rltune vs SB3",
        info,
        [f"{args.rounds} interleaved rounds per library, 1 torch thread, medians in ms per iteration"],
    )
    sides = {"rltune": RltuneSide(), "sb3": Sb3Side()}
    samples: dict[str, list[dict[str, float]]] = {name: [] for name in sides}
    for _ in range(args.rounds):
        for name, side in sides.items():
            samples[name].append(side.round())
    for side in sides.values():
        side.close()
    env_s = env_steps_alone(args.rounds)

    med = {
        name: {key: statistics.median(r[key] for r in rounds) * 1e3 for key in ("sample", "learn", "arithmetic")}
        for name, rounds in samples.items()
    }
    for m in med.values():
        m["total"] = m["sample"] + m["learn"]
    env_ms = env_s * 1e3
    rows = []
    for key, label in (
        ("sample", "sampling (256 env steps)"),
        ("learn", "learning (20 SGD steps)"),
        ("total", "iteration"),
        ("arithmetic", "of learning: matmul + tanh kernels"),
    ):
        r, s = med["rltune"][key], med["sb3"][key]
        rows.append([label, f"{r:.1f}", f"{s:.1f}", common.fmt_ratio(common.ratio(s, r))])
    rows.append(["env steps alone (gymnasium, random actions)", f"{env_ms:.1f}", f"{env_ms:.1f}", "-"])
    headers = ["part of one iteration", "rltune ms", "sb3 ms", "sb3 / rltune"]
    print(common.text_table(headers, rows))

    floor = med["rltune"]["arithmetic"] + env_ms
    ceiling = med["sb3"]["total"] / floor
    print(
        f"\nfloor (matmul + tanh kernels + env steps alone): {floor:.1f} ms per iteration; rltune's other costs: "
        f"{med['rltune']['total'] - floor:.1f} ms, SB3's: {med['sb3']['total'] - floor:.1f} ms"
    )
    print(
        f"ceiling on rltune / SB3 throughput with eager PyTorch kernels: {ceiling:.2f}x "
        f"(measured now: {med['sb3']['total'] / med['rltune']['total']:.2f}x; target {ppo_bench.MIN_SPEEDUP:.0f}x)"
    )
    print(
        f"for {ppo_bench.MIN_SPEEDUP:.0f}x, rltune's costs besides the floor would have to fit in "
        f"{med['sb3']['total'] / ppo_bench.MIN_SPEEDUP - floor:.1f} ms per iteration"
    )
    common.finish([], info, args.json, {"medians_ms": med, "env_steps_alone_ms": env_ms, "ceiling": ceiling})
    if args.markdown:
        print(common.markdown_block("PPO iteration breakdown", headers, rows, info))


if __name__ == "__main__":
    main()
    sys.exit(0)
