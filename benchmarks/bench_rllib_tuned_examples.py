"""RLlib's tuned example files for PPO and DQN on CartPole (and PPO on Pendulum): rltune against RLlib itself, time and env steps to the file's stop reward.

The files (``benchmarks/tuned_examples/``) are written here in RLlib's
tuned-example layout, with the hyperparameters, names and stop criteria of
RLlib's own CartPole files across Ray versions (0.8 to 2.x, YAML and the
new API stack's example scripts). Each file is run both ways, for several
seeds, the two libraries alternating which goes first:

- ``rltune``: ``rltune train -f FILE --config '{"seed": S}'`` as a
  subprocess, the file as written.
- ``rllib``: a child process in RLlib's own venv (``--rllib-python``) that
  builds the algorithm from the same file through Ray 2.60's config API
  (``benchmarks/_rllib_tuned.py`` says what is renamed and why), seeds it,
  and calls ``train()`` until the stop reward or the file's budget, as Tune's
  stop criteria would. No Tune: the loop is the part of ``rllib train -f`` a
  user cannot avoid.

Measured per run, from the moment the parent launches the process: the wall
time until the first result at or above the file's stop reward (the file's
own key: a mean return over the last 100 episodes, or over evaluation
episodes), the env steps sampled by then, and the start-up (launch to the
start of the first training iteration: interpreter, imports, the algorithm's
build, worker processes and, for RLlib, Ray's start). A run that ends its
budget below the reward is "not reached", and its time is the budget's.
Files rltune refuses are listed with its message and not timed.

Target (issue 17): rltune reaches the file's stop reward at least 5x sooner in
wall time than RLlib, for every CartPole file rltune runs (the median over
seeds of the per-seed ratio RLlib / rltune). ``pendulum-ppo`` (RLlib's classic
PPO Pendulum file) is measured the same way, beyond the issue's target.

Full run (about 1.5 hours on 2 busy cores; figures and commands in benchmarks/README.md)::

    PYTHONPATH=. .venv/bin/python benchmarks/bench_rllib_tuned_examples.py --markdown --json tuned_examples.json

Smoke test (one PPO and one DQN file, 1 seed, 2 iterations each; about 1.5 minutes)::

    PYTHONPATH=. .venv/bin/python benchmarks/bench_rllib_tuned_examples.py --quick
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _common as common
import _rllib_tuned as tuned

HERE = Path(__file__).resolve().parent
TUNED_DIR = HERE / "tuned_examples"
DEFAULT_RLLIB_PYTHON = "/work/rllib-venv/bin/python"
MIN_RATIO = 5.0  # RLlib's wall time to the reward / rltune's
FULL_SEEDS = 3  # the budget at which the target is judged
QUICK_FILES = ("cartpole-ppo", "cartpole-dqn")
QUICK_ITERATIONS = 2


# -- RLlib (a child process in RLlib's venv) ------------------------------------------------
def run_task(task: dict[str, Any]) -> dict[str, Any]:
    """One RLlib run of a tuned file: build, train to the stop reward or the budget, times as epoch seconds."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    torch.set_num_threads(1)  # rltune's default (torch_num_threads: 1), the fair peer
    _, body = tuned.read_tuned_file(task["file"])
    setup = tuned.rllib_setup(body)
    stop = dict(setup["stop"], **task.get("extra_stop", {}))
    algo = _build_rllib(setup, task["seed"])
    reward_key = tuned.RLLIB_STOP_KEYS[tuned.reward_stop(body["stop"])[0]]
    curve, reached_at, started_at = [], None, time.time()
    try:
        while True:
            result = algo.train()
            now = time.time()
            steps = _rllib_steps(result)
            reward = tuned.lookup(result, reward_key)
            curve.append([now, steps, reward])
            if reward is not None and reward >= stop[reward_key]:
                reached_at = now
                break
            if any((tuned.lookup(result, k) or 0) >= v for k, v in stop.items() if k != reward_key):
                break
            if now - started_at > task["deadline_s"]:
                break
    finally:
        algo.stop()
        import ray

        ray.shutdown()
    import ray

    return {
        "library": f"ray[rllib] {ray.__version__}, {setup['stack']} API stack",
        "built_at": started_at,
        "first_iteration_s": curve[0][0] - started_at,
        "reached": reached_at is not None,
        "reached_at": reached_at,
        "ended_at": curve[-1][0],
        "steps": curve[-1][1],
        "iterations": len(curve),
        "last_reward": curve[-1][2],
        "curve": curve,
    }


