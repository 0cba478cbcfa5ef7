"""Seed-aware tuning (docs/seeds.md): does judging configurations on several seeds pick ones that hold up?

Two questions, each study in a fresh subprocess, PPO, MLflow off:

1. **K=3 vs K=1 at the same env-step budget** (CartPole-v1, Acrobot-v1): a
   random search of ``3T`` trials on one seed each against ``T`` trials on
   three seeds each (the same sampler seed, so the K=3 study's configurations
   are the first T of the K=1 study's), every seed trained for ``--steps``
   env steps. The chosen configuration is then trained on ``--fresh`` seeds
   that neither study used (``final_evaluation: {top_k: 1, seeds: F}``): its
   mean fresh-seed score is the figure. ``--repeats`` whole studies each, with
   different sampler seeds (the peer: the K=1 study of the same repeat); the
   mean paired difference K=3 - K=1 with its 95% t interval over repeats.
   PPO as studies/cartpole-ppo.yaml on CartPole (256-step batches), as
   studies/acrobot-ppo-tpe.yaml on Acrobot (1024-step batches).
2. **Racing K=3 vs an exhaustive 5-seed search** (``--race-envs``, default
   CartPole-v1): the same grid of configurations; the exhaustive study runs
   every configuration on 5 seeds, no pruning; the racing study runs 3 seeds one
   after another with the median pruner on the running aggregate. Does it pick
   the same best configuration, and at what fraction of the exhaustive study's
   env steps (target <= 40%)?

    .venv/bin/python benchmarks/bench_seeds.py                      # 1 repeat, small budgets
    .venv/bin/python benchmarks/bench_seeds.py --repeats 5 --json seeds.json
    .venv/bin/python benchmarks/bench_seeds.py --envs '' --race-steps 20000   # part 2 only
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    base_parser, child_main, finish, fmt_mean_std, machine_info, ok, print_header, run_all, text_table,
)

PPO = {"num_workers": 0, "num_envs_per_worker": 8, "rollout_fragment_length": 32, "train_batch_size": 256,
       "sgd_minibatch_size": 256, "gamma": 0.99, "kl_coeff": 0.0, "entropy_coeff": 0.0, "vf_loss_coeff": 0.5,
       "vf_clip_param": None, "grad_clip": 0.5, "model": {"fcnet_hiddens": [64, 64]}}
# Acrobot: the settings of studies/acrobot-ppo-tpe.yaml (16 envs x 64 steps, 1024-step batches)
ACROBOT = {**PPO, "num_envs_per_worker": 16, "rollout_fragment_length": 64, "train_batch_size": 1024,
           "clip_param": 0.2}
BASE = {"CartPole-v1": PPO, "Acrobot-v1": ACROBOT}
SPACE = {"lr": {"loguniform": [1e-4, 3e-3]}, "num_sgd_iter": {"choice": [2, 5, 10, 20]},
         "lambda": {"uniform": [0.8, 1.0]}}
GRID = {"lr": {"grid_search": [1e-4, 5e-4, 2e-3]}, "num_sgd_iter": {"grid_search": [3, 10]}}
# the grid in the opposite order: the best configurations first (ascending, the default, meets them last)
GRID_DESCENDING = {"lr": {"grid_search": [2e-3, 5e-4, 1e-4]}, "num_sgd_iter": {"grid_search": [10, 3]}}


def env_steps(study_dir: Path) -> int:
    """Every env step the study's seeds ran: the last ``timesteps_total`` of each seed (or trial) directory."""
    total = 0
    for trial in study_dir.glob("trial_*"):
        dirs = sorted(trial.glob("seed_*")) or [trial]
        for d in dirs:
            lines = (d / "result.json").read_text().splitlines() if (d / "result.json").exists() else []
            if lines:
                total += int(json.loads(lines[-1]).get("timesteps_total") or 0)
    return total


def _space(task: dict[str, Any]) -> dict[str, Any]:
    if not task["grid"]:
        return SPACE
    return GRID_DESCENDING if task.get("order") == "descending" else GRID


