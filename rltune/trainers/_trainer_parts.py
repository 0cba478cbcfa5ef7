"""The parts of a Trainer its collaborators share: :class:`TrainerParts` and the :class:`TrainingProgress`.

:class:`~rltune.trainers._trainer.Trainer` is composed of collaborators,
each readable and testable on its own: the policy set
(:class:`~rltune.trainers._trainer_policies.TrainerPolicies`), evaluation
(:class:`~rltune.trainers._trainer_evaluation.TrainerEvaluation`) and
checkpoints (:class:`~rltune.trainers.checkpoints._trainer_checkpoints.TrainerCheckpoints`).
They work on a :class:`TrainerParts`, never on the trainer itself.
"""

from __future__ import annotations

import math
import tempfile
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, cast

import numpy as np
import torch

from rltune._disk import writing
from rltune._imports import resolve_callable
from rltune.callbacks._callbacks import DefaultCallbacks, MultiCallbacks, make_callbacks
from rltune.callbacks._curriculum import curriculum_callback, parse_curriculum
from rltune.callbacks._metrics import merge_hist_data, summarize_custom_metrics
from rltune.errors import ConfigError
from rltune.trainers.algorithms._algorithm import StepOutcome
from rltune.trainers.policies._policy_set import PolicySet
from rltune.trainers.policies._policy_spec import multi_agent_problems
from rltune.trainers.rllib._rllib_names import add_result_spellings
from rltune.trainers.sampling._sample_batch import EpisodeMetrics

if TYPE_CHECKING:
    from rltune.env._registry import EnvSpec
    from rltune.trainers._config import TrainerSettings
    from rltune.trainers.algorithms._algorithm import Algorithm
    from rltune.trainers.policies._policy import Policy
    from rltune.trainers.sampling._worker_set import WorkerSet


def mean_or_nan(values: list[float]) -> float:
    """The mean of ``values``, NaN for none."""
    return float(np.mean(values)) if values else math.nan


@dataclass
class TrainingProgress:
    """The trainer's counters, its window of recent episodes and the latest evaluation stats (all checkpointed)."""

    window_size: int = 100
    iteration: int = 0
    timesteps_total: int = 0
    agent_timesteps_total: int = 0
    episodes_total: int = 0
    time_total_s: float = 0.0
    episode_window: deque[EpisodeMetrics] = field(default_factory=deque)
    last_evaluation: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        self.episode_window = deque(self.episode_window, maxlen=self.window_size)

    def record(self, outcome: StepOutcome) -> None:
        """Count one iteration that did ``outcome``."""
        self.iteration += 1
        self.timesteps_total += outcome.env_steps
        self.agent_timesteps_total += outcome.agent_steps or outcome.env_steps
        self.episodes_total += len(outcome.episodes)
        self.episode_window.extend(outcome.episodes)

    def set_window(self, episodes: Iterable[EpisodeMetrics]) -> None:
        """Replace the window of recent episodes (a restored checkpoint's)."""
        self.episode_window.clear()
        self.episode_window.extend(episodes)

    def result(self, outcome: StepOutcome, elapsed: float, num_nonfinite_updates: int) -> dict[str, Any]:
        """The result dict of the iteration just recorded (without the sample source's metrics)."""
        window = list(self.episode_window)
        rewards = [e.episode_reward for e in window]
        lengths = [float(e.episode_length) for e in window]
        policy_rewards = _policy_rewards(window)
        result: dict[str, Any] = {
            **_reward_stats(rewards, lengths),
            "episodes_this_iter": len(outcome.episodes),
            "episodes_total": self.episodes_total,
            "timesteps_this_iter": outcome.env_steps,
            "timesteps_total": self.timesteps_total,
            "num_env_steps_sampled": self.timesteps_total,
            "num_agent_steps_sampled": self.agent_timesteps_total,
            "agent_timesteps_total": self.agent_timesteps_total,
            "training_iteration": self.iteration,
            "time_this_iter_s": elapsed,
            "time_total_s": self.time_total_s,
            "env_steps_per_s": outcome.env_steps / elapsed if elapsed > 0 else math.nan,
            "info": {"learner": outcome.learner_info},
            "num_nonfinite_updates": num_nonfinite_updates,
            # Custom metrics summarise the same window of episodes as episode_reward_mean, so an
            # iteration in which no episode ended keeps the keys (with the last window's values).
            "custom_metrics": summarize_custom_metrics(e.custom_metrics for e in window),
            "hist_stats": {
                "episode_reward": rewards,
                "episode_lengths": [int(x) for x in lengths],
                **merge_hist_data(e.hist_data for e in outcome.episodes),
                **{f"policy_{pid}_reward": r for pid, r in policy_rewards.items()},
            },
            **_policy_reward_stats(policy_rewards),
        }
        return result


