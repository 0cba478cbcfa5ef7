"""rltune DQN vs Stable-Baselines3 DQN on CartPole-v1 with the RL Zoo's tuned DQN settings.

RL Zoo's CartPole-v1 DQN: learning_rate 2.3e-3, batch_size 64, buffer_size
100000, learning_starts 1000, gamma 0.99, target_update_interval 10,
train_freq 256, gradient_steps 128, exploration 1.0 -> 0.04 over the first 16%
of the run, net_arch [256, 256] (ReLU), 1 env; SB3 defaults otherwise (Huber
loss, max_grad_norm 10, no double Q, no dueling, 1-step returns). The run is
100k steps (the Zoo uses 50k), so epsilon decays over the first 16,000 steps
for both. In rltune's (RLlib's) names: rollout_fragment_length 256 and
training_intensity 32 (= gradient_steps x batch_size / train_freq = 128 x 64 /
256) give the same 128 gradient steps of 64 samples per 256 sampled steps.

Both are evaluated every 10k steps (at the first iteration boundary at or
after each multiple, after that iteration's update, and at the end) with 20
deterministic episodes on a separate env; the evaluation time is excluded
from the throughput (SB3: a callback that pauses the clock). Recorded per seed:
env steps per second of training, the first evaluation at which the mean
return reached >= 475 and the final evaluation's mean.

Every training runs in its own subprocess, one after the other, torch with 1
thread (``sb3-default-threads`` optionally adds SB3 with torch's default).

Targets: rltune reaches >= 475 in at least 3 of 5 seeds within 100k steps,
at >= 2x the throughput of SB3 DQN.

Full run (about 15-20 minutes on 2 quiet cores; +10 with sb3-default-threads)::

    .venv/bin/python benchmarks/bench_dqn_cartpole.py --markdown --json dqn_cartpole.json

Smoke test (about 20 seconds)::

    .venv/bin/python benchmarks/bench_dqn_cartpole.py --quick
"""

from __future__ import annotations

import math
import sys
import time
from typing import Any

import _common as common

VARIANTS = ("rltune", "rltune-compiled", "sb3", "sb3-default-threads")
DEFAULT_VARIANTS = ("rltune", "rltune-compiled", "sb3")
RLTUNE_VARIANTS = ("rltune", "rltune-compiled")
EVAL_EPISODES = 20
MIN_SOLVED_SEEDS = 3  # of 5
MIN_SPEEDUP = 2.0
EXPLORATION_FRACTION = 0.16


def rltune_config(seed: int, total_steps: int) -> dict[str, Any]:
    """The RL Zoo's tuned CartPole-v1 DQN in rltune's (RLlib's) key names."""
    return {
        "env": "CartPole-v1",
        "num_workers": 0,
        "num_envs_per_worker": 1,
        "rollout_fragment_length": 256,
        "train_batch_size": 64,
        "training_intensity": 32,  # 128 gradient steps x 64 samples per 256 sampled steps
        "lr": 2.3e-3,
        "gamma": 0.99,
        "learning_starts": 1000,
        "target_network_update_freq": 10,
        "double_q": False,
        "dueling": False,
        "hiddens": [],  # SB3's Q-net is net_arch alone: no RLlib-style head after the fcnet layers
        "n_step": 1,
        "replay_buffer_config": {"capacity": 100_000},
        "exploration_config": {
            "initial_epsilon": 1.0,
            "final_epsilon": 0.04,
            "epsilon_timesteps": int(EXPLORATION_FRACTION * total_steps),
        },
        "grad_clip": 10.0,
        "td_error_loss_fn": "huber",
        "model": {"fcnet_hiddens": [256, 256], "fcnet_activation": "relu"},
        "min_sample_timesteps_per_iteration": 1000,
        "torch_num_threads": 1,
        "seed": seed,
    }


def sb3_kwargs() -> dict[str, Any]:
    """The RL Zoo's tuned CartPole-v1 DQN; exploration_fraction applies to the run's total steps."""
    return {
        "learning_rate": 2.3e-3,
        "batch_size": 64,
        "buffer_size": 100_000,
        "learning_starts": 1000,
        "gamma": 0.99,
        "target_update_interval": 10,
        "train_freq": 256,
        "gradient_steps": 128,
        "exploration_fraction": EXPLORATION_FRACTION,
        "exploration_final_eps": 0.04,
        "policy_kwargs": {"net_arch": [256, 256]},
    }


# -- one training run (in a child process) -------------------------------------------------
def run_task(task: dict[str, Any]) -> dict[str, Any]:
    if task["variant"] in RLTUNE_VARIANTS:
        return _run_rltune(task)
    return _run_sb3(task)


