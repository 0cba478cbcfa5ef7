"""Trial start-up: warm start (the default) against cold start, Optuna's own ``study.optimize`` and Ray Tune.

Figures, each task in a fresh interpreter, rltune with warm start on and off
(``RLTUNE_WARM_START=0``) in the same run:

- function trial: launch of the trial process to its first result (a trivial
  function trial; the template already warm). Target < 0.5 s.
- PPO trial: launch to the first training iteration started (CartPole,
  ``num_workers`` 0 and 1; the trainer built, its rollout workers ready).
  Target < 1.5 s.
- study: wall time of a 100-trial study of a trivial function (random search,
  ``n_jobs`` 2), tracking off and on, from the ``tune.run`` call to its return
  (the template's start included). Target: faster than Ray Tune's.
- peers in the same run: Optuna's ``study.optimize`` of the same function (in
  one process: no trial process at all) and, with ``--ray-venv DIR`` (a venv
  with ``ray[tune]`` 2.x), Ray Tune's ``Tuner.fit`` of it (``ray.init``
  included; 2 CPUs), and Ray Tune's ``fit()`` to the first result.

Ratios are rltune's time over the peer's (< 1: rltune is faster)::

    .venv/bin/python benchmarks/bench_trial_start.py --ray-venv /work/rayvenv
    .venv/bin/python benchmarks/bench_trial_start.py --trials 100 --repeats 1 --only function,ppo
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import base_parser, child_main, machine_info, print_header, run_isolated  # noqa: E402

FIRST_RESULT_TARGET_S = 0.5
PPO_TARGET_S = 1.5

TRAINABLE = '''
import os, time

def trivial(config, reporter):
    reporter(score=config["x"], launch_s=time.time() - float(os.environ.get("BENCH_LAUNCH", "nan")))

def objective(trial):
    return trial.suggest_float("x", 0.0, 1.0)

def ray_trivial(config):
    from ray import tune
    tune.report({"score": config["x"]})
'''

# A module of its own: the trivial function's module imports nothing of rltune (as a user's would not).
CALLBACKS = '''
import os, time

from rltune.callbacks import DefaultCallbacks

class IterationStart(DefaultCallbacks):
    """Adds to each result the time from the trial's launch to the first iteration's start (the trainer built)."""
    built = None

    def on_trainer_init(self, *, trainer, **kwargs):
        IterationStart.built = time.time()

    def on_train_result(self, *, trainer, result, **kwargs):
        result["iteration_start_s"] = IterationStart.built - float(os.environ.get("BENCH_LAUNCH", "nan"))
'''


def _setup(tmp: str, warm: bool) -> None:
    """Write the trainable module, put it on sys.path, set warm start, and time each trial's launch."""
    (Path(tmp) / "bench_start_trainable.py").write_text(TRAINABLE)
    (Path(tmp) / "bench_start_callbacks.py").write_text(CALLBACKS)
    sys.path.insert(0, tmp)
    os.environ["RLTUNE_WARM_START"] = "1" if warm else "0"
    from rltune.orchestrator import _trial_host

    launch = _trial_host.start_process

    def timed(a: Any, init: Any) -> None:
        os.environ["BENCH_LAUNCH"] = repr(time.time())  # the trial process's environment is copied from here
        launch(a, init)

    _trial_host.start_process = timed


def _warm_up(kind: str) -> float:
    """Start the template of a study of ``kind`` ("trainer", "function") and wait until it is ready; seconds it took."""
    from rltune import _warm
    from rltune.orchestrator._child import preload_for

    start = time.perf_counter()
    template = _warm.template_for(preload_for(kind))
    if template is not None:
        template.wait_ready()
    return time.perf_counter() - start


def task_start(task: dict[str, Any]) -> dict[str, Any]:
    """Launch-to-first-result (function) or launch-to-first-iteration (PPO) of a few trials, one at a time."""
    with tempfile.TemporaryDirectory(prefix="rltune_bench_") as tmp:
        _setup(tmp, task["warm"])
        ready_s = _warm_up("function" if task["kind"] == "function" else "trainer") if task["warm"] else 0.0
        from bench_start_callbacks import IterationStart
        from bench_start_trainable import trivial

        from rltune import tune

        if task["kind"] == "function":
            analysis = tune.run(trivial, config={"x": tune.uniform(0, 1)}, metric="score", n_trials=task["n"],
                                search_alg="random", results_dir=tmp, name="start", verbose=0, tracking=False)
            key = "launch_s"
        else:
            config = {"env": "CartPole-v1", "num_workers": task["num_workers"], "train_batch_size": 200,
                      "sgd_minibatch_size": 64, "num_sgd_iter": 1, "model": {"fcnet_hiddens": [16]},
                      "callbacks": IterationStart, "lr": tune.loguniform(1e-4, 1e-3)}
            analysis = tune.run("PPO", config=config, stop={"training_iteration": 1}, metric="episode_reward_mean",
                                n_trials=task["n"], search_alg="random", results_dir=tmp, name="start", verbose=0,
                                tracking=False)
            key = "iteration_start_s"
        times = [t.last_result[key] for t in analysis.trials if t.last_result]
    return {"times": times, "template_ready_s": ready_s}