def episode_stats(episodes: list[EpisodeMetrics]) -> dict[str, Any]:
    """The ``evaluation`` dict of a result for these episodes (NaN stats when there are none)."""
    rewards = [e.episode_reward for e in episodes]
    policy_rewards = _policy_rewards(episodes)
    return add_result_spellings({
        **_reward_stats(rewards, [float(e.episode_length) for e in episodes]),
        "episodes_this_iter": len(episodes),
        "hist_stats": {"episode_reward": rewards, **{f"policy_{pid}_reward": r for pid, r in policy_rewards.items()}},
        **(_policy_reward_stats(policy_rewards) if policy_rewards else {}),
    })


def _policy_rewards(episodes: Iterable[EpisodeMetrics]) -> dict[str, list[float]]:
    policy_rewards: dict[str, list[float]] = {}  # multi-agent: one entry per agent and episode
    for episode in episodes:
        for _, pid, reward in episode.agent_rewards:
            policy_rewards.setdefault(pid, []).append(reward)
    return policy_rewards


def _reward_stats(rewards: list[float], lengths: list[float]) -> dict[str, float]:
    return {
        "episode_reward_mean": mean_or_nan(rewards),
        "episode_reward_min": float(np.min(rewards)) if rewards else math.nan,
        "episode_reward_max": float(np.max(rewards)) if rewards else math.nan,
        "episode_len_mean": mean_or_nan(lengths),
    }


def _policy_reward_stats(policy_rewards: dict[str, list[float]]) -> dict[str, dict[str, float]]:
    return {
        "policy_reward_mean": {pid: mean_or_nan(r) for pid, r in policy_rewards.items()},
        "policy_reward_min": {pid: float(np.min(r)) for pid, r in policy_rewards.items()},
        "policy_reward_max": {pid: float(np.max(r)) for pid, r in policy_rewards.items()},
    }


def progress_attribute(name: str, doc: str) -> property:
    """A trainer attribute kept in its :class:`TrainingProgress` (``trainer.iteration`` is ``trainer.progress.iteration``)."""
    return property(
        lambda self: getattr(self.progress, name), lambda self, value: setattr(self.progress, name, value), doc=doc
    )


@dataclass
class TrainerParts:
    """What a trainer's collaborators share: its name, config, env, workers, algorithm, callbacks, RNG and progress."""

    name: str
    cfg: TrainerSettings
    config: dict[str, Any]
    env_spec: EnvSpec
    policy_class: type[Policy]
    workers: WorkerSet
    algorithm: Algorithm
    callbacks: DefaultCallbacks
    rng: np.random.Generator
    progress: TrainingProgress

    @property
    def policy_set(self) -> PolicySet:
        """The policy set the algorithm owns (the trainer's local rollout worker acts with it)."""
        return cast(PolicySet, self.algorithm.policy_set)  # a trainer's algorithm is always given its set

    def sync_weights(self, global_vars: dict[str, Any] | None = None) -> None:
        """The learner policies' weights reach the rollout workers and the sample source (a user's, if any)."""
        self.workers.sync_weights(global_vars)
        if self.algorithm.source is not self.workers:
            self.algorithm.source.sync_weights(global_vars)


