"""``rltune rollout``: evaluate a checkpoint with deterministic episodes (a subcommand of :mod:`rltune.orchestrator.cli`)."""

from __future__ import annotations

import argparse
from typing import Any

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
            "policy_reward_mean/<id> per policy. A checkpoint is data: of its saved "
            "config it uses only an env that is a gymnasium id, a register_env name or an import string of a "
            "gymnasium.Env subclass, and callbacks that are DefaultCallbacks subclasses; give anything else "
            "with --env / --config (a multi-agent checkpoint's policy_mapping_fn: --config "
            "'{\"multiagent\": {\"policy_mapping_fn\": \"pkg.module:fn\"}}')."
        ),
    )
    p.add_argument("checkpoint", metavar="CHECKPOINT", help="checkpoint directory or trial directory")
    p.add_argument("--episodes", type=int, metavar="N", help="number of episodes (default 10)")
    p.add_argument("--steps", type=int, metavar="N", help="run episodes until at least N env steps")
    p.add_argument("--env", help="env to use instead of the checkpoint's (e.g. 'pkg.module:EnvClass' or a creator function)")
    p.add_argument(
        "--config", metavar="JSON",
        help="config overrides as a JSON object (e.g. env_config, or callbacks and env_task_fn, which a checkpoint may not name)",
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
    try:
        trainer = Trainer.from_checkpoint(path, overrides)
    except ConfigError as exc:
        hint = " (rollout builds the env and trainer from the checkpoint's saved config; --env and --config override it)"
        raise ConfigError([*exc.problems[:-1], exc.problems[-1] + hint], where=f"{exc.where} of checkpoint {path!r}") from None
    try:
        rewards, lengths, by_policy = _run_episodes(trainer, episodes, args.steps)
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
    return 0


def _find_checkpoint(path: str) -> str:
    """``path`` itself, or the latest ``checkpoint_*`` inside a trial directory."""
    from pathlib import Path

    from rltune._atomic_dir import recover_leftovers
    from rltune.trainers._checkpoint import METADATA_FILE

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
