"""Tuning PPO on CartPole-v1: time and env steps until a study's first trial solves it (issue 4).

Two comparisons, in the same run, each study in its own subprocess, one after
the other:

1. Search strategies of rltune over the same search space and the same budget
   of env steps for the whole study (default 1.6M = the default study's
   16 trials x 100k steps):

   ``tpe-asha``  rltune's default CartPole study, ``studies/cartpole-ppo-tpe-asha.yaml``
                 as it is (TPE with 6 random start-up trials, ASHA at 20/60/180
                 iterations, 2 trials at once); only ``seed``, ``name``,
                 ``results_dir`` and ``n_trials`` (raised, so that the env-step
                 budget is what ends the study) are overridden.
   ``random``    the same file with ``search_alg: random`` and no pruner.
   ``grid``      the same file with ``search_alg: grid``, no pruner, and every
                 search-space entry replaced by its discretized version
                 (:data:`GRID`; 3 values per range, 729 points, run in the
                 order of the cartesian product: the file's first entry,
                 ``num_sgd_iter``, varies slowest).

   ``tpe-asha-notrack`` the default study with ``tracking: false`` (no MLflow
                 records; every other variant records the study in MLflow, the
                 default, in a local store under the study's results dir).
   ``tpe-asha-train100`` (not run by default) the default study as it was
                 before it evaluated: metric and stop on ``episode_reward_mean``,
                 the mean *training* return (with exploration) of the trial's
                 last 100 episodes, and no evaluation; all else the same.

   Every trial stops at ``evaluation/episode_reward_mean`` >= 475 or 100k
   steps (the file's ``stop``): every 10 iterations a trial runs 10
   deterministic episodes on separate envs (``evaluation_interval``). A study
   is solved at the first result (of any trial) whose study metric is >= 475.

2. The peer, RL Zoo's own tuner (SB3 PPO + Optuna, TPE with its median
   pruner, 2 jobs, 50k steps per trial, its own PPO search space), tuning
   PPO on CartPole-v1 from scratch::

       python -m rl_zoo3.train --algo ppo --env CartPole-v1 -optimize --n-trials 500 --n-jobs 2 \\
           --sampler tpe --pruner median --n-timesteps 50000 --seed S -f DIR --no-optim-plots

   Its trials report to Optuna only what its ``TrialEvalCallback`` measures:
   the mean return of 5 deterministic episodes on a separate env, every
   ``n_timesteps / n_evaluations`` steps; with 50k steps the Zoo's default is
   one evaluation per trial (1 per 100k steps, at least 1), at the end of the
   trial. The Zoo is solved at the first such evaluation >= 475.

How it is measured. Each study is a fresh subprocess; its wall time counts
from the moment the subprocess is started (imports, study creation and trial
start-up included, for both tools). rltune: every trial appends one JSON line
per iteration to ``trial_NNNNN/result.json`` with the wall-clock ``timestamp``
of the report; the results of all trials are merged by timestamp (the
timeline of the study, 2 trials at once), and the env steps until the solving
result are the sum of ``timesteps_this_iter`` of every result up to it. The
Zoo: ``python -m rl_zoo3.train`` runs unchanged in a small wrapper (this
script with ``--_zoo``) that wraps ``TrialEvalCallback._on_step`` to write one
JSON line per evaluation: its wall-clock time, the value it reported to
Optuna, the trial and the env steps of every trial started so far (their
models' ``num_timesteps``; the evaluation episodes are not counted, as
rltune's are not). The parent polls these files and stops a study at its
first solve, when its env steps exceed the budget (rltune), or at the wall
cap; "not reached" is reported as such. After an rltune study, the solving
trial's checkpoint (written at the solving iteration) is evaluated like the
Zoo evaluates: 5 deterministic episodes (``eval5``, not timed).
``train mean``: the solving trial's training return at the solve, the mean
of its last 100 training episodes (rltune's ``episode_reward_mean``; the Zoo:
its model's ``ep_info_buffer``). Neither tool judges by it.

Both tools are now judged by the same kind of test: the mean return of
deterministic episodes on separate envs (rltune: 10 episodes every 10
iterations; the Zoo: 5 episodes at the end of a 50k-step trial). ``eval5``
re-tests the rltune policy on 5 fresh episodes; ``tpe-asha-train100``
measures the study under the stricter criterion it had before.

Target: rltune's default study (``tpe-asha``) reaches its first solving trial
in under a third of RL Zoo's time (median over repeats, same run).

Full run (5 repeats: 30 min measured on 2 cores at load ~3; the grid studies, which
spend their whole budget, and the Zoo are the slow parts; a Zoo study takes from
10 s to 6 min)::

    .venv/bin/python benchmarks/bench_tuning.py --markdown --json tuning.json

The what-if on the old criterion (about 5 min, more when its studies are unlucky)::

    .venv/bin/python benchmarks/bench_tuning.py --variants tpe-asha,tpe-asha-train100 --markdown

Smoke test (about 2 min; threshold lowered to 150, tiny budgets)::

    .venv/bin/python benchmarks/bench_tuning.py --quick
"""

