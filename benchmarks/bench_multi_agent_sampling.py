"""Multi-agent sampling throughput: rltune's multi-agent sampling (the collector's AgentRows layout) vs RLlib's multi-agent PPO EnvRunner.

The env (``benchmarks/_ma_env.py``, written once): N cart-poles per env
(2, 8, 32 agents), all acting at every step, gymnasium's CartPole physics per
agent, episodes of 200 steps. rltune runs it on ``rltune.env.MultiAgentEnv``,
RLlib on ``ray.rllib.env.multi_agent_env.MultiAgentEnv``. The same settings
on both sides: 4 envs per worker, rollout_fragment_length 100, one shared
policy (``--mappings groups`` adds two policies, even and odd agents), PPO's
default model with 64x64 tanh hidden layers, torch 1 thread.

Variants, each run in its own subprocess:

- ``rltune``: a PPO trainer with num_workers 0, timing
  ``trainer.workers.sample(4 * 100)``: envs, one batched forward per policy
  per step (policy and value nets), per-agent transitions, postprocessing
  (GAE) of every trajectory. The same process also times rltune's
  single-agent path, in measurements that alternate with the multi-agent
  ones (so the cost ratio is taken seconds apart, not minutes):

  - ``single``: ``SingleCartPole`` (one agent of the same env as a
    gymnasium env), same settings (4 envs);
  - ``single 4N``: the same with 4 x N envs, one per agent of the
    multi-agent run: as many rows per forward pass and agent steps per call
    (the stricter reference: the multi-agent run's larger forward batches
    are no advantage over it).
- ``rllib``: RLlib's new API stack, a ``MultiAgentEnvRunner`` built from a
  ``PPOConfig`` (num_env_runners 0, so no Ray cluster is started), timing
  ``runner.sample()`` (one fragment of every env): envs, connectors, the
  inference-only RLModule's forward (no value head; RLlib computes values and
  GAE on the learner side, which is not timed), episode bookkeeping. It runs
  with the interpreter of ``--rllib-python`` (RLlib in its own venv).
- ``rltune-1w`` (not in the default set): ``rltune`` with 1 rollout worker
  process x 4 envs (adds the pipe transfer).

Each run: two warm-up calls, then ``--repeats`` measurements of at least
``--seconds`` each; a run's figure is the median. Rounds are interleaved
(rltune and RLlib alternate which goes first) and rltune / RLlib is taken
within a round, so a change in machine load hits both sides alike.

Targets (issue 16): rltune >= 3x RLlib's agent steps/s at every agent count,
and rltune's cost per agent step within 2x of its single-agent path's cost per
env step (``multi / single``: single-agent steps/s over multi-agent agent
steps/s), against both single-agent references (the median of each run's
per-measurement ratios, then the median over rounds).

Full run (about 8 minutes; figures and the exact commands in benchmarks/README.md)::

    PYTHONPATH=. .venv/bin/python benchmarks/bench_multi_agent_sampling.py --markdown --json ma_sampling.json

Smoke test (about 1.5 minutes)::

    PYTHONPATH=. .venv/bin/python benchmarks/bench_multi_agent_sampling.py --quick
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import _common as common

HERE = os.path.dirname(os.path.abspath(__file__))
NUM_ENVS = 4
FRAGMENT = 100
AGENT_COUNTS = (2, 8, 32)
VARIANTS = ("rltune", "rllib", "rltune-1w")
DEFAULT_VARIANTS = "rltune,rllib"
MAPPINGS = ("shared", "groups")
DEFAULT_RLLIB_PYTHON = "/work/rllib-venv/bin/python"
MIN_RATIO = 3.0  # rltune / RLlib, agent steps per second
MAX_COST_RATIO = 2.0  # rltune multi-agent cost per agent step / single-agent cost per step
FULL = {"seconds": 2.0, "repeats": 3, "rounds": 3}  # the budget at which targets are judged


# -- measuring (in a child process) ----------------------------------------------------------
Sampler = Callable[[], tuple[int, int]]  # one sampling call: (agent steps, env steps)


def _time_block(sample_once: Sampler, seconds: float) -> tuple[float, float]:
    """Agent and env steps per second of ``sample_once`` called until ``seconds`` have passed."""
    agent_steps = env_steps = 0
    start = time.perf_counter()
    while True:
        a, e = sample_once()
        agent_steps += a
        env_steps += e
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return agent_steps / elapsed, env_steps / elapsed


def _measure(samplers: dict[str, Sampler], seconds: float, repeats: int) -> dict[str, dict[str, Any]]:
    """Each sampler's agent and env steps/s over ``repeats`` rounds in which the samplers take turns."""
    for sample_once in samplers.values():
        for _ in range(2):  # warm-up: resets, lazy allocations, first forward passes
            sample_once()
    rates: dict[str, list[tuple[float, float]]] = {name: [] for name in samplers}
    for _ in range(repeats):
        for name, sample_once in samplers.items():
            rates[name].append(_time_block(sample_once, seconds))
    return {
        name: {
            "agent_rates": [a for a, _ in pairs],
            "agent_steps_per_s": statistics.median(a for a, _ in pairs),
            "env_steps_per_s": statistics.median(e for _, e in pairs),
        }
        for name, pairs in rates.items()
    }


