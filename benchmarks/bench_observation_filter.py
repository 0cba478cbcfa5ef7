"""What ``observation_filter: MeanStdFilter`` costs a rollout worker: its sampling against NoFilter's, in one process.

Rollout workers of one config each (8 CartPole-v1 envs, PPO's [64, 64] tanh
policy with its value head, fragments of 256 steps: ``bench_sampling.py``'s
rltune-local), in the same process, sampled in turns (the order flips every
round), timed with the thread's CPU time: on a shared machine the variants
then see the same machine speed, which separate runs of ``bench_sampling.py
--observation-filter`` do not.

- ``NoFilter``: the default.
- ``MeanStdFilter``: worker 0, the trainer's own (the master filter, what
  ``num_workers: 0`` samples with).
- ``MeanStdFilter-remote``: worker 1, as in a rollout worker process (it also
  keeps the rows it has not reported to the trainer yet).

Printed: env steps per CPU-second of each, and its share of NoFilter's
(the median of each round's ratio).

Run (about a minute)::

    .venv/bin/python benchmarks/bench_observation_filter.py

Smoke test (a few seconds)::

    .venv/bin/python benchmarks/bench_observation_filter.py --quick
"""

from __future__ import annotations

import statistics
import time

import _common as common

VARIANTS = {"NoFilter": ("NoFilter", 0), "MeanStdFilter": ("MeanStdFilter", 0), "MeanStdFilter-remote": ("MeanStdFilter", 1)}
CONFIG = {
    "env": "CartPole-v1",
    "num_envs_per_worker": 8,
    "rollout_fragment_length": 256,
    "model": {"fcnet_hiddens": [64, 64], "fcnet_activation": "tanh"},
    "seed": 0,
}


def main() -> None:
    parser = common.base_parser(__doc__)
    parser.add_argument("--rounds", type=int, default=30, help="timed sample() calls of each variant (default 30)")
    parser.add_argument("--quick", action="store_true", help="smoke test: --rounds 4")
    args = parser.parse_args()
    rounds = 4 if args.quick else args.rounds

    import torch

    from rltune.env._registry import resolve_env
    from rltune.trainers import PPO
    from rltune.trainers.sampling._rollout_worker import RolloutWorker

    torch.set_num_threads(1)
    info = common.machine_info()
    common.print_header(
        "MeanStdFilter against NoFilter: one rollout worker's sampling, 8 CartPole-v1 envs, in one process",
        info,
        [f"budget: {rounds} rounds of one sample() call (2048 env steps) per variant, thread CPU time, after one warm-up"],
    )
    workers = {}
    for name, (observation_filter, index) in VARIANTS.items():
        config = PPO.validate({**CONFIG, "observation_filter": observation_filter})
        workers[name] = RolloutWorker(
            env_spec=resolve_env("CartPole-v1"), config=config, policy_class=PPO.policy_class,
            worker_index=index, num_workers=1, num_envs=CONFIG["num_envs_per_worker"],
        )
        workers[name].sample()  # warm-up: first resets, allocations
    rates: dict[str, list[float]] = {name: [] for name in workers}
    names = list(workers)
    for r in range(rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            start = time.thread_time()
            steps = workers[name].sample().env_steps
            rates[name].append(steps / (time.thread_time() - start))
    rows = []
    for name, values in rates.items():
        share = statistics.median(a / b for a, b in zip(values, rates["NoFilter"]))
        rows.append([name, f"{statistics.median(values):,.0f}", f"{100 * share:.0f}%"])
    print(common.text_table(["variant", "env steps per CPU-second (median)", "of NoFilter (median of rounds)"], rows))
    if args.markdown:
        print(common.markdown_rows(rows))
    for worker in workers.values():
        worker.stop()
    common.finish([{"variant": n, "rates": v} for n, v in rates.items()], info, args.json)


if __name__ == "__main__":
    main()
