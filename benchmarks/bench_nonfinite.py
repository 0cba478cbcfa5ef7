"""What screening for NaN costs: this checkout's samplers and learner step against a baseline checkout's, in one process.

The samplers (``_sampler.py``, ``_multi_agent_sampler.py``: what the row
layouts ``_env_rows.py`` and ``_agent_rows.py`` under the episode collector
were before) and the learner step (``_sgd_step.py``) of the ``--baseline``
checkout (one without the screening, e.g. a worktree of main before it) are loaded as
standalone modules next to this checkout's rltune, so both sides run the
same envs, policies, filters and torch in the same process, and only the
screening differs. Timed with the thread's CPU time, in rounds that
alternate which side goes first; a figure is the median over rounds of the
round's ratio (this checkout's time over the baseline's: 1.01 = 1% more),
each side's time in a round the mean of its instances (three rollout
workers each, built alternately: an instance's memory layout alone moved its
time by up to ~1% in A/A runs).

- sampling: one ``sample()`` of a rollout worker (num_workers 0, PPO's
  [64, 64] policy with its value head): 8 CartPole-v1 envs x 256 steps, with
  NoFilter and with MeanStdFilter, and 32 envs (a step's screen is one
  numpy call whatever the number of envs); the multi-agent cart-poles of
  ``bench_multi_agent_sampling.py`` (8 agents per env, 4 envs, 100 steps,
  one shared policy), NoFilter and MeanStdFilter. CPU time per env step.
- learner: the PPO minibatch step of ``bench_compiled_step.py`` (256 rows,
  grad clip 0.5), eager and compiled (this torch's compile path), blocks of
  100 calls. CPU time per call.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_nonfinite.py --baseline ../main --rounds 200
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _ma_env  # noqa: E402

from rltune.env._registry import resolve_env  # noqa: E402
from rltune.trainers import PPO  # noqa: E402
from rltune.trainers.sampling import _rollout_worker  # noqa: E402
from rltune.trainers.sampling._nonfinite import NanPolicy  # noqa: E402
from rltune.trainers.sampling._rollout_worker import RolloutWorker  # noqa: E402
from rltune.trainers.learning._sgd_step import SGDStep  # noqa: E402

SINGLE = {"env": "CartPole-v1", "num_envs_per_worker": 8, "rollout_fragment_length": 256, "train_batch_size": 2048,
          "model": {"fcnet_hiddens": [64, 64], "fcnet_activation": "tanh"}, "seed": 0}
INSTANCES = 3  # rollout workers of each side per sampling variant

MULTI = {"env": _ma_env.RltuneMultiCartPoles, "env_config": {"num_agents": 8}, "num_envs_per_worker": 4,
         "rollout_fragment_length": 100, "train_batch_size": 400, "sgd_minibatch_size": 100,
         "model": {"fcnet_hiddens": [64, 64], "fcnet_activation": "tanh"}, "seed": 0,
         "multiagent": {"policies": {"shared"}, "policy_mapping_fn": _ma_env.shared_policy}}


def load_module(checkout: Path, name: str) -> Any:
    """``rltune/trainers/[sampling/|learning/]<name>.py`` of ``checkout`` as a standalone module (its imports are this rltune's).

    (The samplers moved into ``trainers/sampling/`` in issue 25; an older checkout has them at ``trainers/``.)
    """
    trainers = checkout / "rltune" / "trainers"
    places = (trainers / "sampling" / f"{name}.py", trainers / "learning" / f"{name}.py", trainers / f"{name}.py")
    path = next(p for p in places if p.exists())
    spec = importlib.util.spec_from_file_location(f"baseline_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def worker(config: dict[str, Any], sampler_class: type | None) -> RolloutWorker:
    """A local rollout worker of ``config``; with ``sampler_class`` its sampler is of that (the baseline's) class.

    (The baseline's sampler stands in for this checkout's whole collector: it samples by itself.)
    """
    cfg = PPO.validate(config)
    w = RolloutWorker(env_spec=resolve_env(cfg.env), config=cfg, policy_class=PPO.policy_class, worker_index=0,
                      num_workers=0, num_envs=cfg.num_envs_per_worker)
    if sampler_class is not None:
        name = "AgentRows" if cfg.multiagent.policies else "EnvRows"
        original = getattr(_rollout_worker, name)
        setattr(_rollout_worker, name, lambda *a, nan_policy=None, **k: sampler_class(*a, **k))
        try:
            w.sampler = w._row_layout()
        finally:
            setattr(_rollout_worker, name, original)
        w.sampler.nan = NanPolicy("raise")  # what the worker reads; the baseline has no screen
    w.sample()  # warm-up: first resets, allocations
    return w


def interleaved(sides: dict[str, Callable[[], int]], rounds: int) -> dict[str, list[float]]:
    """CPU seconds per unit of each side's call (it returns its units), ``rounds`` times, the order flipping each round."""
    out: dict[str, list[float]] = {name: [] for name in sides}
    names = list(sides)
    for r in range(rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            start = time.thread_time()
            units = sides[name]()
            out[name].append((time.thread_time() - start) / units)
    return out


def report(label: str, times: dict[str, list[float]], unit: str, scale: float) -> None:
    """One table row; ``times`` holds ``baseline<k>`` and ``this<k>`` lists (several instances of each side)."""
    sides = {side: [v for k, v in times.items() if k.startswith(side)] for side in ("baseline", "this")}
    per_round = {side: [statistics.fmean(r) for r in zip(*lists)] for side, lists in sides.items()}
    ratio = statistics.median(a / b for a, b in zip(per_round["this"], per_round["baseline"]))
    print(f"| {label} | {scale * statistics.median(per_round['baseline']):.3f} | {scale * statistics.median(per_round['this']):.3f} | "
          f"{unit} | {ratio:.4f} ({100 * (ratio - 1):+.2f}%) |", flush=True)


def sampling(baseline: Path, rounds: int) -> None:
    single, multi = load_module(baseline, "_sampler").VectorSampler, load_module(baseline, "_multi_agent_sampler").MultiAgentSampler
    for label, config, base_class in (
        ("sampling 8 CartPole, NoFilter", SINGLE, single),
        ("sampling 8 CartPole, MeanStdFilter", {**SINGLE, "observation_filter": "MeanStdFilter"}, single),
        ("sampling 32 CartPole, NoFilter", {**SINGLE, "num_envs_per_worker": 32, "train_batch_size": 8192}, single),
        ("multi-agent 4 envs x 8 agents, NoFilter", MULTI, multi),
        ("multi-agent 4 envs x 8 agents, MeanStdFilter", {**MULTI, "observation_filter": "MeanStdFilter"}, multi),
    ):
        # Several instances of each side, built alternately: one instance's memory layout can shift its time by ~1%.
        workers = {}
        for k in range(INSTANCES):
            for side, cls in (("baseline", base_class), ("this", None))[:: 1 if k % 2 else -1]:
                workers[f"{side}{k}"] = worker(config, cls)
        times = interleaved({name: (lambda w=w: w.sample().env_steps) for name, w in workers.items()}, rounds)
        report(label, times, "us per env step", 1e6)
        for w in workers.values():
            w.stop()


def learner(baseline: Path, rounds: int) -> None:
    base_sgd = load_module(baseline, "_sgd_step")
    trainer = PPO(config={"env": "CartPole-v1", "model": {"fcnet_hiddens": [64, 64]}, "grad_clip": 0.5,
                          "torch_compile_learner": False, "seed": 0})
    step = trainer.get_learner().sgd_step
    n, g = 256, torch.Generator().manual_seed(0)
    inputs = (torch.randn(n, 4, generator=g), torch.randint(0, 2, (n,), generator=g), torch.full((n,), -0.69),
              torch.randn(n, generator=g), torch.randn(n, generator=g))
    scalars = tuple(torch.tensor(v) for v in (0.2, 0.0, 0.0))
    for mode, backend in (("eager", None), ("compiled", "inductor")):
        steps = {f"{name}0": cls(step.model, step.flat_params, step.optimizer, step.loss_fn, grad_clip=0.5, compile_backend=backend)
                 for name, cls in (("baseline", base_sgd.SGDStep), ("this", SGDStep))}
        args = inputs + (scalars if backend else tuple(float(s) for s in scalars))
        for s in steps.values():
            s(*args)  # the compile, for a compiled step

        def block(s: Any = None) -> int:
            for _ in range(100):
                s(*args)
            return 100

        times = interleaved({name: (lambda s=s: block(s)) for name, s in steps.items()}, rounds)
        report(f"PPO learner step, {mode}", times, "us per call", 1e6)
    trainer.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, required=True, help="checkout without the screening (holds rltune/trainers/)")
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--only", choices=("sampling", "learner"), help="one part only")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"baseline {args.baseline.resolve()}, {args.rounds} rounds, load average {os.getloadavg()[0]:.2f}\n")
    print("| what | baseline | this | unit (thread CPU time, median) | this / baseline (median of rounds) |")
    print("| --- | --- | --- | --- | --- |")
    if args.only in (None, "sampling"):
        sampling(args.baseline, args.rounds)
    if args.only in (None, "learner"):
        learner(args.baseline, args.rounds)
    print(f"\nload average at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