def _build_rllib(setup: dict[str, Any], seed: int) -> Any:
    """The algorithm of ``setup`` (see ``_rllib_tuned.rllib_setup``), every key checked to have taken its value."""
    if setup["algo"] == "PPO":
        from ray.rllib.algorithms.ppo import PPOConfig as Config
    else:
        from ray.rllib.algorithms.dqn import DQNConfig as Config
    new_stack = setup["stack"] == "new"
    if not new_stack and setup["algo"] == "DQN":
        _fix_old_stack_replay_buffer()
    config = Config().api_stack(enable_rl_module_and_learner=new_stack, enable_env_runner_and_connector_v2=new_stack)
    config = config.environment(setup["env"]).framework("torch").debugging(seed=seed)
    settings = dict(setup["config"])
    # Through their own methods: update_from_dict turns a buffer's type name into a class, which the old stack's
    # buffer construction in Ray 2.60 cannot take ("argument of type 'ABCMeta' is not iterable").
    replay, exploration = settings.pop("replay_buffer_config", None), settings.pop("exploration_config", None)
    config.update_from_dict(settings)
    if replay is not None:
        config = config.training(replay_buffer_config=dict(replay))
    if exploration is not None:
        config = config.env_runners(exploration_config=dict(exploration))
    if new_stack:
        from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig

        config = config.rl_module(model_config=DefaultModelConfig(**setup["model"]))
    else:
        config = config.training(model=setup["model"])
    for key, value in setup["config"].items():
        got = getattr(config, key if key != "lambda" else "lambda_")
        wanted = value.items() if isinstance(value, dict) else [(None, value)]
        for sub, v in wanted:
            have = got.get(sub) if sub is not None else got
            if have != v and getattr(have, "__name__", None) != v:
                raise RuntimeError(f"RLlib's config did not take {key}={value!r} (it has {got!r})")
    return config.build_algo()


def _fix_old_stack_replay_buffer() -> None:
    """Ray 2.60's old-stack DQN cannot build its replay buffer: apply the fix of ray-project/ray#60492.

    Its config validation turns ``replay_buffer_config["type"]`` into a class,
    and the algorithm's setup then tests a substring of it ("argument of type
    'ABCMeta' is not iterable", ray-project/ray#60491). A buffer type that is a
    class is built as the original method builds every non-episode buffer.
    """
    from ray.rllib.algorithms.algorithm import Algorithm
    from ray.rllib.utils.from_config import from_config
    from ray.rllib.utils.replay_buffers import ReplayBuffer

    original = Algorithm._create_local_replay_buffer_if_necessary

    def create(self: Any, config: Any) -> Any:
        buffer_config = config.get("replay_buffer_config") or {}
        if isinstance(buffer_config.get("type"), type) and not buffer_config.get("no_local_replay_buffer"):
            return from_config(ReplayBuffer, buffer_config)
        return original(self, config)

    Algorithm._create_local_replay_buffer_if_necessary = create


def _rllib_steps(result: dict[str, Any]) -> int:
    for key in ("num_env_steps_sampled_lifetime", "env_runners/num_env_steps_sampled_lifetime", "timesteps_total"):
        value = tuned.lookup(result, key)
        if value is not None:
            return int(value)
    raise KeyError("no env step count in RLlib's result")