from __future__ import annotations

import json
import math
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import _common as common
from rltune.orchestrator._stop import lookup  # result keys as study files write them ("evaluation/...")

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
STUDY_FILE = ROOT / "studies" / "cartpole-ppo-tpe-asha.yaml"
VARIANTS = ("tpe-asha", "tpe-asha-notrack", "random", "grid", "rl_zoo3", "tpe-asha-train100")
DEFAULT_VARIANTS = ("tpe-asha", "tpe-asha-notrack", "random", "grid", "rl_zoo3")
TARGET_RATIO = 3.0
EVAL_EPISODES = 5  # as the Zoo's TrialEvalCallback (--eval-episodes default)
POLL_S = 0.25
TRAIN_METRIC = "episode_reward_mean"

# The discretized search space of the grid variant: each entry of the default study's space
# -> 3 values (the ends of the range and its middle; geometric middle for loguniform).
GRID: dict[tuple[str, ...], list[Any]] = {
    ("num_sgd_iter",): [5, 17, 30],                      # randint [5, 31)
    ("lr",): [1.0e-4, 5.5e-4, 3.0e-3],                   # loguniform [1e-4, 3e-3]
    ("lambda",): [0.8, 0.9, 1.0],                        # uniform [0.8, 1.0]
    ("gamma",): [0.98, 0.99, 0.995],                     # choice (all of it)
    ("clip_param",): [0.1, 0.2, 0.3],                    # uniform [0.1, 0.3]
    ("model", "fcnet_hiddens"): [[32, 32], [64, 64], [128, 128]],  # choice (all of it)
}


# == children ==================================================================================
def _load_study_fields() -> dict[str, Any]:
    import yaml

    return yaml.safe_load(STUDY_FILE.read_text())


def solve_metric(variant: str) -> str:
    """The result key a variant's study is solved by: the study file's metric (the train100 what-if: its own)."""
    return TRAIN_METRIC if variant == "tpe-asha-train100" else _load_study_fields()["metric"]


def _study_child(task: dict[str, Any]) -> None:
    """Run one rltune study (``tune.run`` with the default study file's fields and the variant's overrides)."""
    from rltune import tune

    fields = _load_study_fields()
    fields.update(name=task["name"], results_dir=task["results_dir"], seed=task["seed"])
    variant = task["variant"]
    if variant == "tpe-asha-train100":  # the default study before it evaluated: the training return's mean
        fields.update(metric=TRAIN_METRIC, stop={TRAIN_METRIC: common.SOLVED_CARTPOLE, "timesteps_total": 100_000})
        for key in ("evaluation_interval", "evaluation_duration", "evaluation_config"):
            fields["config"].pop(key, None)
        variant = "tpe-asha"
    elif variant == "tpe-asha-notrack":
        fields["tracking"] = False
        variant = "tpe-asha"
    if variant in ("tpe-asha", "random"):
        fields["n_trials"] = task["n_trials"]
    if variant == "random":
        fields.update(search_alg="random", scheduler="none")
    elif variant == "grid":
        fields.pop("n_trials", None)  # every grid point (the env-step budget ends the study first)
        fields.update(search_alg="grid", scheduler="none")
        for path, values in GRID.items():
            node = fields["config"]
            for key in path[:-1]:
                node = node[key]
            node[path[-1]] = {"grid_search": values}
    if task.get("stop"):
        fields["stop"] = task["stop"]
    run = fields.pop("run")
    tune.run(run, verbose=1, **fields)


def _evaluate_child(task: dict[str, Any]) -> dict[str, Any]:
    """Deterministic evaluation of a checkpoint (the Zoo's test: 5 episodes, no exploration)."""
    from rltune.trainers import Trainer

    trainer = Trainer.from_checkpoint(task["checkpoint"], {"num_workers": 0})
    try:
        evaluation = trainer.evaluate(EVAL_EPISODES)["evaluation"]
    finally:
        trainer.stop()
    return {"eval_return_mean": float(evaluation["episode_reward_mean"])}


