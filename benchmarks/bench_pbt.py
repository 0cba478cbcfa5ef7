"""Population Based Training: rltune's PBT vs TPE+ASHA (and Ray Tune's PBT) on PPO, same budget, same run.

Variants, each a study in its own fresh subprocess, one after the other:

``pbt``       rltune's PBT (``studies/acrobot-ppo-pbt.yaml``'s settings): a
              population of ``--population`` PPO trials at once, each stopped at
              ``--steps`` env steps; every ``--interval`` iterations the bottom
              quarter exploits the top quarter (lr, clip_param, lambda,
              entropy_coeff perturbed or resampled).
``tpe-asha``  TPE + ASHA over the same four hyperparameters, the same PPO
              settings, ``--population`` trials at once, trials drawn until the
              study has used the PBT study's env steps (``n_trials`` =
              ``2 x population``; ASHA stops the laggards at ``interval``,
              ``3 x interval``, ... iterations).
``ray-pbt``   Ray Tune's PopulationBasedTraining over RLlib's PPO (its own venv:
              ``--ray-venv``, e.g. ``/work/rayvenv`` with ``ray[tune,rllib]``),
              the same population, interval, mutations and env steps
              (``require_attrs=False``: Acrobot's first iterations end no
              episode, so they have no return, which rltune's PBT skips too).

Figures per variant: wall time, env steps sampled (every trial's
``timesteps_this_iter`` summed), the best trial's final
``episode_reward_mean`` (the mean return of its last 100 training episodes),
and for rltune's variants the time between iterations as a share of trial time
(result.json: each result's ``timestamp`` minus the previous one's, minus its
own ``time_this_iter_s``: the decision round trip, checkpoints, and for PBT the
exploit: building the trainer of the new config and restoring the other
trial's checkpoint). PBT's bookkeeping share is that share minus TPE+ASHA's
(same trainer, same loop, no PBT), target < 5%.

Run from the repository root::

    PYTHONPATH=. .venv/bin/python benchmarks/bench_pbt.py                    # Acrobot, 4 x 60k steps
    PYTHONPATH=. .venv/bin/python benchmarks/bench_pbt.py --ray-venv /work/rayvenv
    PYTHONPATH=. .venv/bin/python benchmarks/bench_pbt.py --quick            # CartPole, 4 x 8k steps
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

MUTATIONS = {"lr": {"loguniform": [1.0e-4, 3.0e-3]}, "clip_param": [0.1, 0.2, 0.3],
             "lambda": {"uniform": [0.9, 0.99]}, "entropy_coeff": [0.0, 0.001, 0.01]}
SPACE = {k: {"choice": v} if isinstance(v, list) else v for k, v in MUTATIONS.items()}  # the first configs
PPO = {"num_workers": 0, "num_envs_per_worker": 16, "rollout_fragment_length": 64, "train_batch_size": 1024,
       "sgd_minibatch_size": 256, "num_sgd_iter": 4, "gamma": 0.99, "kl_coeff": 0.0, "vf_clip_param": None,
       "grad_clip": 0.5, "model": {"fcnet_hiddens": [64, 64]}}


def _rltune_child(args: dict[str, Any]) -> dict[str, Any]:
    from rltune import tune

    fields: dict[str, Any] = dict(
        config={"env": args["env"], **PPO, **SPACE}, stop={"timesteps_total": args["steps"]},
        metric="episode_reward_mean", mode="max", max_concurrent=args["population"], seed=args["seed"],
        results_dir=args["dir"], name=args["variant"], tracking=False, verbose=0)
    if args["variant"] == "pbt":
        fields.update(num_samples=args["population"], search_alg="random", scheduler={
            "type": "pbt", "perturbation_interval": args["interval"], "quantile_fraction": 0.25,
            "resample_probability": 0.25, "hyperparam_mutations": MUTATIONS})
    else:
        fields.update(num_samples=2 * args["population"], search_alg={"type": "tpe", "n_startup_trials": args["population"]},
                      scheduler={"type": "asha", "min_resource": args["interval"], "reduction_factor": 3})
    start = time.perf_counter()
    analysis = tune.run("PPO", **fields)
    wall = time.perf_counter() - start
    steps, finals, between, trial_time, exploits = 0, [], 0.0, 0.0, 0
    for frozen in analysis.study.trials:
        exploits += len(frozen.user_attrs.get("pbt_lineage") or [])
        path = Path(frozen.user_attrs["trial_dir"]) / "result.json"
        results = [json.loads(line) for line in path.read_text().splitlines()]
        steps += sum(r.get("timesteps_this_iter", 0) for r in results)
        if results:
            finals.append(results[-1]["episode_reward_mean"])
            trial_time += results[-1]["timestamp"] - results[0]["timestamp"] + results[0]["time_this_iter_s"]
        for before, r in zip(results, results[1:]):
            between += max(0.0, r["timestamp"] - before["timestamp"] - r["time_this_iter_s"])
    return {"wall_s": wall, "env_steps": steps, "best_final": max(finals), "trials": len(analysis.study.trials),
            "between_share": between / trial_time if trial_time else None, "exploits": exploits}


RAY_CHILD = '''
import json, os, sys, time
args = json.loads(sys.argv[1])
os.environ["TUNE_DISABLE_STRICT_METRIC_CHECKING"] = "1"  # Acrobot's first results have no return yet
import ray
from ray import tune
from ray.rllib.algorithms.ppo import PPOConfig
from ray.tune.schedulers import PopulationBasedTraining
ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
config = (PPOConfig().environment(args["env"])
          .env_runners(num_env_runners=0, num_envs_per_env_runner=16, rollout_fragment_length=64)
          .training(train_batch_size_per_learner=1024, minibatch_size=256, num_epochs=4, gamma=0.99, kl_coeff=0.0,
                    grad_clip=0.5, lr=tune.loguniform(1e-4, 3e-3), clip_param=tune.choice([0.1, 0.2, 0.3]),
                    lambda_=tune.uniform(0.9, 0.99), entropy_coeff=tune.choice([0.0, 0.001, 0.01]))
          .rl_module(model_config={"fcnet_hiddens": [64, 64]})
          .resources(num_cpus_for_main_process=0.5).debugging(seed=args["seed"]))
pbt = PopulationBasedTraining(time_attr="training_iteration", perturbation_interval=args["interval"],
    quantile_fraction=0.25, resample_probability=0.25, require_attrs=False,
    hyperparam_mutations={"lr": tune.loguniform(1e-4, 3e-3), "clip_param": [0.1, 0.2, 0.3],
                          "lambda": tune.uniform(0.9, 0.99), "entropy_coeff": [0.0, 0.001, 0.01]})
metric = "env_runners/episode_return_mean"
start = time.perf_counter()
results = tune.Tuner("PPO", param_space=config, tune_config=tune.TuneConfig(
    scheduler=pbt, num_samples=args["population"], metric=metric, mode="max", max_concurrent_trials=args["population"]),
    run_config=tune.RunConfig(stop={"num_env_steps_sampled_lifetime": args["steps"]}, storage_path=args["dir"],
                              verbose=0)).fit()
wall = time.perf_counter() - start
def last_return(result):
    # Ray 2.x's episode_return_mean holds only the episodes that ended in that iteration: NaN in iterations where
    # none did (16 Acrobot envs end theirs together), so a trial's final return is its last iteration that has one
    frame = result.metrics_dataframe
    if frame is None or metric not in frame:
        return float("nan")
    ended = frame[metric].dropna()
    return float(ended.iloc[-1]) if len(ended) else float("nan")
finals = [last_return(r) for r in results]
finals = [f for f in finals if f == f] or [float("nan")]  # NaN: no episode ended at all
steps = sum(r.metrics.get("num_env_steps_sampled_lifetime", 0) for r in results if r.metrics)
print(json.dumps({"wall_s": wall, "env_steps": steps, "best_final": max(finals),
                  "trials": len(results), "library": "ray " + ray.__version__}))
'''


def _run(variant: str, args: argparse.Namespace, workdir: str) -> dict[str, Any]:
    task = {"variant": variant, "env": args.env, "population": args.population, "steps": args.steps,
            "interval": args.interval, "seed": args.seed, "dir": os.path.join(workdir, variant)}
    if variant == "ray-pbt":
        if not args.ray_venv:
            return {"variant": variant, "skipped": "no --ray-venv given (a venv with ray[tune,rllib])"}
        cmd = [str(Path(args.ray_venv) / "bin" / "python"), "-c", RAY_CHILD, json.dumps(task)]
    else:
        cmd = [sys.executable, __file__, "--_child", json.dumps(task)]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    if proc.returncode != 0:  # the lines that name an error (Ray's end with a long result dict)
        named = [line[:400] for line in proc.stderr.splitlines() if "Error" in line or "error:" in line]
        return {"variant": variant, "error": "\n".join(named[-6:]) or proc.stderr.strip()[-1500:]}
    record = json.loads(proc.stdout.strip().splitlines()[-1])
    return {"variant": variant, "process_s": time.perf_counter() - start, **record}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", default="Acrobot-v1")
    parser.add_argument("--population", type=int, default=4)
    parser.add_argument("--steps", type=int, default=60_000, help="env steps per trial")
    parser.add_argument("--interval", type=int, default=4, help="PBT's perturbation_interval (iterations)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--variants", default="pbt,tpe-asha,ray-pbt")
    parser.add_argument("--ray-venv", default=None, help="a venv with ray[tune,rllib] for the ray-pbt variant")
    parser.add_argument("--timeout", type=float, default=3600)
    parser.add_argument("--quick", action="store_true", help="CartPole-v1, 4 x 8k steps, interval 2")
    parser.add_argument("--json", default=None, help="write the records here")
    parser.add_argument("--_child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args._child:
        print(json.dumps(_rltune_child(json.loads(args._child))))
        return
    if args.quick:
        args.env, args.steps, args.interval = "CartPole-v1", 8_000, 2
    print(f"PBT benchmark: PPO on {args.env}, population {args.population}, {args.steps:,} env steps per trial, "
          f"interval {args.interval} iterations, load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    records = []
    with tempfile.TemporaryDirectory(prefix="bench_pbt_") as workdir:
        for variant in args.variants.split(","):
            record = _run(variant, args, workdir)
            records.append(record)
            print(json.dumps(record))
    _report(records)
    if args.json:
        Path(args.json).write_text(json.dumps(records, indent=2))


def _report(records: list[dict[str, Any]]) -> None:
    by = {r["variant"]: r for r in records if "wall_s" in r}
    print(textwrap.dedent("""
        variant     wall s   env steps   best final return   trials   exploits   between-iteration share"""))
    for name, r in by.items():
        share = r.get("between_share")
        print(f"{name:<10} {r['wall_s']:8.1f} {r['env_steps']:11,} {r['best_final']:19.1f} {r['trials']:8} "
              f"{r.get('exploits', '-')!s:>10}   {'-' if share is None else f'{share:.1%}'}")
    pbt, asha, ray = by.get("pbt"), by.get("tpe-asha"), by.get("ray-pbt")
    if pbt and asha and pbt.get("between_share") is not None and asha.get("between_share") is not None:
        extra = pbt["between_share"] - asha["between_share"]
        print(f"PBT bookkeeping (exploit/explore, forced checkpoints) share of trial time: {extra:.1%} "
              f"(target < 5%: {'met' if extra < 0.05 else 'NOT met'})")
        print(f"best final return, PBT vs TPE+ASHA: {pbt['best_final']:.1f} vs {asha['best_final']:.1f}; "
              f"wall time ratio {pbt['wall_s'] / asha['wall_s']:.2f}")
    if pbt and ray:
        print(f"vs Ray Tune's PBT: best final return {pbt['best_final']:.1f} vs {ray['best_final']:.1f}; "
              f"wall time ratio (rltune / Ray) {pbt['wall_s'] / ray['wall_s']:.2f}")
    for r in records:
        if "wall_s" not in r:
            print(f"{r['variant']}: {r.get('skipped') or 'failed: ' + r.get('error', '')[-600:]}")


if __name__ == "__main__":
    main()