# -- rltune (the parent runs `rltune train -f`) ---------------------------------------------
def run_rltune(task: dict[str, Any], timeout: float) -> dict[str, Any]:
    """``rltune train -f FILE`` in a subprocess; times from its launch, read from the trial's result.json."""
    _, body = tuned.read_tuned_file(task["file"])
    reward_key, reward = tuned.reward_stop(body["stop"])
    with tempfile.TemporaryDirectory(prefix="rltune_bench_") as tmp:
        cmd = [sys.executable, "-m", "rltune.orchestrator.cli", "train", "-f", task["file"],
               "--config", json.dumps({"seed": task["seed"]}), "--results-dir", tmp, "--name", "run"]
        if task.get("extra_stop"):
            cmd += ["--stop", json.dumps({**body["stop"], **task["extra_stop"]})]
        launched = time.time()
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"error": f"timed out after {timeout:.0f} s"}
        exited = time.time()
        if proc.returncode == 2:  # bad input: rltune's one message (before any compute), its problems one a line
            return {"error": _refusal(proc.stderr), "refused": True, "message": proc.stderr}
        if proc.returncode != 0:
            lines = [line for line in proc.stderr.strip().splitlines() if line.strip()]
            last = lines[-1] if lines else f"exit status {proc.returncode}"
            return {"error": last, "stderr_tail": "\n".join(lines[-15:])}
        results = [json.loads(line) for line in (Path(tmp) / "run" / "result.json").read_text().splitlines()]
    hit = next((r for r in results if (tuned.lookup(r, reward_key) or -1e300) >= reward), None)
    end = hit or results[-1]
    first = results[0]
    return {
        "library": "rltune",
        "launched": launched,
        "startup_s": first["timestamp"] - first["time_this_iter_s"] - launched,
        "reached": hit is not None,
        "time_s": end["timestamp"] - launched,
        "exit_s": exited - launched,
        "steps": end["timesteps_total"],
        "iterations": end["training_iteration"],
        "last_reward": tuned.lookup(end, reward_key),
        "curve": [[r["timestamp"] - launched, r["timesteps_total"], tuned.lookup(r, reward_key)] for r in results],
    }


def _refusal(stderr: str) -> str:
    """The keys rltune's error names (``  - key: why`` lines), or its last line."""
    keys = [line.strip()[2:].split(":")[0] for line in stderr.splitlines() if line.startswith("  - ")]
    if keys:
        return f"rltune refuses {', '.join(keys)}"
    lines = [line for line in stderr.splitlines() if line.strip()]
    return lines[-1] if lines else "exit status 2"


def run_rllib(task: dict[str, Any], python: str, timeout: float) -> dict[str, Any]:
    """The RLlib child of ``task``; its epoch times made relative to the launch."""
    launched = time.time()
    result = common.run_isolated(__file__, task, timeout=timeout, python=python)
    exited = time.time()
    if "error" in result:
        return result
    end = result["reached_at"] if result["reached"] else result["ended_at"]
    return {
        **result,
        "launched": launched,
        "startup_s": result["built_at"] - launched,
        "time_s": end - launched,
        "exit_s": exited - launched,
        "curve": [[t - launched, s, r] for t, s, r in result["curve"]],
    }


# -- the parent ---------------------------------------------------------------------------
def describe(record: dict[str, Any]) -> str:
    if "error" in record:
        return f"FAILED: {record['error']}"
    what = "reached" if record["reached"] else "NOT reached"
    return (f"{what} ({record['last_reward']:.1f}) in {record['time_s']:.1f} s, {record['steps']:,} env steps, "
            f"{record['iterations']} iterations; start-up {record['startup_s']:.1f} s, exit at {record['exit_s']:.1f} s")