def _zoo_child(events_path: str, zoo_args: list[str]) -> None:
    """``python -m rl_zoo3.train ZOO_ARGS``, with one JSON line per trial evaluation written to ``events_path``."""
    import runpy
    import threading

    from rl_zoo3 import callbacks as zoo_callbacks

    cls = zoo_callbacks.TrialEvalCallback
    registry: list[Any] = []
    lock = threading.Lock()
    out = open(events_path, "a", buffering=1)
    original_init, original_step = cls.__init__, cls._on_step

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        with lock:
            registry.append(self)

    def _on_step(self: Any) -> bool:
        before = self.eval_idx
        go_on = original_step(self)
        if self.eval_idx != before:  # an evaluation was just run and reported to Optuna
            now = time.time()
            with lock:
                started = list(registry)
            total = sum(int(getattr(getattr(cb, "model", None), "num_timesteps", 0) or 0) for cb in started)
            episodes = [float(info["r"]) for info in (self.model.ep_info_buffer or ())]
            line = {
                "t": now,
                "trial": self.trial.number,
                "eval_idx": self.eval_idx,
                "value": float(self.last_mean_reward),
                "trial_steps": int(self.model.num_timesteps),
                "total_steps": total,
                "trials_started": len(started),
                # the trial's own training return: the mean of its last (up to) 100 episodes, as rltune's metric
                "train_mean_100": sum(episodes) / len(episodes) if episodes else None,
                "pruned": bool(self.is_pruned),
                "params": {k: v for k, v in self.trial.params.items()},
            }
            with lock:
                out.write(json.dumps(line, default=str) + "\n")
        return go_on

    cls.__init__, cls._on_step = __init__, _on_step
    sys.argv = ["rl_zoo3.train", *zoo_args]
    runpy.run_module("rl_zoo3.train", run_name="__main__", alter_sys=True)


# == the parent: one study per subprocess, watched ==============================================
def _loadavg() -> tuple[float, float, float] | None:
    try:
        return tuple(round(x, 2) for x in os.getloadavg())  # type: ignore[return-value]
    except OSError:
        return None


class Watcher:
    """Runs one study's subprocess and polls its results until solved, over budget, capped or ended."""

    def __init__(self, cmd: list[str], log_path: Path, cap_s: float) -> None:
        self.cmd, self.log_path, self.cap_s = cmd, log_path, cap_s

    def run(self, poll: Any) -> dict[str, Any]:
        """``poll(t_launch) -> None | reason`` is called every POLL_S; a reason stops the study."""
        with open(self.log_path, "ab") as log:
            t_launch = time.time()
            proc = subprocess.Popen(self.cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True, env=dict(os.environ, PYTHONUNBUFFERED="1"))
            why = None
            while proc.poll() is None:
                time.sleep(POLL_S)
                why = poll(t_launch)
                if why is None and time.time() - t_launch > self.cap_s:
                    why = "cap"
                if why is not None:
                    self.stop(proc, why)
                    break
            code = proc.wait()
        return {"t_launch": t_launch, "stopped_because": why or "ended", "exit_code": code,
                "process_wall_s": time.time() - t_launch}

    def stop(self, proc: subprocess.Popen, why: str) -> None:
        raise NotImplementedError


class StudyWatcher(Watcher):
    """rltune: SIGINT (trials finish their iteration and checkpoint), again, then SIGKILL of its group."""

    def stop(self, proc: subprocess.Popen, why: str) -> None:
        if why == "solved":
            time.sleep(1.0)  # the solving trial writes its checkpoint at the solving iteration
        for sig, wait_s in ((signal.SIGINT, 30.0), (signal.SIGINT, 10.0)):
            if proc.poll() is not None:
                return
            proc.send_signal(sig)
            try:
                proc.wait(timeout=wait_s)
                return
            except subprocess.TimeoutExpired:
                pass
        _kill_group(proc)


class ZooWatcher(Watcher):
    """RL Zoo: its trials are threads of one process; SIGTERM, then SIGKILL of its group."""

    def stop(self, proc: subprocess.Popen, why: str) -> None:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=5)
                return
            except subprocess.TimeoutExpired:
                pass
        _kill_group(proc)


