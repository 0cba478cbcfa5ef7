"""``rltune rollout``: evaluate a checkpoint with deterministic episodes (a subcommand of :mod:`rltune.orchestrator.cli`).

With ``--out FILE`` (RLlib's flag) every step of the episodes is written to
FILE as JSON lines, one object per step: ``episode``, ``t``, ``obs``,
``action``, ``reward``, ``next_obs``, ``terminated``, ``truncated`` (and
``info`` with ``--save-info``); arrays are lists. RLlib wrote a pickle (the
same fields as ``[obs, action, next_obs, reward, done]`` lists per episode);
JSON lines are read by any tool and run no code when loaded.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any, TextIO

from rltune._imports import env_trust_list, trust_list
from rltune.errors import ConfigError


def add_rollout_parser(commands: Any, log_levels: tuple[str, ...]) -> None:
    """The ``rollout`` subcommand's flags, its handler :func:`_rollout`."""
    p = commands.add_parser(
        "rollout",
        help="evaluate a checkpoint: mean return of deterministic episodes (and per policy, multi-agent)",
        description=(
            "Restore a checkpoint (a checkpoint_NNNNNN directory, or a trial directory: its latest "
            "checkpoint) and run deterministic episodes (no exploration); print their mean return. "
            "--episodes N runs N episodes (default 10); --steps N runs whole episodes until at least "
            "N env steps are done (with both, whichever comes first). A multi-agent checkpoint also prints "
            "policy_reward_mean/<id> per policy. A checkpoint is data, and opening it imports nothing it names "
            "by itself: of its saved config it uses an env that is a gymnasium id, a register_env name or an "
            "import string of a gymnasium.Env subclass, callbacks that are DefaultCallbacks subclasses and policy "
            "classes, each from a module of rltune, one already imported, one you name with --env / --config, or "
            "one you trust with --trust; and functions (env_task_fn, policy_mapping_fn) only from a module you "
            "trust. Give anything else with --env / --config (a multi-agent checkpoint's policy_mapping_fn: "
            "--config '{\"multiagent\": {\"policy_mapping_fn\": \"pkg.module:fn\"}}'). With "
            "RLTUNE_CHECKPOINT_KEY set, only checkpoints signed with that key are opened. --out FILE writes the "
            "episodes' steps as JSON lines, one object per step (episode, t, obs, action, reward, next_obs, "
            "terminated, truncated; info with --save-info)."
        ),
    )
    p.add_argument("checkpoint", metavar="CHECKPOINT", help="checkpoint directory or trial directory")
    p.add_argument("--episodes", type=int, metavar="N", help="number of episodes (default 10)")
    p.add_argument("--steps", type=int, metavar="N", help="run episodes until at least N env steps")
    p.add_argument("--run", metavar="ALGO", help="the checkpoint's algorithm (RLlib's flag): a checkpoint of another is an error")
    p.add_argument("--env", help="env to use instead of the checkpoint's (e.g. 'pkg.module:EnvClass' or a creator function)")
    p.add_argument("--out", metavar="FILE", help="write every step of the episodes to FILE as JSON lines (see below)")
    p.add_argument("--save-info", action="store_true", help="with --out: write each step's info dict too")
    p.add_argument("--no-render", action="store_true", help="accepted for RLlib's command lines: rltune never renders")
    p.add_argument(
        "--config", metavar="JSON",
        help="config overrides as a JSON object (e.g. env_config, or callbacks and env_task_fn, which a checkpoint may not name)",
    )
    p.add_argument(
        "--trust", metavar="MODULE", action="append", default=[],
        help="a module or package (with its submodules) whose classes and functions the checkpoint may name, e.g. "
             "your env's package; repeatable (also $RLTUNE_TRUST, comma-separated). A module is imported from "
             "Python's path, never from the current or the checkpoint's directory",
    )
    p.add_argument("--log-level", type=str.upper, choices=log_levels, help="log level (default WARN)")
    p.set_defaults(handler=_rollout)