def run_task(task: dict[str, Any]) -> dict[str, Any]:
    """One whole study (in this fresh interpreter): its choice, fresh-seed score and env steps."""
    import tempfile

    from rltune import tune

    with tempfile.TemporaryDirectory() as tmp:
        fields: dict[str, Any] = dict(config={"env": task["env"], **BASE.get(task["env"], PPO), **_space(task)},
                                      stop={"timesteps_total": task["steps"]}, metric="episode_reward_mean",
                                      seeds_per_trial=task["k"], seed_mode=task["seed_mode"], results_dir=tmp,
                                      name="s", verbose=0, tracking=False, seed=task["seed"])
        if task["grid"]:
            fields["search_alg"] = "grid"
            if task["prune"]:
                fields["scheduler"] = {"type": "median", "n_startup_trials": 1, "n_warmup_steps": task["warmup"]}
        else:
            fields.update(search_alg="random", n_trials=task["trials"],
                          final_evaluation={"top_k": 1, "seeds": task["fresh"]})
        start = time.perf_counter()
        analysis = tune.run("PPO", **fields)
        wall = time.perf_counter() - start
        best = analysis.best_trial
        rows = analysis.extra.get("final_evaluation") or []
        search_steps = env_steps(Path(tmp) / "s")
        return {"best": {k: best.config.get(k) for k in ("lr", "num_sgd_iter", "lambda")},
                "search_value": rows[0]["search_value"] if rows else best.value,
                "fresh_value": rows[0]["fresh_value"] if rows else None,
                "env_steps": search_steps, "wall_s": wall,
                "states": analysis.counts()}