def _kill_group(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # our own child's session (start_new_session)
        except (ProcessLookupError, PermissionError):
            proc.kill()
    proc.wait()


def _read_results(study_dir: Path, offsets: dict[Path, int], events: list[dict[str, Any]], metric: str) -> None:
    """Append the complete new lines of every ``trial_*/result.json`` under ``study_dir`` to ``events``.

    ``value`` is the result's ``metric`` (a ``/`` path), ``train`` its training return.
    """
    if not study_dir.is_dir():
        return
    for trial_dir in sorted(study_dir.glob("trial_*")):
        path = trial_dir / "result.json"
        try:
            with open(path, "rb") as fh:
                fh.seek(offsets.get(path, 0))
                data = fh.read()
        except FileNotFoundError:
            continue
        end = data.rfind(b"\n")
        if end < 0:
            continue
        offsets[path] = offsets.get(path, 0) + end + 1
        for line in data[: end + 1].splitlines():
            try:
                r = json.loads(line)
            except ValueError:
                continue
            events.append({
                "t": float(r["timestamp"]),
                "trial": int(r.get("trial_number", int(trial_dir.name.split("_")[1]))),
                "iteration": int(r.get("training_iteration", 0)),
                "steps": int(r.get("timesteps_this_iter", 0)),
                "trial_steps": int(r.get("timesteps_total", 0)),
                "value": _num(lookup(r, metric)),
                "train": _num(r.get(TRAIN_METRIC)),
            })


def _num(x: Any) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def _first_solve(events: list[dict[str, Any]], threshold: float) -> tuple[dict[str, Any] | None, int, int]:
    """The first event (by time) at/over ``threshold``; env steps of all results up to it; trials started by then."""
    total = 0
    trials: set[int] = set()
    for e in sorted(events, key=lambda e: e["t"]):
        total += e["steps"]
        trials.add(e["trial"])
        if e["value"] >= threshold:
            return e, total, len(trials)
    return None, total, len(trials)


def run_rltune(task: dict[str, Any], args: Any, workdir: Path) -> dict[str, Any]:
    name = f"{task['variant']}_s{task['seed']}"
    results_dir = workdir / name
    study_dir = results_dir / "bench"
    child_task = {"variant": task["variant"], "seed": task["seed"], "name": "bench", "results_dir": str(results_dir),
                  "n_trials": args.n_trials, "stop": None}
    metric = solve_metric(task["variant"])
    if args.threshold != common.SOLVED_CARTPOLE:  # a smoke test: trials stop (and checkpoint) at the lowered threshold
        child_task["stop"] = {metric: args.threshold, "timesteps_total": 100_000}
    cmd = [sys.executable, str(Path(__file__).resolve()), "--_study", json.dumps(child_task)]
    offsets: dict[Path, int] = {}
    events: list[dict[str, Any]] = []

    def poll(t_launch: float) -> str | None:
        _read_results(study_dir, offsets, events, metric)
        solve, _steps, _ = _first_solve(events, args.threshold)
        if solve is not None:
            return "solved"
        if sum(e["steps"] for e in events) >= args.budget_steps:
            return "budget"
        return None

    results_dir.mkdir(parents=True, exist_ok=True)
    run = StudyWatcher(cmd, results_dir / "study.log", args.rltune_cap).run(poll)
    events = []  # the whole timeline, once more, after the study has ended
    _read_results(study_dir, {}, events, metric)
    solve, steps, trials = _first_solve(events, args.threshold)
    record: dict[str, Any] = {**run, "study_dir": str(study_dir), "results": len(events),
                              "tracked": (results_dir / "mlflow.db").exists(),
                              "trials_run": len({e["trial"] for e in events}),
                              "steps_run": sum(e["steps"] for e in events)}
    if solve is not None and steps <= args.budget_steps:
        trial_dir = study_dir / f"trial_{solve['trial']:05d}"
        params = json.loads((trial_dir / "params.json").read_text()).get("params", {})
        record.update(reached=True, wall_s=solve["t"] - run["t_launch"], env_steps=steps, solve_trial=solve["trial"],
                      solve_trial_steps=solve["trial_steps"], solve_value=solve["value"], trials_started=trials,
                      solve_params=params, train_mean=solve["train"])
        checkpoint = _checkpoint_at(trial_dir, solve["iteration"])
        if checkpoint is not None:
            ev = common.run_isolated(str(Path(__file__).resolve()), {"variant": "evaluate", "checkpoint": checkpoint},
                                     timeout=300)
            record["eval5"] = ev.get("eval_return_mean", math.nan)
            if "error" in ev:
                record["eval5_error"] = ev["error"]
        else:
            record["eval5_error"] = f"no checkpoint at iteration {solve['iteration']}"
    else:
        why = run["stopped_because"]
        if solve is not None or why == "budget":
            why = "budget"
        elif why == "ended":
            why = "study ended"
        record.update(reached=False, wall_s=math.nan, env_steps=math.nan, why_not=why)
    if run["exit_code"] not in (0, None) and run["stopped_because"] == "ended":
        record["error"] = f"study exited with {run['exit_code']} (see {results_dir / 'study.log'})"
    return record


def _checkpoint_at(trial_dir: Path, iteration: int) -> str | None:
    """The trial's checkpoint of ``iteration`` (the solving one: a trial that meets ``stop`` checkpoints at its end)."""
    path = trial_dir / f"checkpoint_{iteration:06d}"
    return str(path) if path.is_dir() else None


def zoo_args(seed: int, log_dir: Path, args: Any) -> list[str]:
    return ["--algo", "ppo", "--env", "CartPole-v1", "-optimize", "--n-trials", str(args.zoo_trials),
            "--n-jobs", "2", "--sampler", "tpe", "--pruner", "median", "--n-timesteps", str(args.zoo_timesteps),
            "--seed", str(seed), "-f", str(log_dir), "--no-optim-plots"]


def run_zoo(task: dict[str, Any], args: Any, workdir: Path) -> dict[str, Any]:
    results_dir = workdir / f"rl_zoo3_s{task['seed']}"
    results_dir.mkdir(parents=True, exist_ok=True)
    events_path = results_dir / "evaluations.jsonl"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--_zoo", str(events_path), "--",
           *zoo_args(task["seed"], results_dir / "logs", args)]
    state = {"offset": 0}
    events: list[dict[str, Any]] = []

    def read() -> None:
        try:
            with open(events_path, "rb") as fh:
                fh.seek(state["offset"])
                data = fh.read()
        except FileNotFoundError:
            return
        end = data.rfind(b"\n")
        if end < 0:
            return
        state["offset"] += end + 1
        events.extend(json.loads(line) for line in data[: end + 1].splitlines() if line.strip())

    def poll(t_launch: float) -> str | None:
        read()
        return "solved" if any(e["value"] >= args.threshold for e in events) else None

    run = ZooWatcher(cmd, results_dir / "zoo.log", args.zoo_cap).run(poll)
    read()
    record: dict[str, Any] = {**run, "study_dir": str(results_dir), "evaluations": len(events),
                              "trials_run": max((e["trials_started"] for e in events), default=0)}
    solve = next((e for e in sorted(events, key=lambda e: e["t"]) if e["value"] >= args.threshold), None)
    if solve is not None:
        record.update(reached=True, wall_s=solve["t"] - run["t_launch"], env_steps=solve["total_steps"],
                      solve_trial=solve["trial"], solve_trial_steps=solve["trial_steps"], solve_value=solve["value"],
                      trials_started=solve["trials_started"], solve_params=solve["params"], eval5=solve["value"],
                      train_mean=solve.get("train_mean_100"))
    else:
        record.update(reached=False, wall_s=math.nan, env_steps=math.nan,
                      why_not="cap" if run["stopped_because"] == "cap" else "study ended")
        if run["exit_code"] not in (0, None):
            tail = (results_dir / "zoo.log").read_text(errors="replace").strip().splitlines()[-5:]
            record["error"] = f"rl_zoo3 exited with {run['exit_code']}: " + " | ".join(tail)
    return record