def _rollout(args: argparse.Namespace) -> int:
    from rltune.orchestrator.cli import _json_object, _setup_logging
    from rltune.trainers import Trainer

    for flag in ("episodes", "steps"):
        value = getattr(args, flag)
        if value is not None and value < 1:
            raise ConfigError(f"must be >= 1, but got {value}", where=f"--{flag}")
    episodes = args.episodes if args.episodes is not None else (None if args.steps else 10)
    overrides = {**(_json_object(args.config, "--config") or {}), "num_workers": 0, "num_envs_per_worker": 1}
    if args.env is not None:
        overrides["env"] = args.env
    if args.log_level:
        overrides["log_level"] = args.log_level
    _setup_logging(overrides.get("log_level", "WARN"))
    path = _find_checkpoint(args.checkpoint)
    if args.run is not None:
        _check_run(args.run, path)
    out = _out_path(args.out, args.save_info)
    trust = trust_list(args.trust, "--trust")
    env_trust_list()  # a malformed $RLTUNE_TRUST is named as such, before the checkpoint is opened
    try:
        trainer = Trainer.from_checkpoint(path, overrides, trust=trust)
    except ConfigError as exc:
        hint = " (rollout builds the env and trainer from the checkpoint's saved config; --env and --config override it)"
        raise ConfigError([*exc.problems[:-1], exc.problems[-1] + hint], where=f"{exc.where} of checkpoint {path!r}") from None
    try:
        if out is None:
            rewards, lengths, by_policy = _run_episodes(trainer, episodes, args.steps)
        else:
            rewards, lengths = _write_episodes(trainer, episodes, args.steps, out, args.save_info)
            by_policy = {}
    finally:
        trainer.stop()
    mean = sum(rewards) / len(rewards)
    print(f"{trainer.name} checkpoint {path} (iteration {trainer.iteration}, {trainer.timesteps_total:,} timesteps)")
    print(
        f"episode_reward_mean: {mean:.3f} over {len(rewards)} deterministic episodes "
        f"(min {min(rewards):.3f}, max {max(rewards):.3f}, mean length {sum(lengths) / len(lengths):.1f}, "
        f"{sum(lengths):,.0f} steps)",
        flush=True,
    )
    for pid, returns in sorted(by_policy.items()):  # multi-agent: one line per policy that acted
        print(f"policy_reward_mean/{pid}: {sum(returns) / len(returns):.3f} over {len(returns)} agent episodes "
              f"(min {min(returns):.3f}, max {max(returns):.3f})", flush=True)
    if out is not None:
        print(f"steps written to {out} (JSON lines, one per step)", flush=True)
    return 0


def _check_run(run: str, path: str) -> None:
    """RLlib's ``--run``: the checkpoint must be of that algorithm."""
    from rltune.trainers import get_trainer_class
    from rltune.trainers.checkpoints._checkpoint import read_metadata

    try:
        wanted = get_trainer_class(run).name
    except ConfigError as exc:
        raise ConfigError(exc.problems, where="--run") from None
    saved = read_metadata(path).get("algorithm")
    if saved != wanted:
        raise ConfigError(f"is {run!r}, but {path!r} is a checkpoint of {saved!r}; give --run {saved} (or leave "
                          "--run out: the checkpoint names its algorithm)", where="--run")


def _out_path(out: str | None, save_info: bool) -> Path | None:
    """``--out FILE``, checked before any compute: its directory exists and FILE is not a directory."""
    if out is None:
        if save_info:
            raise ConfigError("writes the steps' info dicts into the --out file: give --out FILE too", where="--save-info")
        return None
    path = Path(os.path.expanduser(out))
    if "\x00" in out or not out.strip():
        raise ConfigError(f"must be a file path, but got {out!r}", where="--out")
    if path.is_dir():
        raise ConfigError(f"{out!r} is a directory; give a file name, e.g. {str(path / 'rollouts.jsonl')!r}", where="--out")
    if not path.parent.is_dir():
        raise ConfigError(f"the directory of {out!r} does not exist", where="--out")
    return path