def task_study(task: dict[str, Any]) -> dict[str, Any]:
    """Wall time of a study of ``n`` trivial function trials (random search, 2 jobs), from the call to its return."""
    with tempfile.TemporaryDirectory(prefix="rltune_bench_") as tmp:
        _setup(tmp, task["warm"])
        from bench_start_trainable import trivial

        from rltune import tune

        start = time.perf_counter()
        analysis = tune.run(trivial, config={"x": tune.uniform(0, 1)}, metric="score", n_trials=task["n"], n_jobs=2,
                            search_alg="random", results_dir=tmp, name="study", verbose=0, tracking=task["tracking"])
        wall = time.perf_counter() - start
        assert analysis.counts() == {"COMPLETE": task["n"]}, analysis.counts()
    return {"wall_s": wall}


def task_optuna(task: dict[str, Any]) -> dict[str, Any]:
    """Optuna's own ``study.optimize`` of the same function, random search, in this process."""
    with tempfile.TemporaryDirectory(prefix="rltune_bench_") as tmp:
        (Path(tmp) / "bench_start_trainable.py").write_text(TRAINABLE)
        sys.path.insert(0, tmp)
        from bench_start_trainable import objective
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        start = time.perf_counter()
        study = optuna.create_study(sampler=optuna.samplers.RandomSampler(), direction="maximize")
        study.optimize(objective, n_trials=task["n"])
        return {"wall_s": time.perf_counter() - start, "per_trial_s": (time.perf_counter() - start) / task["n"]}


def task_ray(task: dict[str, Any]) -> dict[str, Any]:
    """Ray Tune's ``Tuner.fit`` of the same function: ``n`` trials (ray.init included), and fit() to a first result."""
    with tempfile.TemporaryDirectory(prefix="rltune_bench_") as tmp:
        (Path(tmp) / "bench_start_trainable.py").write_text(TRAINABLE)
        sys.path.insert(0, tmp)
        os.environ["PYTHONPATH"] = tmp + os.pathsep + os.environ.get("PYTHONPATH", "")
        import ray
        from bench_start_trainable import ray_trivial
        from ray import tune
        from ray.tune import Callback

        class First(Callback):
            at = None

            def on_trial_result(self, iteration, trials, trial, result, **info):
                First.at = First.at or time.perf_counter()

        def fit(n: int) -> float:
            tuner = tune.Tuner(ray_trivial, param_space={"x": tune.uniform(0, 1)},
                               tune_config=tune.TuneConfig(num_samples=n, metric="score", mode="max"),
                               run_config=tune.RunConfig(storage_path=tmp, verbose=0, callbacks=[First()]))
            start = time.perf_counter()
            tuner.fit()
            return start

        start = time.perf_counter()
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        fit(task["n"])
        wall = time.perf_counter() - start
        First.at = None
        first_start = fit(1)
        first = First.at - first_start
        ray.shutdown()
    return {"wall_s": wall, "first_result_s": first}


TASKS = {"start": task_start, "study": task_study, "optuna": task_optuna, "ray": task_ray}


def run_task(task: dict[str, Any]) -> dict[str, Any]:
    return TASKS[task["task"]](task)


def _median(results: list[dict[str, Any]], key: str) -> float | None:
    values = [v for r in results if "error" not in r for v in (r[key] if isinstance(r[key], list) else [r[key]])]
    return statistics.median(values) if values else None


def _fmt(value: float | None) -> str:
    return "failed" if value is None else f"{value:.3f} s"


def _ratio(ours: float | None, peer: float | None) -> str:
    return "-" if ours is None or not peer else f"{ours / peer:.2f}"