def run_file(path: Path, args: Any, variants: list[str]) -> list[dict[str, Any]]:
    """Every seed of one file, rltune and RLlib alternating which goes first; stops at rltune's refusal."""
    extra = {"training_iteration": QUICK_ITERATIONS} if args.quick else {}
    records = []
    for seed in range(args.seeds):
        order = variants if seed % 2 == 0 else variants[::-1]
        for variant in order:
            task = {"file": str(path), "seed": seed, "extra_stop": extra, "deadline_s": args.timeout}
            start = time.perf_counter()
            if variant == "rltune":
                result = run_rltune(task, args.timeout + 120)
            else:
                result = run_rllib(task, args.rllib_python, args.timeout + 300)
            record = {"file": path.stem, "variant": variant, "seed": seed, **result}
            records.append(record)
            print(f"[{time.perf_counter() - start:6.1f}s] {path.stem} {variant} seed={seed}: {describe(record)}", flush=True)
            if record.get("refused"):
                return records
    return records


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def summarize(path: Path, records: list[dict[str, Any]], seeds: int) -> dict[str, Any]:
    """One file's figures: per library the reached count and medians; the per-seed ratios RLlib / rltune."""
    _, body = tuned.read_tuned_file(path)
    key, value = tuned.reward_stop(body["stop"])
    row: dict[str, Any] = {"file": path.stem, "stop": f"{key} >= {value:g}", "budget": _budget(body["stop"])}
    refused = next((r for r in records if r.get("refused")), None)
    if refused:
        return {**row, "refused": refused["error"]}
    for variant in ("rltune", "rllib"):
        done = [r for r in records if r["variant"] == variant and "error" not in r]
        row[variant] = {
            "runs": len(done), "failed": sum(1 for r in records if r["variant"] == variant and "error" in r),
            "reached": sum(r["reached"] for r in done),
            "time_s": _median([r["time_s"] for r in done]), "steps": _median([r["steps"] for r in done]),
            "startup_s": _median([r["startup_s"] for r in done]),
            "times": [r["time_s"] for r in done], "steps_each": [r["steps"] for r in done],
        }
    ratios = []
    for seed in range(seeds):
        ours = next((r for r in records if r["variant"] == "rltune" and r["seed"] == seed and "error" not in r), None)
        theirs = next((r for r in records if r["variant"] == "rllib" and r["seed"] == seed and "error" not in r), None)
        if ours and theirs and ours["reached"]:
            ratios.append({"ratio": theirs["time_s"] / ours["time_s"], "lower_bound": not theirs["reached"]})
    row["ratios"] = ratios
    row["ratio"] = _median([r["ratio"] for r in ratios])
    return row


def _budget(stop: dict[str, float]) -> str:
    rest = {k: v for k, v in stop.items() if k not in tuned.REWARD_KEYS}
    return ", ".join(f"{k} {v:,.0f}" for k, v in rest.items())