def _write_episodes(trainer: Any, episodes: int | None, steps: int | None, out: Path,
                    save_info: bool) -> tuple[list[float], list[float]]:
    """Run deterministic episodes in a fresh evaluation env, writing each step to ``out``; returns and lengths."""
    from rltune.env._build import build_env
    from rltune.env._context import EnvContext

    cfg = trainer.cfg
    if trainer.algorithm.policy_set.multi_agent:
        raise ConfigError("writes single-agent episodes; multi-agent envs are not supported yet (rollout without "
                          "--out evaluates them)", where="--out")
    env_config = cfg.evaluation_config.get("env_config", cfg.env_config)
    ctx = EnvContext(env_config, worker_index=cfg.num_workers + 1, num_workers=cfg.num_workers)
    env = build_env(trainer.env_spec, ctx, check=False)
    rewards: list[float] = []
    lengths: list[float] = []
    try:
        with open(out, "w", encoding="utf-8") as f:
            while (episodes is None or len(rewards) < episodes) and (steps is None or sum(lengths) < steps):
                seed = None if cfg.seed is None or rewards else cfg.seed
                reward, length = _write_episode(trainer, env, len(rewards), seed, f, save_info)
                rewards.append(reward)
                lengths.append(length)
    except OSError as exc:
        raise ConfigError(f"cannot write {str(out)!r}: {exc.strerror or exc}", where="--out") from None
    finally:
        env.close()
    return rewards, lengths


def _write_episode(trainer: Any, env: Any, number: int, seed: int | None, f: TextIO, save_info: bool) -> tuple[float, int]:
    from rltune._json import json_safe

    obs, info = env.reset(seed=seed)
    total, t, done = 0.0, 0, False
    while not done:
        action = trainer.compute_single_action(obs, explore=False)
        next_obs, reward, terminated, truncated, info = env.step(action)
        step = {"episode": number, "t": t, "obs": obs, "action": action, "reward": reward, "next_obs": next_obs,
                "terminated": terminated, "truncated": truncated}
        if save_info:
            step["info"] = info
        f.write(json.dumps(json_safe(step)) + "\n")
        total += float(reward)
        t += 1
        obs, done = next_obs, terminated or truncated
    return total, t


def _find_checkpoint(path: str) -> str:
    """``path`` itself, or the latest ``checkpoint_*`` inside a trial directory."""
    from pathlib import Path

    from rltune._atomic_dir import recover_leftovers
    from rltune.trainers.checkpoints._checkpoint import METADATA_FILE

    directory = Path(path)
    if directory.is_dir() and not (directory / METADATA_FILE).exists():
        recover_leftovers(directory)  # a checkpoint a crash left under a temporary name counts too
        found = sorted(p for p in directory.glob("checkpoint_*") if (p / METADATA_FILE).exists())
        if found:
            return str(found[-1])
    return path


def _run_episodes(trainer: Any, episodes: int | None,
                  steps: int | None) -> tuple[list[float], list[float], dict[str, list[float]]]:
    """Returns and lengths of deterministic episodes: ``episodes`` of them, or until ``steps`` env steps.

    The third value holds, by policy id, the return of each agent episode of
    the policy (multi-agent; empty for a single-agent trainer).
    """
    if steps is None:
        evaluation = trainer.evaluate(episodes)["evaluation"]
        rewards = list(evaluation["hist_stats"]["episode_reward"])
        return rewards, [evaluation["episode_len_mean"]] * len(rewards), _policy_returns(evaluation, {})
    rewards, lengths, by_policy = [], [], {}
    while sum(lengths) < steps and (episodes is None or len(rewards) < episodes):
        evaluation = trainer.evaluate(1)["evaluation"]
        rewards.append(evaluation["episode_reward_mean"])
        lengths.append(evaluation["episode_len_mean"])
        _policy_returns(evaluation, by_policy)
    return rewards, lengths, by_policy


def _policy_returns(evaluation: dict[str, Any], into: dict[str, list[float]]) -> dict[str, list[float]]:
    """Add the per-policy agent returns of an evaluation (``hist_stats.policy_<id>_reward``) to ``into``."""
    for pid in evaluation.get("policy_reward_mean", {}):
        into.setdefault(pid, []).extend(evaluation["hist_stats"].get(f"policy_{pid}_reward", []))
    return into