def trainer_config_problems(
    cfg: TrainerSettings, config_class: type[TrainerSettings], policy_class: type[Policy]
) -> list[str]:
    """The cross-field problems of a trainer's typed config (``Trainer.check_config``'s default)."""
    problems = []
    problems.extend(multi_agent_problems(cfg, policy_class))
    if cfg.curriculum is not None:
        try:
            parse_curriculum(cfg.curriculum)
        except ConfigError as exc:
            problems.extend(exc.problems)
    if cfg.env_task_fn is not None:
        try:
            resolve_callable(cfg.env_task_fn, "env_task_fn")
        except ConfigError as exc:
            problems.extend(exc.problems)
    try:
        make_callbacks(cfg.callbacks)
    except ConfigError as exc:
        problems.extend(exc.problems)
    if cfg.evaluation_config:
        extra = set(cfg.evaluation_config) - set(config_class.model_fields) - {"lambda"}
        if extra:
            problems.append(f"evaluation_config: unknown keys {sorted(extra)}")
        eval_filter = cfg.evaluation_config.get("observation_filter", cfg.observation_filter)
        if (eval_filter == "NoFilter") != (cfg.observation_filter == "NoFilter"):
            problems.append(
                f"evaluation_config.observation_filter: {eval_filter!r} differs from observation_filter "
                f"{cfg.observation_filter!r}; evaluation applies the training filter (frozen), so leave it out"
            )
    return problems


def most_common(tasks: list[Any]) -> Any:
    """The task most envs have (None for no task); tasks need not be hashable."""
    if not tasks:
        return None
    counts: list[tuple[int, Any]] = []
    for task in tasks:
        for i, (count, seen) in enumerate(counts):
            if seen == task:
                counts[i] = (count + 1, seen)
                break
        else:
            counts.append((1, task))
    return max(counts, key=lambda c: c[0])[1]


def trainer_callbacks(cfg: TrainerSettings) -> DefaultCallbacks:
    """The trainer's callbacks: the config's, with the curriculum's added when it has one."""
    callbacks = make_callbacks(cfg.callbacks)
    if cfg.curriculum is None:
        return callbacks
    curriculum = curriculum_callback(cfg.curriculum)
    if type(callbacks) is DefaultCallbacks:
        return curriculum
    inner = callbacks.callbacks if isinstance(callbacks, MultiCallbacks) else [callbacks]
    return MultiCallbacks([*inner, curriculum])


def select_device(num_gpus: float) -> torch.device:
    """The torch device of the learners (``num_gpus > 0``: CUDA, checked to be there)."""
    if num_gpus > 0:
        if not torch.cuda.is_available():
            raise ConfigError(
                f"num_gpus: {num_gpus} asks for a GPU, but torch.cuda.is_available() is False here "
                "(no CUDA device or a CPU build of torch); set num_gpus: 0"
            )
        return torch.device("cuda")
    return torch.device("cpu")


def add_task_to_result(result: dict[str, Any], env_tasks: dict[tuple[int, int], Any]) -> None:
    """Put the envs' task (one, or the list of all when they differ) in ``result`` unless a callback did."""
    if "curriculum_task" in result or not env_tasks:
        return
    tasks = list(env_tasks.values())
    result["curriculum_task"] = tasks[0] if all(t == tasks[0] for t in tasks) else tasks


def new_logdir(results_root: Path, trainer_name: str, env_name: str) -> Path:
    """A new results directory of a trainer under ``results_root``: ``<trainer>_<env>_<time>_<random>``."""
    stamp = datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
    env = env_name.replace("/", "_").replace(":", "_")
    with writing(results_root, "the trainer's results directory"):
        results_root.mkdir(parents=True, exist_ok=True)
        # mkdtemp creates the directory exclusively: two trainers never share one.
        return Path(tempfile.mkdtemp(prefix=f"{trainer_name}_{env}_{stamp}_", dir=results_root))