# == figures ====================================================================================
def _fmt_time(r: dict[str, Any], cap: float) -> str:
    if "error" in r:
        return "error"
    if r["reached"]:
        return f"{r['wall_s']:.1f}"
    return f"not reached ({_why_text(r, cap)})"


def _why_text(r: dict[str, Any], cap: float) -> str:
    why = r.get("why_not")
    if why == "cap":
        return f"> {cap:.0f} s cap"
    if why == "budget":
        return "budget"
    return why or "-"


def _fmt_steps(r: dict[str, Any]) -> str:
    return f"{r['env_steps']:,.0f}" if r.get("reached") else "-"


def _censored_median(records: list[dict[str, Any]], key: str) -> tuple[float, bool]:
    """Median of ``key`` with not-reached runs as +inf; (value, is_lower_bound)."""
    values = sorted(r[key] if r.get("reached") else math.inf for r in records if "error" not in r)
    if not values:
        return math.nan, False
    m = statistics.median(values)
    return m, math.isinf(m)


def _fmt_median(value: float, inf: bool, digits: int, unit: str = "") -> str:
    if math.isnan(value):
        return "-"
    if inf:
        return "not reached"
    return f"{value:,.{digits}f}{unit}"


def report(records: list[dict[str, Any]], args: Any, info: dict[str, Any], variants: list[str]) -> list[str]:
    caps = {v: (args.zoo_cap if v == "rl_zoo3" else args.rltune_cap) for v in variants}
    print("\n== per study (seed = the study's seed; time from the study's process start)")
    rows = []
    for r in records:
        if r["variant"] not in variants:
            continue
        params = r.get("solve_params") or {}
        rows.append([
            r["variant"], r["seed"], _fmt_time(r, caps[r["variant"]]), _fmt_steps(r),
            f"#{r['solve_trial']}" if r.get("reached") else "-",
            f"{r['solve_trial_steps']:,}" if r.get("reached") else "-",
            r.get("trials_started", "-") if r.get("reached") else r.get("trials_run", "-"),
            f"{r['eval5']:.1f}" if isinstance(r.get("eval5"), float) and not math.isnan(r["eval5"]) else "-",
            f"{r['train_mean']:.1f}" if isinstance(r.get("train_mean"), (int, float)) else "-",
            {True: "yes", False: "no"}.get(r.get("tracked"), "-"),
            f"{r['process_wall_s']:.0f}",
            r["load_start"][0] if r.get("load_start") else "-",
        ])
    headers = ["variant", "seed", f"s to first {args.threshold:g}", "env steps (all trials)", "solving trial", "its steps",
               "trials started", "eval5", "train mean", "MLflow", "run wall s", "load"]
    print(common.text_table(headers, rows, left=1))
    for r in records:
        if r.get("reached"):
            p = ", ".join(f"{k}={_short(v)}" for k, v in (r.get("solve_params") or {}).items())
            print(f"  {r['variant']} seed {r['seed']}: trial {r['solve_trial']}: {p}")
        if r.get("error"):
            print(f"  {r['variant']} seed {r['seed']}: ERROR {r['error']}")
        if r.get("eval5_error"):
            print(f"  {r['variant']} seed {r['seed']}: eval5: {r['eval5_error']}")

    zoo = [r for r in records if r["variant"] == "rl_zoo3"]
    zoo_median, zoo_inf = _censored_median(zoo, "wall_s") if zoo else (math.nan, False)
    print("\n== medians over repeats (not reached counts as infinitely slow)")
    summary = []
    for v in variants:
        rs = [r for r in records if r["variant"] == v]
        t, t_inf = _censored_median(rs, "wall_s")
        s, s_inf = _censored_median(rs, "env_steps")
        reached = sum(1 for r in rs if r.get("reached"))
        ratio = "-"
        if v != "rl_zoo3" and zoo and not math.isnan(zoo_median) and not math.isnan(t):
            if t_inf:
                ratio = "-"
            elif zoo_inf:
                ratio = f"> {args.zoo_cap / t:.1f}x (Zoo not reached)"
            else:
                ratio = f"{zoo_median / t:.1f}x"
        summary.append([v, f"{reached}/{len(rs)}", _fmt_median(t, t_inf, 1), _fmt_median(s, s_inf, 0), ratio])
    headers2 = ["variant", f"reached {args.threshold:g}", f"median s to first {args.threshold:g}", "median env steps",
                "rl_zoo3 time / this"]
    print(common.text_table(headers2, summary, left=1))

    paired = []
    for r in records:
        if r["variant"] != "tpe-asha" or not r.get("reached"):
            continue
        z = next((z for z in zoo if z["seed"] == r["seed"]), None)
        if z is not None and z.get("reached"):
            paired.append(z["wall_s"] / r["wall_s"])
        elif z is not None and z.get("why_not") == "cap":
            paired.append(-args.zoo_cap / r["wall_s"])  # a lower bound
    lines = []
    if paired:
        text = ", ".join(f"> {-p:.1f}x" if p < 0 else f"{p:.1f}x" for p in paired)
        lines.append(f"- rl_zoo3 / tpe-asha by seed (same seed): {text}")
    tpe = [r for r in records if r["variant"] == "tpe-asha"]
    if tpe and zoo:
        t, t_inf = _censored_median(tpe, "wall_s")
        if t_inf or math.isnan(t):
            verdict = "FAIL (the default study did not reach 475 in most repeats)"
        elif zoo_inf:
            verdict = f"PASS (the Zoo did not reach 475 within its {args.zoo_cap:.0f} s cap in most repeats)"
        else:
            ok = zoo_median / t >= TARGET_RATIO
            verdict = f"{'PASS' if ok else 'FAIL'} ({zoo_median / t:.1f}x, target >= {TARGET_RATIO:.0f}x)"
        judged = args.threshold >= common.SOLVED_CARTPOLE
        lines.append(f"- Target (default study in under a third of RL Zoo's time, medians): "
                     f"{verdict if judged else 'not judged (threshold lowered: ' + verdict + ')'}")
    for line in lines:
        print(line)
    return _markdown(records, variants, summary, headers, rows, headers2, lines, info, args)