def table_rows(summary: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """One row per file: reached, median env steps and seconds to the reward (per seed), start-up, the ratio."""
    headers = ["file", "stop (budget)", "rltune reached", "rltune env steps", "rltune s to reward (per seed)",
               "rltune start-up s", "RLlib reached", "RLlib env steps", "RLlib s to reward (per seed)",
               "RLlib start-up s", "RLlib / rltune time (per seed)"]
    rows = []
    for s in summary:
        head = [s["file"], f"{s['stop']} ({s['budget']})"]
        if "refused" in s:
            rows.append(head + [s["refused"]] + ["-"] * (len(headers) - 3))
            continue
        row = list(head)
        for variant in ("rltune", "rllib"):
            v = s[variant]
            row += [
                f"{v['reached']}/{v['runs']}" + (f" ({v['failed']} failed)" if v["failed"] else ""),
                _fmt(v["steps"], ",.0f"),
                f"{_fmt(v['time_s'], '.1f')} ({', '.join(format(t, '.1f') for t in v['times'])})",
                _fmt(v["startup_s"], ".1f"),
            ]
        per_seed = ", ".join(("≥" if r["lower_bound"] else "") + format(r["ratio"], ".1f") for r in s["ratios"])
        row.append(f"**{_fmt(s['ratio'], '.1f')}x** ({per_seed})" if s["ratio"] is not None else "-")
        rows.append(row)
    return headers, rows


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def print_verdicts(summary: list[dict[str, Any]], judged: bool) -> None:
    """Per file: whether rltune reached the reward in every seed and the ratio target was met."""
    for s in summary:
        if "refused" in s:
            print(f"{s['file']}: not run ({s['refused']})")
            continue
        ours = s["rltune"]
        reached = ours["runs"] > 0 and ours["reached"] == ours["runs"]
        ratio = s["ratio"]
        ok = reached and ratio is not None and ratio >= MIN_RATIO
        print(f"{s['file']}: rltune reached the reward in {ours['reached']}/{ours['runs']} seeds, RLlib in "
              f"{s['rllib']['reached']}/{s['rllib']['runs']}; RLlib / rltune time {_fmt(ratio, '.1f')}x "
              f"(target >= {MIN_RATIO:.0f}x): {common.verdict(ok, judged)}")


def parse_args() -> Any:
    parser = common.base_parser(__doc__)
    names = sorted(p.stem for p in TUNED_DIR.glob("*.yaml"))
    parser.add_argument("--files", default=",".join(names), help=f"comma-separated, from {', '.join(names)} (default: all)")
    parser.add_argument("--seeds", type=int, default=FULL_SEEDS, help=f"seeds 0..N-1 per file and library (default {FULL_SEEDS})")
    parser.add_argument("--variants", default="rltune,rllib", help="comma-separated, from rltune, rllib (default both)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="wall seconds one run may train (default 1800)")
    parser.add_argument("--rllib-python", default=DEFAULT_RLLIB_PYTHON,
                        help=f"interpreter of a venv with ray[rllib] installed (default {DEFAULT_RLLIB_PYTHON})")
    parser.add_argument("--quick", action="store_true",
                        help=f"smoke test: files {', '.join(QUICK_FILES)}, 1 seed, at most {QUICK_ITERATIONS} iterations")
    args = parser.parse_args()
    if args.quick:
        args.files, args.seeds = ",".join(QUICK_FILES), 1
    args.file_list = common.parse_variants(args.files, names)
    return args


def main() -> None:
    args = parse_args()
    variants = common.parse_variants(args.variants, ("rltune", "rllib"))
    if "rllib" in variants and not os.path.exists(args.rllib_python):
        print(f"RLlib skipped: no interpreter at --rllib-python {args.rllib_python} (make one as benchmarks/README.md "
              "says: a venv with torch==2.13.0 and ray[rllib])\n", flush=True)
        variants.remove("rllib")
    info = common.machine_info()
    settings = [f"files: {', '.join(args.file_list)}", f"seeds: {args.seeds}; order alternates by seed",
                f"RLlib interpreter: {args.rllib_python if 'rllib' in variants else '(skipped)'}; torch 1 thread on both sides"]
    common.print_header("RLlib's tuned PPO and DQN files: rltune train -f vs RLlib 2.60, time to the stop reward", info, settings)
    records, summary = [], []
    for name in args.file_list:
        path = TUNED_DIR / f"{name}.yaml"
        setup = tuned.rllib_setup(tuned.read_tuned_file(path)[1])
        print(f"-- {name}: RLlib on its {setup['stack']} API stack; " + ("; ".join(setup["changes"]) or "no changes"), flush=True)
        file_records = run_file(path, args, variants)
        records += file_records
        summary.append(summarize(path, file_records, args.seeds))
    headers, rows = table_rows(summary)
    print()
    print(common.text_table(headers, rows))
    print()
    judged = args.seeds >= FULL_SEEDS and not args.quick and variants == ["rltune", "rllib"]
    if not judged:
        print(f"(short run: the target is judged with --seeds {FULL_SEEDS} and the files' own budgets)")
    print_verdicts(summary, judged)
    common.finish(records, info, args.json, {"summary": summary, "args": {k: v for k, v in vars(args).items()}})
    if args.markdown:
        print(common.markdown_block("RLlib's tuned PPO and DQN files", headers, rows, info))


if __name__ == "__main__":
    if not common.child_main(run_task):
        main()
        sys.exit(0)