def run_task(task: dict[str, Any]) -> dict[str, Any]:
    """One run (in a fresh interpreter: rltune's, or RLlib's venv for ``rllib``)."""
    import torch

    torch.set_num_threads(1)  # rltune's torch_num_threads default; the same for RLlib
    if task["variant"] == "rllib":
        return _run_rllib(task)
    return _run_rltune(task)


def _run_rltune(task: dict[str, Any]) -> dict[str, Any]:
    # Remote workers are new interpreters: they must find _ma_env (the env and the mapping functions).
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (HERE, os.environ.get("PYTHONPATH")) if p)
    import rltune

    n, num_envs = task["num_agents"], task["num_envs"]
    trainers = {"multi": _rltune_trainer(task, n, num_envs)}
    if task["variant"] == "rltune":  # the single-agent references, measured in turn with it
        trainers["single"] = _rltune_trainer(task, 0, num_envs)
        trainers["single_4n"] = _rltune_trainer(task, 0, num_envs * n)
    try:
        samplers = {name: _rltune_sampler(trainer) for name, trainer in trainers.items()}
        out = _measure(samplers, task["seconds"], task["repeats"])
    finally:
        for trainer in trainers.values():
            trainer.stop()
    result = {**out.pop("multi"), "library": f"rltune {rltune.__version__}", "torch_threads": _torch_threads()}
    for name, figures in out.items():
        multi = result["agent_rates"]
        result[name] = {**figures, "cost_ratios": [s / m for s, m in zip(figures["agent_rates"], multi)]}
    return result


def _rltune_trainer(task: dict[str, Any], num_agents: int, num_envs: int) -> Any:
    """A PPO trainer on the multi-agent env with ``num_agents`` agents, or on SingleCartPole (``num_agents`` 0)."""
    import _ma_env

    from rltune.trainers import PPO

    config: dict[str, Any] = {
        "env": _ma_env.RltuneMultiCartPoles if num_agents else _ma_env.SingleCartPole,
        "env_config": {"num_agents": num_agents} if num_agents else {},
        "num_workers": 1 if task["variant"] == "rltune-1w" else 0,
        "num_envs_per_worker": num_envs,
        "rollout_fragment_length": task["fragment"],
        "train_batch_size": num_envs * task["fragment"],
        "sgd_minibatch_size": task["fragment"],
        "model": {"fcnet_hiddens": task["hiddens"], "fcnet_activation": "tanh"},
        "seed": 0,
    }
    if num_agents:
        policies, mapping_fn = _ma_env.POLICIES[task["mapping"]]
        config["multiagent"] = {"policies": set(policies), "policy_mapping_fn": mapping_fn}
    return PPO(config=config)


def _rltune_sampler(trainer: Any) -> Sampler:
    """One round of ``trainer.workers.sample``: every env's fragment."""
    workers = trainer.workers
    per_call = workers.steps_per_round()

    def sample_once() -> tuple[int, int]:
        result = workers.sample(per_call)
        return (result.agent_steps or result.env_steps), result.env_steps

    return sample_once


