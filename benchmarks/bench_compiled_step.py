"""One compiled PPO learner step: public torch.compile vs the private-API adapter vs eager, in one process.

The step of ``bench_ppo_cartpole.py`` (a 256-sample minibatch of CartPole,
64x64 tanh policy and value MLPs, grad clip 0.5, Adam), built three times
over the same trainer's model and optimizer: ``adapter`` (the trace of
``rltune/trainers/learning/_torch_compat.py``, used on the torch release it was
written for), ``public`` (``torch.compile(fullgraph=True, dynamic=False)``,
what every other torch release runs) and ``eager``. Each round times 100
calls of each, in turn, so that machine load hits all three alike; the
figures are medians over rounds and the median of the per-round ratios.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_compiled_step.py --rounds 30
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_ppo_cartpole import rltune_config  # noqa: E402

from rltune.trainers import PPO  # noqa: E402
from rltune.trainers.learning._sgd_step import SGDStep  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30, help="rounds of 100 calls of each variant (default 30)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    trainer = PPO(config={**rltune_config(0, 100_000), "torch_compile_learner": False})
    learner = trainer.get_learner()
    base = learner.sgd_step
    n = 256
    g = torch.Generator().manual_seed(0)
    inputs = (torch.randn(n, 4, generator=g), torch.randint(0, 2, (n,), generator=g), torch.full((n,), -0.69),
              torch.randn(n, generator=g), torch.randn(n, generator=g))
    scalars = tuple(torch.tensor(v) for v in (0.2, 0.0, 0.0))
    steps = {}
    for name, backend, private in (("adapter", "inductor", True), ("public", "inductor", False), ("eager", None, False)):
        step = SGDStep(base.model, base.flat_params, base.optimizer, base.loss_fn, grad_clip=base.grad_clip, compile_backend=backend)
        step.private_trace = private
        call_inputs = inputs + (scalars if backend else tuple(float(s) for s in scalars))
        start = time.perf_counter()
        step(*call_inputs)
        print(f"{name}: first call {time.perf_counter() - start:.2f} s (trace and compile; cache as it is)", flush=True)
        steps[name] = (step, call_inputs)
    for step, call_inputs in steps.values():
        for _ in range(50):
            step(*call_inputs)
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(args.rounds):
        for name, (step, call_inputs) in steps.items():
            start = time.perf_counter()
            for _ in range(100):
                step(*call_inputs)
            times[name].append((time.perf_counter() - start) / 100 * 1e6)
    for name, values in times.items():
        print(f"{name:8s} us per step: median {statistics.median(values):6.0f}  min {min(values):6.0f}")
    for a, b in (("public", "adapter"), ("eager", "adapter"), ("eager", "public")):
        ratios = [x / y for x, y in zip(times[a], times[b])]
        print(f"{a}/{b} per round: median {statistics.median(ratios):.2f} (min {min(ratios):.2f}, max {max(ratios):.2f})")
    trainer.stop()


if __name__ == "__main__":
    main()