def _run_rltune(task: dict[str, Any]) -> dict[str, Any]:
    from rltune.trainers import DQN

    steps, every = task["steps"], task["eval_every"]
    config = rltune_config(task["seed"], steps)
    # The compile happens in the first train() that learns: its time is part of the measured wall time.
    config["torch_compile_learner"] = task["variant"] == "rltune-compiled"
    trainer = DQN(config=config)
    evals: list[list[float]] = []
    try:
        next_eval = every
        eval_time = 0.0
        iterations = 0
        start = time.perf_counter()
        result: dict[str, Any] = {"timesteps_total": 0}
        while result["timesteps_total"] < steps:
            result = trainer.train()
            iterations += 1
            done = result["timesteps_total"]
            if done >= next_eval or done >= steps:
                t0 = time.perf_counter()
                mean = trainer.evaluate(EVAL_EPISODES)["evaluation"]["episode_reward_mean"]
                eval_time += time.perf_counter() - t0
                evals.append([int(done), float(mean)])
                while next_eval <= done:
                    next_eval += every
        wall = time.perf_counter() - start
    finally:
        trainer.stop()
    return _result(int(result["timesteps_total"]), wall, eval_time, evals, iterations)


def _run_sb3(task: dict[str, Any]) -> dict[str, Any]:
    import gymnasium as gym
    import torch
    from stable_baselines3 import DQN
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.monitor import Monitor

    if task["variant"] == "sb3":
        torch.set_num_threads(1)
    steps, seed, every = task["steps"], task["seed"], task["eval_every"]
    eval_env = Monitor(gym.make("CartPole-v1"))
    eval_env.reset(seed=seed + 10_000)

    class PausedClockEval(BaseCallback):
        """Evaluates at the start of the first rollout at or after each multiple of ``every`` steps.

        A rollout starts right after the previous update, so the policy has
        learned from every step sampled so far (like after rltune's train()).
        The time spent here is summed so that it can be taken off the clock.
        """

        def __init__(self) -> None:
            super().__init__()
            self.next_eval = every
            self.eval_time = 0.0
            self.evals: list[list[float]] = []

        def evaluate(self) -> None:
            t0 = time.perf_counter()
            mean, _std = evaluate_policy(self.model, eval_env, n_eval_episodes=EVAL_EPISODES, deterministic=True)
            self.eval_time += time.perf_counter() - t0
            self.evals.append([int(self.model.num_timesteps), float(mean)])

        def _on_rollout_start(self) -> None:
            if self.num_timesteps >= self.next_eval:
                self.evaluate()
                while self.next_eval <= self.num_timesteps:
                    self.next_eval += every

        def _on_step(self) -> bool:
            return True

    env = make_vec_env("CartPole-v1", n_envs=1, seed=seed)
    model = DQN("MlpPolicy", env, seed=seed, device="cpu", verbose=0, **sb3_kwargs())
    callback = PausedClockEval()
    start = time.perf_counter()
    model.learn(total_timesteps=steps, callback=callback)
    wall = time.perf_counter() - start
    callback.evaluate()  # the final evaluation, after the last update (outside the timed loop)
    env.close()
    eval_env.close()
    return _result(int(model.num_timesteps), wall, callback.eval_time, callback.evals, None)


def _result(env_steps: int, wall: float, eval_time: float, evals: list[list[float]], iterations: int | None) -> dict[str, Any]:
    import torch

    train_time = wall - eval_time
    first = next((s for s, mean in evals if mean >= common.SOLVED_CARTPOLE), None)
    return {
        "env_steps": env_steps,
        "train_time_s": train_time,
        "eval_time_s": eval_time,
        "steps_per_s": env_steps / train_time,
        "evals": evals,
        "first_solved_at": first,
        "final_return": evals[-1][1] if evals else math.nan,
        "iterations": iterations,
        "torch_threads": torch.get_num_threads(),
    }


# -- the parent ---------------------------------------------------------------------------
def describe(task: dict[str, Any], r: dict[str, Any]) -> str:
    first = f"{r['first_solved_at']:,}" if r["first_solved_at"] is not None else "never"
    curve = " ".join(f"{mean:.0f}" for _s, mean in r["evals"])
    return (
        f"{r['env_steps']:,} steps in {r['train_time_s']:.1f} s (+{r['eval_time_s']:.1f} s eval) = "
        f"{r['steps_per_s']:,.0f} steps/s, >= 475 first at {first}, final {r['final_return']:.1f}; evals: {curve}"
    )