def _tasks(args: Any) -> list[dict[str, Any]]:
    budget = {"CartPole-v1": args.steps, "Acrobot-v1": args.acrobot_steps}
    tasks = []
    for repeat in range(args.first_repeat, args.first_repeat + args.repeats):
        for env in [e for e in args.envs.split(",") if e]:
            for k in (1, 3):  # interleaved: machine load hits both alike
                tasks.append({"part": "budget", "variant": f"K={k}", "env": env, "k": k, "seed_mode": "parallel",
                              "trials": args.trials * (3 // k), "steps": budget[env], "fresh": args.fresh,
                              "seed": 1000 * repeat, "grid": False, "prune": False,
                              "label": f"{env} K={k} repeat {repeat}"})
    for env in [e for e in args.race_envs.split(",") if e]:
        for variant, k, mode, prune in (("exhaustive K=5", 5, "race", False), ("race K=3", 3, "race", True)):
            if args.race_only and prune is False:
                continue
            tasks.append({"part": "race", "variant": variant, "env": env, "k": k, "seed_mode": mode, "trials": 0,
                          "steps": args.race_steps or budget[env], "fresh": 0, "seed": 0, "grid": True, "prune": prune,
                          "warmup": args.warmup, "order": args.race_order, "label": f"{env} {variant}"})
    return tasks


def _describe(task: dict[str, Any], result: dict[str, Any]) -> str:
    fresh = result.get("fresh_value")
    return (f"best {result['best']}, search {result['search_value']:.1f}"
            + (f", fresh {fresh:.1f}" if fresh is not None else "")
            + f", {result['env_steps']:,} env steps, {result['wall_s']:.0f} s")


def _fresh_by_repeat(records: list[dict[str, Any]], env: str, variant: str) -> dict[int, float]:
    """The fresh-seed score of ``variant``'s choice on ``env``, by repeat (its sampler seed)."""
    return {r["seed"]: r["fresh_value"] for r in ok(records, variant)
            if r["env"] == env and r["part"] == "budget" and r.get("fresh_value") is not None}


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else float("nan")


def _paired_interval(pairs: list[tuple[float, float]]) -> tuple[float, float]:
    """The 95% t interval of the mean paired difference K=3 - K=1 (scipy's ``ttest_rel``); NaN under 2 pairs."""
    if len(pairs) < 2:
        return float("nan"), float("nan")
    from scipy import stats

    found = stats.ttest_rel([b for _, b in pairs], [a for a, _ in pairs]).confidence_interval(0.95)
    return float(found.low), float(found.high)


def _report(records: list[dict[str, Any]], args: Any) -> dict[str, Any]:
    extra: dict[str, Any] = {}
    rows = []
    for env in [e for e in args.envs.split(",") if e]:
        k1, k3 = (_fresh_by_repeat(records, env, k) for k in ("K=1", "K=3"))
        pairs = [(k1[seed], k3[seed]) for seed in sorted(k1) if seed in k3]
        wins = sum(b > a for a, b in pairs)
        low, high = _paired_interval(pairs)
        rows.append([env, fmt_mean_std(list(k1.values()), 1), fmt_mean_std(list(k3.values()), 1),
                     f"{wins}/{len(pairs)}", f"{_mean([b - a for a, b in pairs]):+.1f} [{low:+.1f}, {high:+.1f}]"])
        extra[env] = {"k1_fresh": list(k1.values()), "k3_fresh": list(k3.values()), "pairs": pairs,
                      "k3_better": wins, "mean_difference_ci95": [low, high]}
    print("\nFresh-seed score of the chosen configuration, same env-step budget (mean +- std over repeats):")
    print(text_table(["env", "K=1", "K=3", "K=3 better", "K=3 - K=1 [paired 95% t interval]"], rows))
    race_rows = []
    for env in [e for e in args.race_envs.split(",") if e]:
        full = next((r for r in ok(records, "exhaustive K=5") if r["env"] == env), None)
        race = next((r for r in ok(records, "race K=3") if r["env"] == env), None)
        if full is None or race is None:
            continue
        fraction = race["env_steps"] / max(1, full["env_steps"])
        same = race["best"] == full["best"]
        race_rows.append([env, str(full["best"]), str(race["best"]), "yes" if same else "no",
                          f"{fraction:.0%}", "met" if same and fraction <= 0.40 else "NOT met"])
        extra[f"race/{env}"] = {"same_best": same, "fraction": fraction}
    if race_rows:
        print("\nRacing K=3 (median pruner on the running aggregate) vs exhaustive 5-seed grid:")
        print(text_table(["env", "exhaustive best", "race best", "same", "compute", "target <= 40%"], race_rows))
    return extra


def main() -> None:
    parser = base_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=1, help="whole studies per variant and env (default 1)")
    parser.add_argument("--first-repeat", type=int, default=0, help="index of the first repeat (to split a run)")
    parser.add_argument("--envs", default="CartPole-v1,Acrobot-v1")
    parser.add_argument("--race-envs", default="CartPole-v1", help="envs of part 2 ('' to skip it)")
    parser.add_argument("--trials", type=int, default=2, help="T: trials of the K=3 study (the K=1 study runs 3T)")
    parser.add_argument("--steps", type=int, default=12_000, help="env steps per seed on CartPole-v1")
    parser.add_argument("--acrobot-steps", type=int, default=20_000, help="env steps per seed on Acrobot-v1")
    parser.add_argument("--fresh", type=int, default=3, help="fresh seeds the chosen configuration is scored on")
    parser.add_argument("--race-steps", type=int, default=0, help="env steps per seed in part 2 (0: --steps)")
    parser.add_argument("--race-order", choices=["ascending", "descending"], default="ascending",
                        help="part 2's grid order: lr 1e-4 first (the weakest first, the default) or lr 2e-3 first")
    parser.add_argument("--race-only", action="store_true", help="part 2: the racing study only (its env steps)")
    parser.add_argument("--warmup", type=int, default=10, help="iterations before the racing study may prune")
    args = parser.parse_args()
    info = machine_info()
    print_header("seed-aware tuning: K=3 vs K=1, racing vs exhaustive", info,
                 [f"repeats {args.repeats}", f"envs {args.envs}", f"race envs {args.race_envs}",
                  f"T {args.trials}", f"steps {args.steps}/{args.acrobot_steps}", f"fresh seeds {args.fresh}"])
    records = run_all(__file__, _tasks(args), _describe, verbose=args.verbose)
    extra = _report(records, args)
    finish(records, info, args.json, extra)


if __name__ == "__main__":
    if not child_main(run_task):
        main()