def _run_rllib(task: dict[str, Any]) -> dict[str, Any]:
    import _ma_env
    import ray
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig
    from ray.rllib.env.multi_agent_env_runner import MultiAgentEnvRunner

    policies, mapping_fn = _ma_env.POLICIES[task["mapping"]]
    per_call = task["num_envs"] * task["fragment"]
    config = (
        PPOConfig()
        .environment(_ma_env.RllibMultiCartPoles, env_config={"num_agents": task["num_agents"]})
        .env_runners(num_env_runners=0, num_envs_per_env_runner=task["num_envs"], rollout_fragment_length=task["fragment"])
        .multi_agent(policies=set(policies), policy_mapping_fn=mapping_fn)
        .rl_module(model_config=DefaultModelConfig(fcnet_hiddens=task["hiddens"], fcnet_activation="tanh"))
        .training(train_batch_size_per_learner=per_call)
        .debugging(seed=0)
    )
    if not config.enable_env_runner_and_connector_v2:
        raise RuntimeError(f"ray {ray.__version__}: expected the new API stack (EnvRunner and connectors v2) by default")
    runner = MultiAgentEnvRunner(config=config)

    def sample_once() -> tuple[int, int]:
        episodes = runner.sample()  # one fragment of every env (batch_mode truncate_episodes)
        return sum(e.agent_steps() for e in episodes), sum(e.env_steps() for e in episodes)

    try:
        out = _measure({"multi": sample_once}, task["seconds"], task["repeats"])["multi"]
    finally:
        runner.stop()
    return {**out, "library": f"ray[rllib] {ray.__version__}, new API stack (MultiAgentEnvRunner)", "torch_threads": _torch_threads()}


def _torch_threads() -> int:
    import torch

    return torch.get_num_threads()


# -- the parent ---------------------------------------------------------------------------
def describe(task: dict[str, Any], r: dict[str, Any]) -> str:
    rates = ", ".join(f"{x:,.0f}" for x in r["agent_rates"])
    line = f"median {r['agent_steps_per_s']:,.0f} agent steps/s, {r['env_steps_per_s']:,.0f} env steps/s (runs: {rates})"
    for name, label in (("single", f"single x {NUM_ENVS}"), ("single_4n", f"single x {NUM_ENVS * task['num_agents']}")):
        if name in r:
            ratios = ", ".join(f"{x:.2f}" for x in r[name]["cost_ratios"])
            line += f"; {label} {r[name]['agent_steps_per_s']:,.0f} steps/s, multi / single cost {ratios}"
    return line


def make_tasks(args: Any, variants: list[str], counts: list[int], mappings: list[str], hiddens: list[int]) -> list[dict[str, Any]]:
    """Rounds of every (agent count, mapping) pair of rltune and RLlib runs, the order alternating by round."""
    base = {"seconds": args.seconds, "repeats": args.repeats, "num_envs": NUM_ENVS, "fragment": FRAGMENT, "hiddens": hiddens}
    pair = [v for v in ("rltune", "rllib") if v in variants]
    tasks = []
    for rnd in range(args.rounds):
        order = pair if rnd % 2 == 0 else pair[::-1]
        for n in counts:
            for mapping in mappings:
                for v in order + (["rltune-1w"] if "rltune-1w" in variants else []):
                    tasks.append({**base, "variant": v, "num_agents": n, "mapping": mapping, "round": rnd,
                                  "label": f"round {rnd} {v} N={n} {mapping}"})
    return tasks


def _find(records: list[dict[str, Any]], variant: str, rnd: int, n: int, mapping: str) -> dict[str, Any] | None:
    for r in records:
        if (r["variant"] == variant and r["round"] == rnd and "error" not in r
                and r["num_agents"] == n and r["mapping"] == mapping):
            return r
    return None


def _median(values: list[float | None]) -> float | None:
    got = [v for v in values if v is not None]
    return statistics.median(got) if got else None


