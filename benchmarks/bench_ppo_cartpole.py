"""rltune PPO vs Stable-Baselines3 PPO on CartPole-v1: same machine, same run, same hyperparameters.

Hyperparameters are the RL Zoo's tuned PPO for CartPole-v1 (8 envs, n_steps 32,
batch_size 256, gae_lambda 0.8, gamma 0.98, n_epochs 20, ent_coef 0, learning
rate 1e-3 and clip range 0.2 both decayed linearly to 0 over the run, 100k
steps) with SB3's defaults otherwise (vf_coef 0.5, max_grad_norm 0.5, 64x64
tanh, advantages normalised per minibatch, no value clipping).

Every training runs in its own subprocess, one after the other. Measured per
seed: env steps per second over the whole training loop (trainer/model
construction and evaluation excluded) and the mean return of 20 deterministic
episodes on a fresh env after training.

Variants: ``rltune`` (rltune's defaults: torch_num_threads 1, torch_compile_learner
auto), ``rltune-eager`` and ``rltune-compiled`` (torch_compile_learner False /
True), ``sb3`` (with
torch.set_num_threads(1), the fair peer) and ``sb3-default-threads`` (torch's
default thread count, what an SB3 user gets out of the box).

Targets: rltune reaches a mean return >= 475 in at least 4 of 5 seeds, at
>= 3x the throughput of SB3 (1 thread).

Full run (about 6-8 minutes on 2 quiet cores)::

    .venv/bin/python benchmarks/bench_ppo_cartpole.py --markdown --json ppo_cartpole.json

Smoke test (about 15 seconds)::

    .venv/bin/python benchmarks/bench_ppo_cartpole.py --quick
"""

from __future__ import annotations

import math
import sys
import time
from typing import Any

import _common as common

VARIANTS = ("rltune", "rltune-eager", "rltune-compiled", "sb3", "sb3-default-threads")
RLTUNE_VARIANTS = ("rltune", "rltune-eager", "rltune-compiled")
COMPILE_SETTING = {"rltune-eager": False, "rltune-compiled": True}  # "rltune": the default (auto)
EVAL_EPISODES = 20
MIN_SOLVED_SEEDS = 4  # of 5
MIN_SPEEDUP = 3.0


def rltune_config(seed: int, total_steps: int) -> dict[str, Any]:
    """The RL Zoo's tuned CartPole-v1 PPO in rltune's (RLlib's) key names."""
    return {
        "env": "CartPole-v1",
        "num_workers": 0,
        "num_envs_per_worker": 8,
        "rollout_fragment_length": 32,
        "train_batch_size": 256,
        "sgd_minibatch_size": 256,
        "num_sgd_iter": 20,
        "lambda": 0.8,
        "gamma": 0.98,
        "lr": 1e-3,
        "lr_schedule": [[0, 1e-3], [total_steps, 0.0]],
        "clip_param": 0.2,
        "clip_param_schedule": [[0, 0.2], [total_steps, 0.0]],
        "entropy_coeff": 0.0,
        "kl_coeff": 0.0,
        "vf_loss_coeff": 0.5,
        "vf_clip_param": None,
        "grad_clip": 0.5,
        "model": {"fcnet_hiddens": [64, 64], "fcnet_activation": "tanh"},
        "torch_num_threads": 1,
        "seed": seed,
    }


def sb3_kwargs(total_steps: int) -> dict[str, Any]:
    """The RL Zoo's tuned CartPole-v1 PPO (``lin_0.001``, ``lin_0.2``); SB3 defaults otherwise."""
    return {
        "n_steps": 32,
        "batch_size": 256,
        "gae_lambda": 0.8,
        "gamma": 0.98,
        "n_epochs": 20,
        "ent_coef": 0.0,
        "learning_rate": lambda progress_remaining: progress_remaining * 1e-3,
        "clip_range": lambda progress_remaining: progress_remaining * 0.2,
    }


# -- one training run (in a child process) -------------------------------------------------
def run_task(task: dict[str, Any]) -> dict[str, Any]:
    if task["variant"] in RLTUNE_VARIANTS:
        return _run_rltune(task)
    return _run_sb3(task)