def main() -> None:
    parser = common.base_parser(__doc__)
    parser.add_argument("--steps", type=int, default=100_000, help="env steps per training (default 100000)")
    parser.add_argument("--seeds", type=int, default=5, help="seeds per variant (default 5: seeds 0..4)")
    parser.add_argument("--eval-every", type=int, default=10_000, help="env steps between evaluations (default 10000)")
    parser.add_argument(
        "--variants", default=",".join(DEFAULT_VARIANTS),
        help=f"comma-separated, from {', '.join(VARIANTS)} (default {','.join(DEFAULT_VARIANTS)})",
    )
    parser.add_argument("--quick", action="store_true", help="smoke test: --steps 3000 --seeds 1 --eval-every 1500")
    args = parser.parse_args()
    if args.quick:
        args.steps, args.seeds, args.eval_every = 3_000, 1, 1_500
    variants = common.parse_variants(args.variants, VARIANTS)

    info = common.machine_info()
    common.print_header(
        "DQN on CartPole-v1: rltune vs Stable-Baselines3 (RL Zoo tuned hyperparameters)",
        info,
        [
            f"budget: {args.steps:,} env steps per training, epsilon 1.0 -> 0.04 over the first "
            f"{int(EXPLORATION_FRACTION * args.steps):,}, seeds 0..{args.seeds - 1}, variants {', '.join(variants)}",
            f"evaluation: {EVAL_EPISODES} deterministic episodes every {args.eval_every:,} steps and at the end, "
            "off the clock; each training in its own subprocess, sequentially",
        ],
    )
    tasks = [
        {"variant": v, "seed": s, "steps": args.steps, "eval_every": args.eval_every}
        for s in range(args.seeds)
        for v in variants
    ]
    records = common.run_all(__file__, tasks, describe, verbose=args.verbose)

    headers = [
        "variant", "torch threads", "runs ok", "env steps/s", "this / sb3",
        "reached >= 475", "first at (median)", "final return", "final >= 475",
    ]
    rows = []
    agg: dict[str, dict[str, Any]] = {}
    for v in variants:
        runs = common.ok(records, v)
        reached = sum(r["first_solved_at"] is not None for r in runs)
        agg[v] = {"sps": common.mean_std([r["steps_per_s"] for r in runs])[0], "reached": reached, "runs": len(runs)}
    sb3_sps = agg["sb3"]["sps"] if "sb3" in agg else math.nan
    for v in variants:
        runs = common.ok(records, v)
        sps = [r["steps_per_s"] for r in runs]
        firsts = sorted(r["first_solved_at"] for r in runs if r["first_solved_at"] is not None)
        finals = [r["final_return"] for r in runs]
        rows.append([
            v,
            ",".join(str(t) for t in sorted({r["torch_threads"] for r in runs})) or "-",
            f"{len(runs)}/{args.seeds}",
            common.fmt_mean_std(sps),
            common.fmt_ratio(common.ratio(agg[v]["sps"], sb3_sps)),
            f"{len(firsts)}/{len(runs)}",
            f"{firsts[len(firsts) // 2]:,}" if firsts else "-",
            common.fmt_mean_std(finals, 1),
            f"{sum(x >= common.SOLVED_CARTPOLE for x in finals)}/{len(runs)}",
        ])
    print()
    print(common.text_table(headers, rows))

    print(f"\nevaluation curves (mean return of {EVAL_EPISODES} deterministic episodes at the env step shown):")
    curve_rows = []
    for r in records:
        if "error" in r:
            curve_rows.append([r["variant"], r["seed"], "failed: " + r["error"][:60]])
            continue
        curve = "  ".join(f"{s / 1000:.1f}k:{mean:.0f}" for s, mean in r["evals"])
        curve_rows.append([r["variant"], r["seed"], curve])
    print(common.text_table(["variant", "seed", "curve"], curve_rows, left=3))

    print()
    full = args.steps == 100_000 and args.seeds == 5
    if not full:
        print("(not the full budget of 100,000 steps x 5 seeds: these figures do not judge the targets)")
    for variant in RLTUNE_VARIANTS:
        if variant not in variants:
            continue
        if not agg[variant]["runs"]:
            print(f"{variant}: no run finished; targets not judged (see the errors above, --verbose for tracebacks)")
            continue
        rl = agg[variant]
        need = MIN_SOLVED_SEEDS if args.seeds == 5 else -(-MIN_SOLVED_SEEDS * args.seeds // 5)
        print(
            f"{variant} reached >= {common.SOLVED_CARTPOLE:.0f} in {rl['reached']} of {args.seeds} seeds within "
            f"{args.steps:,} steps (target >= {need}): {common.verdict(rl['reached'] >= need, full)}"
        )
        for peer in ("sb3", "sb3-default-threads"):
            if peer in agg:
                speedup = common.ratio(rl["sps"], agg[peer]["sps"])
                print(
                    f"throughput {variant} / {peer}: {common.fmt_ratio(speedup)} (target >= {MIN_SPEEDUP:.0f}x): "
                    f"{common.verdict(None if math.isnan(speedup) else speedup >= MIN_SPEEDUP, full)}"
                )

    common.finish(records, info, args.json, {"steps": args.steps, "seeds": args.seeds, "eval_every": args.eval_every})
    if args.markdown:
        print(common.markdown_block("DQN CartPole-v1", headers, rows, info))


if __name__ == "__main__":
    if not common.child_main(run_task):
        main()
        sys.exit(0)