def summarize(records: list[dict[str, Any]], counts: list[int], mappings: list[str], rounds: int) -> list[dict[str, Any]]:
    """Per (mapping, N): medians over rounds of each figure; ratios as medians of the per-round ratios."""
    rows = []
    for mapping in mappings:
        for n in counts:
            ours = [_find(records, "rltune", r, n, mapping) for r in range(rounds)]
            theirs = [_find(records, "rllib", r, n, mapping) for r in range(rounds)]
            remote = [_find(records, "rltune-1w", r, n, mapping) for r in range(rounds)]

            def rate(r: dict[str, Any] | None, key: str | None = None) -> float | None:
                if r is None or (key is not None and key not in r):
                    return None
                return (r[key] if key else r)["agent_steps_per_s"]

            def cost(r: dict[str, Any] | None, key: str) -> float | None:
                return statistics.median(r[key]["cost_ratios"]) if r is not None and key in r else None

            vs_rllib = [rate(a) / rate(b) for a, b in zip(ours, theirs) if a and b]
            cost_runs = [c for c in (cost(r, "single") for r in ours) if c is not None]
            cost_4n_runs = [c for c in (cost(r, "single_4n") for r in ours) if c is not None]
            rows.append({
                "mapping": mapping, "num_agents": n,
                "rltune": _median([rate(r) for r in ours]), "rllib": _median([rate(r) for r in theirs]),
                "rltune_1w": _median([rate(r) for r in remote]),
                "single": _median([rate(r, "single") for r in ours]), "single_4n": _median([rate(r, "single_4n") for r in ours]),
                "ratio_runs": vs_rllib, "ratio": _median(vs_rllib),
                "cost_runs": cost_runs, "cost_ratio": _median(cost_runs),
                "cost_4n_runs": cost_4n_runs, "cost_ratio_4n": _median(cost_4n_runs),
            })
    return rows


def _fmt(value: float | None, spec: str = ",.0f") -> str:
    return "-" if value is None else format(value, spec)


def _ratio_cell(value: float | None, runs: list[float], spec: str) -> str:
    if value is None:
        return "-"
    return f"**{value:{spec}}** ({', '.join(format(x, spec) for x in runs)})"


def table_rows(summary: list[dict[str, Any]], with_remote: bool) -> tuple[list[str], list[list[str]]]:
    """The summary table: one row per (policies, agent count)."""
    headers = ["policies", "agents per env", "rltune agent steps/s", "RLlib agent steps/s", "rltune / RLlib (per round)",
               "rltune us per agent step", "single 4 envs steps/s", "multi / single (per round)",
               "single 4N envs steps/s", "multi / single 4N (per round)"]
    if with_remote:
        headers.insert(4, "rltune 1 worker agent steps/s")
    rows = []
    for s in summary:
        row = [
            "1 shared" if s["mapping"] == "shared" else "2 (even/odd agents)",
            str(s["num_agents"]),
            _fmt(s["rltune"]),
            _fmt(s["rllib"]),
            _ratio_cell(s["ratio"], s["ratio_runs"], ".1f"),
            _fmt(1e6 / s["rltune"], ".1f") if s["rltune"] else "-",
            _fmt(s["single"]),
            _ratio_cell(s["cost_ratio"], s["cost_runs"], ".2f"),
            _fmt(s["single_4n"]),
            _ratio_cell(s["cost_ratio_4n"], s["cost_4n_runs"], ".2f"),
        ]
        if with_remote:
            row.insert(4, _fmt(s["rltune_1w"]))
        rows.append(row)
    return headers, rows


def print_verdicts(summary: list[dict[str, Any]], judged: bool) -> None:
    """One line per target and (policies, agent count)."""
    for s in summary:
        head = f"{s['mapping']:>6} N={s['num_agents']:>2}:"
        if s["ratio"] is not None:
            print(f"{head} rltune / RLlib {s['ratio']:.2f}x (target >= {MIN_RATIO:.0f}x): "
                  f"{common.verdict(s['ratio'] >= MIN_RATIO, judged)}")
        for key, what in (("cost_ratio", f"single, {NUM_ENVS} envs"), ("cost_ratio_4n", f"single, {NUM_ENVS} x N envs")):
            if s[key] is not None:
                print(f"{head} cost per agent step, multi / {what}: {s[key]:.2f} (target <= {MAX_COST_RATIO:.0f}): "
                      f"{common.verdict(s[key] <= MAX_COST_RATIO, judged)}")