def _markdown(records: list[dict[str, Any]], variants: list[str], summary: list[list[Any]], headers: list[str],
              rows: list[list[Any]], headers2: list[str], lines: list[str], info: dict[str, Any], args: Any) -> list[str]:
    return [
        common.markdown_block("tuning, per study", headers, rows, info),
        common.markdown_block("tuning, medians", headers2, summary, info) + "\n" + "\n".join(lines) + "\n",
    ]


def _short(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.3g}"
    return str(v)


# == main =======================================================================================
def main() -> None:
    if len(sys.argv) >= 3 and sys.argv[1] == "--_study":
        _study_child(json.loads(sys.argv[2]))
        return
    if len(sys.argv) >= 4 and sys.argv[1] == "--_zoo" and sys.argv[3] == "--":
        _zoo_child(sys.argv[2], sys.argv[4:])
        return
    if common.child_main(_evaluate_child):
        return

    parser = common.base_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5, help="studies per variant, study seeds 0..N-1 (default 5)")
    parser.add_argument("--zoo-repeats", type=int, help="RL Zoo studies (default: --repeats), seeds 0..N-1")
    parser.add_argument("--variants", default=",".join(DEFAULT_VARIANTS),
                        help=f"comma-separated, of {', '.join(VARIANTS)} (default: all but tpe-asha-train100)")
    parser.add_argument("--budget-steps", type=int, default=1_600_000,
                        help="env steps for a whole rltune study, all trials (default 1,600,000 = 16 trials x 100k)")
    parser.add_argument("--n-trials", type=int, default=1000,
                        help="n_trials of the tpe-asha and random studies (default 1000: the budget ends them first)")
    parser.add_argument("--threshold", type=float, default=common.SOLVED_CARTPOLE, help="solved at (default 475)")
    parser.add_argument("--rltune-cap", type=float, default=480.0, help="wall cap of one rltune study, s (default 480)")
    parser.add_argument("--zoo-cap", type=float, default=900.0, help="wall cap of one RL Zoo study, s (default 900)")
    parser.add_argument("--zoo-timesteps", type=int, default=50_000, help="RL Zoo --n-timesteps per trial (default 50000)")
    parser.add_argument("--zoo-trials", type=int, default=500, help="RL Zoo --n-trials (default 500: the cap ends it first)")
    parser.add_argument("--workdir", default="/tmp/rltune_bench_tuning", help="results of every study go under here")
    parser.add_argument("--report-only", metavar="DIR",
                        help="print the figures of an earlier (or interrupted) run from DIR/records.jsonl, run nothing")
    parser.add_argument("--quick", action="store_true",
                        help="smoke test: 1 repeat, threshold 150, budget 150k steps, Zoo 6k steps per trial, caps 240 s")
    args = parser.parse_args()
    variants = common.parse_variants(args.variants, VARIANTS)
    if args.quick:
        args.repeats, args.zoo_repeats = 1, 1
        args.threshold, args.budget_steps = 150.0, 150_000
        args.zoo_timesteps, args.rltune_cap, args.zoo_cap = 6_000, 240.0, 240.0
    zoo_repeats = args.repeats if args.zoo_repeats is None else args.zoo_repeats

    if args.report_only:
        _report_only(Path(args.report_only), args, variants)
        return
    workdir = Path(args.workdir) / time.strftime("%Y%m%d-%H%M%S")
    workdir.mkdir(parents=True, exist_ok=True)
    info = common.machine_info()
    import rltune  # noqa: F401  (where the measured rltune comes from: a snapshot of a commit, or the work tree)

    info["rltune_path"] = str(Path(rltune.__file__).resolve().parent)
    if os.environ.get("RLTUNE_BENCH_COMMIT"):  # a snapshot outside git (git archive) names its commit
        info["rltune_commit"] = os.environ["RLTUNE_BENCH_COMMIT"]
    (workdir / "run.json").write_text(json.dumps({"machine": info, "args": vars(args)}, indent=1, default=str))
    from importlib import metadata

    versions = []
    for dist in ("optuna", "rl_zoo3"):
        try:
            versions.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{dist} not installed")
    common.print_header("Tuning PPO on CartPole-v1: time and env steps to the first trial at 475", info, [
        "also: " + ", ".join(versions) + f"; rltune imported from {info['rltune_path']}",
        f"rltune: {STUDY_FILE.relative_to(ROOT)}, budget {args.budget_steps:,} env steps per study (all trials), "
        f"cap {args.rltune_cap:.0f} s; variants {', '.join(v for v in variants if v != 'rl_zoo3')}",
        f"RL Zoo: python -m rl_zoo3.train {' '.join(zoo_args(0, Path('DIR'), args)).replace('--seed 0', '--seed S')}, "
        f"cap {args.zoo_cap:.0f} s",
        f"solved at {args.threshold:g}; repeats {args.repeats} (RL Zoo {zoo_repeats}); studies under {workdir}",
    ])

    tasks = []
    for seed in range(max(args.repeats, zoo_repeats)):
        for v in variants:
            if (v == "rl_zoo3" and seed < zoo_repeats) or (v != "rl_zoo3" and seed < args.repeats):
                tasks.append({"variant": v, "seed": seed})
    records = []
    start = time.perf_counter()
    for i, task in enumerate(tasks, 1):
        load_start = _loadavg()
        try:
            if task["variant"] == "rl_zoo3":
                result = run_zoo(task, args, workdir)
            else:
                result = run_rltune(task, args, workdir)
        except Exception as exc:  # one broken study must not lose the others' figures
            result = {"error": f"{type(exc).__name__}: {exc}", "reached": False, "process_wall_s": math.nan}
        record = {**task, **result, "load_start": load_start, "load_end": _loadavg()}
        records.append(record)
        with open(workdir / "records.jsonl", "a") as fh:  # kept as it goes: --report-only reprints a cut-short run
            fh.write(json.dumps(record, default=str) + "\n")
        cap = args.zoo_cap if task["variant"] == "rl_zoo3" else args.rltune_cap
        what = _fmt_time(record, cap)
        if record.get("reached"):
            what += f" s, {record['env_steps']:,} env steps, trial #{record['solve_trial']}"
            if isinstance(record.get("eval5"), float):
                what += f", eval5 {record['eval5']:.1f}"
        print(f"[{i:>2}/{len(tasks)} {time.perf_counter() - start:7.1f}s] {task['variant']} seed={task['seed']}: {what} "
              f"(ran {record.get('process_wall_s', math.nan):.0f} s, {record.get('trials_run', '?')} trials; "
              f"load {load_start})", flush=True)
    info["total_wall_s"] = time.perf_counter() - start
    blocks = report(records, args, info, variants)
    print(f"\ntotal {info['total_wall_s'] / 60:.1f} min; load average at start {info['loadavg_at_start']}, "
          f"at end {_loadavg()}")
    if args.markdown:
        for block in blocks:
            print(block)
    common.finish(records, info, args.json, {"args": vars(args), "grid": {".".join(k): v for k, v in GRID.items()}})


def _report_only(workdir: Path, args: Any, variants: list[str]) -> None:
    saved = json.loads((workdir / "run.json").read_text())
    info = saved["machine"]
    for key in ("threshold", "zoo_cap", "rltune_cap", "budget_steps"):
        setattr(args, key, saved["args"][key])
    records = [json.loads(line) for line in (workdir / "records.jsonl").read_text().splitlines() if line.strip()]
    print(f"figures of {workdir} ({len(records)} studies), started {info['date']}, load average at start "
          f"{info['loadavg_at_start']}")
    blocks = report(records, args, info, [v for v in variants if any(r["variant"] == v for r in records)])
    if args.markdown:
        for block in blocks:
            print(block)


if __name__ == "__main__":
    main()