def _run(script: str, task: dict[str, Any], repeats: int, python: str | None = None) -> list[dict[str, Any]]:
    results = []
    for _ in range(repeats):
        result = run_isolated(script, task, timeout=1800, python=python)
        if "error" in result:
            print(f"  {task}: {result['error']}\n{result.get('stderr_tail', '')}", flush=True)
        results.append(result)
    return results


def main() -> int:
    parser = base_parser(__doc__)
    parser.add_argument("--trials", type=int, default=100, help="trials of the study (default 100)")
    parser.add_argument("--starts", type=int, default=3, help="trials whose start is timed, per variant (default 3)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--ray-venv", help="a venv with ray[tune] 2.x: Ray Tune's figures too")
    parser.add_argument("--only", default="function,ppo,study", help="comma-separated: function, ppo, study")
    args = parser.parse_args()
    only = set(args.only.split(","))
    script = os.path.abspath(__file__)
    print_header("Trial start-up: warm template against cold start, Optuna and Ray Tune", machine_info(),
                 [f"study trials: {args.trials}", f"timed starts per variant: {args.starts}",
                  f"repeats: {args.repeats}", f"Ray venv: {args.ray_venv or 'none'}"])
    optuna = _median(_run(script, {"task": "optuna", "n": args.trials}, args.repeats), "wall_s")
    per_trial = optuna / args.trials if optuna else None
    ray = ray_python = None
    if args.ray_venv:
        ray_python = str(Path(args.ray_venv) / "bin" / "python")
        ray = _run(script, {"task": "ray", "n": args.trials}, args.repeats, python=ray_python)
    rows: list[tuple[str, float | None, float | None, str]] = []
    if "function" in only:
        for warm in (True, False):
            res = _run(script, {"task": "start", "kind": "function", "warm": warm, "n": args.starts}, args.repeats)
            rows.append((f"function trial, launch -> first result, warm {'on' if warm else 'off'}",
                         _median(res, "times"), FIRST_RESULT_TARGET_S, "first"))
    if "ppo" in only:
        for workers in (0, 1):
            for warm in (True, False):
                task = {"task": "start", "kind": "ppo", "warm": warm, "n": args.starts, "num_workers": workers}
                rows.append((f"PPO CartPole num_workers {workers}, launch -> first iteration, warm "
                             f"{'on' if warm else 'off'}", _median(_run(script, task, args.repeats), "times"),
                             PPO_TARGET_S, "first"))
    if "study" in only:
        for tracking in (False, True):
            for warm in (True, False):
                task = {"task": "study", "warm": warm, "tracking": tracking, "n": args.trials}
                rows.append((f"study of {args.trials} trivial trials, tracking {'on' if tracking else 'off'}, warm "
                             f"{'on' if warm else 'off'}", _median(_run(script, task, args.repeats), "wall_s"),
                             None, "study"))
    _print(rows, optuna, per_trial, ray, args.trials)
    return 0


def _print(rows: list[tuple[str, float | None, float | None, str]], optuna: float | None, per_trial: float | None,
           ray: list[dict[str, Any]] | None, trials: int) -> None:
    ray_wall = _median(ray, "wall_s") if ray else None
    ray_first = _median(ray, "first_result_s") if ray else None
    print(f"\nOptuna study.optimize, {trials} trials in one process: {_fmt(optuna)} ({_fmt(per_trial)} per trial)")
    if ray is not None:
        print(f"Ray Tune Tuner.fit, {trials} trials (ray.init included): {_fmt(ray_wall)}; "
              f"fit() -> first result of 1 trial: {_fmt(ray_first)}")
    print()
    print(f"| {'figure':<76} | {'median':>9} | {'target':>7} | vs Optuna | vs Ray Tune |")
    print(f"|{'-' * 78}|{'-' * 11}|{'-' * 9}|-----------|-------------|")
    for name, value, target, kind in rows:
        optuna_ref = per_trial if kind == "first" else optuna
        ray_ref = ray_first if kind == "first" else ray_wall
        verdict = "" if target is None or value is None else (" OK" if value < target else " MISSED")
        target_text = f"< {target:g} s" if target is not None else ("< Ray" if ray_wall else "-")
        if target is None and ray_wall and value is not None:
            verdict = " OK" if value < ray_wall else " MISSED"
        print(f"| {name:<76} | {_fmt(value):>9} | {target_text + verdict:>7} | {_ratio(value, optuna_ref):>9} | "
              f"{_ratio(value, ray_ref):>11} |")


if __name__ == "__main__":
    if not child_main(run_task):
        sys.exit(main())