def parse_args() -> Any:
    parser = common.base_parser(__doc__)
    parser.add_argument("--agents", default=",".join(map(str, AGENT_COUNTS)), help="agent counts per env (default 2,8,32)")
    parser.add_argument("--mappings", default="shared", help=f"comma-separated, from {', '.join(MAPPINGS)} (default shared)")
    parser.add_argument("--variants", default=DEFAULT_VARIANTS, help=f"comma-separated, from {', '.join(VARIANTS)} (default {DEFAULT_VARIANTS})")
    parser.add_argument("--rounds", type=int, default=FULL["rounds"], help="interleaved rounds of every run (default 3)")
    parser.add_argument("--repeats", type=int, default=FULL["repeats"], help="timed measurements per run (default 3)")
    parser.add_argument("--seconds", type=float, default=FULL["seconds"], help="minimum length of one measurement (default 3)")
    parser.add_argument("--hiddens", default="64,64", help="policy/value MLP sizes (default 64,64)")
    parser.add_argument("--rllib-python", default=DEFAULT_RLLIB_PYTHON,
                        help=f"interpreter of a venv with ray[rllib] installed (default {DEFAULT_RLLIB_PYTHON})")
    parser.add_argument("--quick", action="store_true", help="smoke test: --agents 2,32 --rounds 1 --repeats 1 --seconds 0.5")
    args = parser.parse_args()
    if args.quick:
        args.agents, args.rounds, args.repeats, args.seconds = "2,32", 1, 1, 0.5
    return args


def main() -> None:
    args = parse_args()
    variants = common.parse_variants(args.variants, VARIANTS)
    mappings = common.parse_variants(args.mappings, MAPPINGS)
    counts = [int(n) for n in args.agents.split(",")]
    hiddens = [int(h) for h in args.hiddens.split(",")]
    if "rllib" in variants and not os.path.exists(args.rllib_python):
        print(f"RLlib skipped: no interpreter at --rllib-python {args.rllib_python} (make one with: python3 -m venv "
              f"/work/rllib-venv && /work/rllib-venv/bin/pip install torch==2.13.0 && /work/rllib-venv/bin/pip install "
              "'ray[rllib]')\n", flush=True)
        variants.remove("rllib")

    info = common.machine_info()
    common.print_header(
        f"Multi-agent sampling: rltune vs RLlib, {NUM_ENVS} envs x N cart-poles each, rollout_fragment_length {FRAGMENT}",
        info,
        [
            (f"budget: {args.rounds} interleaved rounds; per run the median of {args.repeats} measurements of >= "
             f"{args.seconds:g} s after 2 warm-up calls"),
            f"agents per env: {counts}; policies: {mappings}; model {hiddens} tanh; torch 1 thread in every process",
            f"RLlib interpreter: {args.rllib_python if 'rllib' in variants else '(skipped)'}",
        ],
    )
    tasks = make_tasks(args, variants, counts, mappings, hiddens)
    python_of = lambda task: args.rllib_python if task["variant"] == "rllib" else None
    records = common.run_all(__file__, tasks, describe, verbose=args.verbose, python_of=python_of)

    libraries = sorted({r["library"] for r in records if "library" in r})
    summary = summarize(records, counts, mappings, args.rounds)
    headers, rows = table_rows(summary, "rltune-1w" in variants)
    print()
    print("libraries: " + "; ".join(libraries))
    print(common.text_table(headers, rows, left=2))
    print()
    judged = args.rounds >= FULL["rounds"] and args.repeats >= FULL["repeats"] and args.seconds >= FULL["seconds"]
    if not judged:
        print(f"(short run: noisy; the full run uses --rounds {FULL['rounds']} --repeats {FULL['repeats']} --seconds {FULL['seconds']:g})")
    print_verdicts(summary, judged)

    common.finish(records, info, args.json, {"libraries": libraries, "summary": summary, "args": vars(args)})
    if args.markdown:
        print(common.markdown_block("Multi-agent sampling", headers, rows, info))


if __name__ == "__main__":
    if not common.child_main(run_task):
        main()
        sys.exit(0)