def _run_rltune(task: dict[str, Any]) -> dict[str, Any]:
    from rltune.trainers import PPO

    steps = task["steps"]
    config = rltune_config(task["seed"], steps)
    # A compile happens in a train() call: its time is part of the measured wall time.
    if task["variant"] in COMPILE_SETTING:
        config["torch_compile_learner"] = COMPILE_SETTING[task["variant"]]
    trainer = PPO(config=config)
    try:
        iterations = 0
        iter_time = 0.0
        start = time.perf_counter()
        result: dict[str, Any] = {"timesteps_total": 0}
        while result["timesteps_total"] < steps:
            result = trainer.train()
            iterations += 1
            iter_time += result["time_this_iter_s"]
        wall = time.perf_counter() - start
        evaluation = trainer.evaluate(EVAL_EPISODES)["evaluation"]
    finally:
        trainer.stop()
    return {
        "env_steps": int(result["timesteps_total"]),
        "train_wall_s": wall,
        "sum_iter_time_s": iter_time,
        "iterations": iterations,
        "train_reward_mean": float(result["episode_reward_mean"]),
        "eval_return_mean": float(evaluation["episode_reward_mean"]),
        "torch_threads": _torch_threads(),
    }


def _run_sb3(task: dict[str, Any]) -> dict[str, Any]:
    import gymnasium as gym
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.monitor import Monitor

    if task["variant"] == "sb3":
        torch.set_num_threads(1)
    steps, seed = task["steps"], task["seed"]
    env = make_vec_env("CartPole-v1", n_envs=8, seed=seed)
    model = PPO("MlpPolicy", env, seed=seed, device="cpu", verbose=0, **sb3_kwargs(steps))
    start = time.perf_counter()
    model.learn(total_timesteps=steps)
    wall = time.perf_counter() - start
    eval_env = Monitor(gym.make("CartPole-v1"))
    eval_env.reset(seed=seed + 10_000)
    mean_return, _std = evaluate_policy(model, eval_env, n_eval_episodes=EVAL_EPISODES, deterministic=True)
    env.close()
    eval_env.close()
    infos = list(model.ep_info_buffer)
    return {
        "env_steps": int(model.num_timesteps),
        "train_wall_s": wall,
        "iterations": int(model.num_timesteps // (8 * 32)),
        "train_reward_mean": float(sum(i["r"] for i in infos) / len(infos)) if infos else float("nan"),
        "eval_return_mean": float(mean_return),
        "torch_threads": _torch_threads(),
    }


def _torch_threads() -> int:
    import torch

    return torch.get_num_threads()


# -- the parent: run every variant and seed, then summarise ----------------------------------
def describe(task: dict[str, Any], r: dict[str, Any]) -> str:
    return (
        f"{r['env_steps']:,} steps in {r['train_wall_s']:.1f} s = {r['env_steps'] / r['train_wall_s']:,.0f} steps/s, "
        f"eval return {r['eval_return_mean']:.1f} (train window {r['train_reward_mean']:.1f}, "
        f"{r['torch_threads']} torch threads)"
    )


def summarise(records: list[dict[str, Any]], variants: list[str], num_seeds: int) -> tuple[list[list[Any]], dict[str, Any]]:
    rows = []
    agg: dict[str, Any] = {}
    for variant in variants:
        runs = common.ok(records, variant)
        returns = [r["eval_return_mean"] for r in runs]
        agg[variant] = {
            "sps": common.mean_std([r["env_steps"] / r["train_wall_s"] for r in runs])[0],
            "solved": sum(x >= common.SOLVED_CARTPOLE for x in returns),
            "runs": len(runs),
        }
    sb3_sps = agg["sb3"]["sps"] if "sb3" in agg else float("nan")
    for variant in variants:
        runs = common.ok(records, variant)
        sps = [r["env_steps"] / r["train_wall_s"] for r in runs]
        returns = [r["eval_return_mean"] for r in runs]
        solved = agg[variant]["solved"]
        threads = sorted({r["torch_threads"] for r in runs})
        rows.append([
            variant,
            ",".join(map(str, threads)) or "-",
            f"{len(runs)}/{num_seeds}",
            common.fmt_mean_std(sps),
            common.fmt_ratio(common.ratio(agg[variant]["sps"], sb3_sps)),
            common.fmt_mean_std(returns, 1),
            f"{solved}/{len(runs)}",
            common.fmt_mean_std([r["train_wall_s"] for r in runs], 1),
        ])
    return rows, agg


def main() -> None:
    parser = common.base_parser(__doc__)
    parser.add_argument("--steps", type=int, default=100_000, help="env steps per training (default 100000)")
    parser.add_argument("--seeds", type=int, default=5, help="seeds per variant (default 5: seeds 0..4)")
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated, from {', '.join(VARIANTS)}")
    parser.add_argument("--quick", action="store_true", help="smoke test: --steps 5000 --seeds 1")
    args = parser.parse_args()
    if args.quick:
        args.steps, args.seeds = 5_000, 1
    variants = common.parse_variants(args.variants, VARIANTS)

    info = common.machine_info()
    common.print_header(
        "PPO on CartPole-v1: rltune vs Stable-Baselines3 (RL Zoo tuned hyperparameters)",
        info,
        [
            f"budget: {args.steps:,} env steps per training, seeds 0..{args.seeds - 1}, variants {', '.join(variants)}",
            "each training in its own subprocess, sequentially; throughput = env steps / wall time of the "
            f"training loop; return = mean of {EVAL_EPISODES} deterministic episodes after training",
        ],
    )
    # Seeds interleaved across variants, so that a change in machine load hits every variant alike.
    tasks = [{"variant": v, "seed": s, "steps": args.steps} for s in range(args.seeds) for v in variants]
    records = common.run_all(__file__, tasks, describe, verbose=args.verbose)

    headers = ["variant", "torch threads", "runs ok", "env steps/s", "this / sb3", "eval return", ">= 475", "train wall s"]
    rows, agg = summarise(records, variants, args.seeds)
    print()
    print(common.text_table(headers, rows))

    print("\nper seed (eval return / steps per s):")
    seed_headers = ["seed"] + variants
    seed_rows = []
    for s in range(args.seeds):
        row: list[Any] = [s]
        for v in variants:
            r = next((x for x in records if x["variant"] == v and x["seed"] == s), None)
            if r is None or "error" in r:
                row.append("failed")
            else:
                row.append(f"{r['eval_return_mean']:.1f} / {r['env_steps'] / r['train_wall_s']:,.0f}")
        seed_rows.append(row)
    print(common.text_table(seed_headers, seed_rows))

    print()
    full = args.steps == 100_000 and args.seeds == 5
    if not full:
        print("(not the full budget of 100,000 steps x 5 seeds: these figures do not judge the targets)")
    for variant in RLTUNE_VARIANTS:
        if variant not in agg:
            continue
        rl = agg[variant]
        need = MIN_SOLVED_SEEDS if args.seeds == 5 else -(-MIN_SOLVED_SEEDS * args.seeds // 5)
        print(
            f"{variant} reached >= {common.SOLVED_CARTPOLE:.0f} in {rl['solved']} of {args.seeds} seeds "
            f"(target >= {need}): {common.verdict(rl['solved'] >= need, full)}"
        )
        for peer in ("sb3", "sb3-default-threads"):
            if peer in agg:
                speedup = common.ratio(rl["sps"], agg[peer]["sps"])
                print(
                    f"throughput {variant} / {peer}: {common.fmt_ratio(speedup)} (target >= {MIN_SPEEDUP:.0f}x): "
                    f"{common.verdict(None if math.isnan(speedup) else speedup >= MIN_SPEEDUP, full)}"
                )

    common.finish(records, info, args.json, {"steps": args.steps, "seeds": args.seeds})
    if args.markdown:
        print(common.markdown_block("PPO CartPole-v1", headers, rows, info))


if __name__ == "__main__":
    if not common.child_main(run_task):
        main()
        sys.exit(0)
