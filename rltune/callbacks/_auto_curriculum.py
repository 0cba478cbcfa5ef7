"""Automatic curricula: every env draws its next task at each reset from a distribution the driver learns.

``curriculum: {type: learning_progress | plr, ...}`` over a finite task list:
the block's ``tasks`` (or ``task_range``), else the env's ``task_space`` (a
:class:`~rltune.env.TaskSettableEnv` attribute: a list of tasks, a
``Discrete`` or ``MultiDiscrete`` space, or a 1-D ``Box`` with ``bins``).

Two parts, one per process role, and no message per step:

- :class:`TaskPicker` (in every rollout worker's callbacks): when an episode
  ends, records its task index and return in the episode's ``hist_data``
  (PLR: once per fragment, the per-task sums of its GAE-advantage scores,
  computed from the fragment's ``vf_preds``) and gives the env its next task,
  drawn from the last distribution shipped to it. These lists travel with
  the episode metrics the worker returns anyway.
- :class:`AutoCurriculumCallback` (the trainer's): once per iteration, merges
  the lists of every worker's episodes (``result["hist_stats"]``), updates the
  sampler (``_task_samplers.py``), ships the new distribution to every
  worker with one ``foreach_worker`` call, and adds
  ``result["curriculum"]`` (``task_probs``, ``task_score``,
  ``task_episodes``, ``task_return``, by task) for MLflow. Its ``get_state``/``set_state``
  (sampler statistics, task list, distribution) go into checkpoints.
"""

from __future__ import annotations

import bisect
import itertools
import json
import logging
from functools import partial
from typing import Any, Literal, Optional

import gymnasium as gym
import numpy as np
from pydantic import Field, model_validator

from rltune.callbacks._callbacks import DefaultCallbacks, MultiCallbacks
from rltune.callbacks._curriculum import StrictBlock
from rltune.callbacks._task_samplers import (
    HIST_KEYS, HIST_RETURN, HIST_SCORE, HIST_SCORE_ROWS, HIST_SCORE_TASK, HIST_TASK, LearningProgressSampler,
    PrioritizedLevelReplay, TaskSampler, TaskStats,
)
from rltune.env._task import task_env
from rltune.errors import ConfigError

logger = logging.getLogger(__name__)

MAX_TASKS = 10_000


class TaskRange(StrictBlock):
    """Tasks ``low, low + step, ... <= high`` (ints when all three are ints)."""

    low: float = Field(..., description="The first task.")
    high: float = Field(..., description="The last task (included when on the grid).")
    step: float = Field(1, gt=0, description="Spacing of the tasks.")

    @model_validator(mode="after")
    def _size(self) -> "TaskRange":
        if self.high < self.low:
            raise ValueError(f"high ({self.high:g}) must be >= low ({self.low:g})")
        if (self.high - self.low) / self.step + 1 > MAX_TASKS:
            raise ValueError(f"makes more than {MAX_TASKS:,} tasks; use a larger step")
        return self

    def tasks(self) -> list[Any]:
        """The tasks of the range."""
        n = int(np.floor((self.high - self.low) / self.step + 1e-9)) + 1
        values = [self.low + k * self.step for k in range(n)]
        if all(float(v).is_integer() for v in (self.low, self.high, self.step)):
            return [int(round(v)) for v in values]
        return [round(v, 12) for v in values]


class _AutoConfig(StrictBlock):
    tasks: Optional[list[Any]] = Field(None, min_length=1, description="The task list (default: the env's task_space).")
    task_range: Optional[TaskRange] = Field(None, description="Or a range of numeric tasks {low, high, step}.")
    bins: Optional[int] = Field(None, ge=2, le=MAX_TASKS, description="Tasks of a 1-D Box task_space: this many, evenly spaced.")

    @model_validator(mode="after")
    def _one_task_list(self) -> "_AutoConfig":
        if self.tasks is not None and self.task_range is not None:
            raise ValueError("give tasks or task_range, not both")
        return self

    def declared_tasks(self) -> list[Any] | None:
        """The block's own task list, or None (the env's task_space decides)."""
        return self.task_range.tasks() if self.task_range is not None else self.tasks


class LearningProgressConfig(_AutoConfig):
    """``curriculum: {type: learning_progress}``: tasks whose return changes fastest are drawn most."""

    type: Literal["learning_progress"] = "learning_progress"
    fast_alpha: float = Field(0.5, gt=0, le=1, description="Step size of the fast moving average of each task's return.")
    slow_alpha: float = Field(0.1, gt=0, le=1, description="Step size of the slow one (<= fast_alpha).")
    epsilon: float = Field(0.1, ge=0, le=1, description="Share of uniform sampling mixed in.")

    @model_validator(mode="after")
    def _slower(self) -> "LearningProgressConfig":
        if self.slow_alpha > self.fast_alpha:
            raise ValueError(f"slow_alpha ({self.slow_alpha:g}) must be <= fast_alpha ({self.fast_alpha:g})")
        return self

    def sampler(self, num_tasks: int) -> TaskSampler:
        """A sampler with these options."""
        return LearningProgressSampler(num_tasks, fast_alpha=self.fast_alpha, slow_alpha=self.slow_alpha,
                                       epsilon=self.epsilon)


class PLRConfig(_AutoConfig):
    """``curriculum: {type: plr}``: Prioritized Level Replay over the tasks."""

    type: Literal["plr"] = "plr"
    score: Literal["positive_value_loss", "value_l1"] = Field(
        "positive_value_loss", description="Per-step score: mean max(GAE advantage, 0), or mean |GAE advantage|.")
    temperature: float = Field(0.3, gt=0, description="Rank prioritization's temperature (beta).")
    staleness_coef: float = Field(0.1, ge=0, le=1, description="Share of the staleness distribution mixed in.")

    def sampler(self, num_tasks: int) -> TaskSampler:
        """A sampler with these options."""
        return PrioritizedLevelReplay(num_tasks, temperature=self.temperature, staleness_coef=self.staleness_coef)


AUTO_CONFIGS: dict[str, type[_AutoConfig]] = {"learning_progress": LearningProgressConfig, "plr": PLRConfig}


def is_automatic(block: Any) -> bool:
    """Whether a ``curriculum:`` block (dict or parsed) is an automatic curriculum."""
    kind = block.get("type") if isinstance(block, dict) else getattr(block, "type", None)
    return kind in AUTO_CONFIGS


def tasks_of_space(space: Any, bins: int | None = None, where: str = "task_space") -> list[Any]:
    """The finite task list of an env's ``task_space``."""
    if isinstance(space, (list, tuple)) and space:
        tasks = list(space)
    elif isinstance(space, gym.spaces.Discrete):
        tasks = [int(space.start) + i for i in range(int(space.n))]
    elif isinstance(space, gym.spaces.MultiDiscrete) and np.prod(space.nvec) <= MAX_TASKS:
        tasks = [list(map(int, t)) for t in itertools.product(*(range(int(n)) for n in space.nvec.ravel()))]
    elif isinstance(space, gym.spaces.Box) and space.shape in ((), (1,)) and np.all(np.isfinite(space.low)):
        if bins is None:
            raise ConfigError(f"{where}: a Box task space needs curriculum.bins (how many tasks to draw from it)")
        low, high = float(np.ravel(space.low)[0]), float(np.ravel(space.high)[0])
        tasks = [float(v) for v in np.linspace(low, high, bins)]
    else:
        raise ConfigError(f"{where}: must be a non-empty list of tasks, a Discrete or MultiDiscrete space (at most "
                          f"{MAX_TASKS:,} tasks) or a bounded 1-D Box, but got {space!r:.100}")
    if len(tasks) > MAX_TASKS:
        raise ConfigError(f"{where}: {len(tasks):,} tasks are more than {MAX_TASKS:,}")
    return tasks


def task_label(task: Any) -> str:
    """A task's name in results and MLflow (``4``, ``easy``, ``[1, 2]``)."""
    return task if isinstance(task, str) else json.dumps(task)


def _env_task_space(env: Any) -> Any:
    target = task_env(env)
    if target is None:
        return None
    for candidate in (target, getattr(target, "unwrapped", None), env):
        space = getattr(candidate, "task_space", None)
        if space is not None:
            return space
    return None


# -- the worker side ---------------------------------------------------------------------------
class TaskPicker(DefaultCallbacks):
    """In every rollout worker: records each episode's task and return, and draws each env's next task.

    Idle until the trainer ships it a distribution (:meth:`set_distribution`),
    so evaluation workers (which never get one) keep the task they are given.
    """

    def __init__(self, score: str | None = None, seed: int | None = None) -> None:
        self.score = score  # PLR's per-step score, None for samplers that only read returns
        self.seed = seed
        self.tasks: list[Any] = []
        self.index: dict[str, int] = {}
        self.cdf: list[float] = []
        self.rng: np.random.Generator | None = None
        self.segments: dict[int, list[int]] = {}  # PLR: per env, the task index of each episode in this fragment
        self.pending = (np.zeros(0), np.zeros(0))  # PLR: score sums and rows not yet sent (no episode ended)
        self.gamma, self.lam = 0.99, 1.0

    @property
    def active(self) -> bool:
        """Whether the trainer shipped a distribution."""
        return bool(self.cdf)

    def set_distribution(self, tasks: list[Any], probs: list[float], worker: Any) -> None:
        """Take the trainer's task list and distribution (the envs' first tasks are the trainer's draws)."""
        first = not self.active
        if tasks != self.tasks:
            self.tasks = list(tasks)
            self.index = {json.dumps(t, sort_keys=True): i for i, t in enumerate(tasks)}
            self.pending = (np.zeros(len(tasks)), np.zeros(len(tasks)))
        self.cdf = np.cumsum(probs).tolist()
        if first:
            seed = None if self.seed is None else [self.seed, worker.worker_index]
            self.rng = np.random.default_rng(seed)
            self.gamma, self.lam = float(worker.config.gamma), float(worker.config.get("lambda", 1.0))

    def draw(self) -> Any:
        """A task from the distribution."""
        i = bisect.bisect_right(self.cdf, float(self.rng.random()) * self.cdf[-1])
        return self.tasks[min(i, len(self.tasks) - 1)]

    def task_index(self, env: Any) -> int | None:
        """The index of the env's current task (None: not a task of the list)."""
        target = task_env(env)
        return None if target is None else self.index.get(json.dumps(target.get_task(), sort_keys=True))

    def on_episode_start(self, *, episode: Any, env: Any, env_index: int, **kwargs: Any) -> None:
        if self.active:
            index = self.task_index(env)
            episode.user_data["curriculum_task_index"] = index
            if self.score:
                self.segments.setdefault(env_index, []).append(-1 if index is None else index)

    def on_episode_end(self, *, episode: Any, env: Any, env_index: int, **kwargs: Any) -> None:
        if not self.active:
            return
        index = episode.user_data.get("curriculum_task_index")
        if index is not None:
            episode.hist_data[HIST_TASK] = [float(index)]
            episode.hist_data[HIST_RETURN] = [float(episode.total_reward)]
        target = task_env(env)
        if target is not None:
            target.set_task(self.draw())  # takes effect at the reset that follows

    def on_sample_end(self, *, samples: Any, **kwargs: Any) -> None:
        if not (self.active and self.score):
            return
        sums, rows = self.pending
        for fragment in samples.fragments:
            if fragment.agents is None and "vf_preds" in fragment.columns:
                add_fragment_scores(fragment, self.segments, self.score, self.gamma, self.lam, sums, rows)
        self.segments = {i: tasks[-1:] for i, tasks in self.segments.items()}
        if samples.episodes and rows.any():
            tasks = np.flatnonzero(rows)
            hist = samples.episodes[0].hist_data
            hist[HIST_SCORE_TASK] = tasks.astype(float).tolist()
            hist[HIST_SCORE] = sums[tasks].tolist()
            hist[HIST_SCORE_ROWS] = rows[tasks].tolist()
            sums[:] = 0.0
            rows[:] = 0.0


def add_fragment_scores(fragment: Any, segments: dict[int, list[int]], score: str, gamma: float, lam: float,
                        sums: np.ndarray, rows: np.ndarray) -> None:
    """Add the fragment's per-step PLR scores to ``sums`` and ``rows`` by task index.

    GAE over the fragment's ``[T, K]`` columns with the acting policy's
    ``vf_preds`` (a fragment's last step and a truncated one bootstrap from
    their own value: the next one is not in the fragment). Column ``k``'s
    episodes ran the tasks ``segments[k]`` in order; a column whose count of
    episodes does not match (an env rebuilt, an episode dropped) is skipped.
    """
    columns = fragment.columns
    rewards = np.asarray(columns["rewards"], dtype=np.float64)
    values = np.asarray(columns["vf_preds"], dtype=np.float64).reshape(rewards.shape)
    terminated = np.asarray(columns["terminateds"], dtype=bool)
    done = terminated | np.asarray(columns["truncateds"], dtype=bool)
    next_values = np.concatenate([values[1:], values[-1:]])
    next_values = np.where(done, values, next_values)
    deltas = rewards + gamma * np.where(terminated, 0.0, next_values) - values
    advantages = np.empty_like(deltas)
    running = np.zeros(deltas.shape[1])
    for t in range(deltas.shape[0] - 1, -1, -1):
        running = deltas[t] + gamma * lam * np.where(done[t], 0.0, running)
        advantages[t] = running
    step_scores = np.maximum(advantages, 0.0) if score == "positive_value_loss" else np.abs(advantages)
    keep = np.ones(done.shape, dtype=bool) if fragment.keep is None else np.asarray(fragment.keep, dtype=bool)
    episode_of_row = np.cumsum(done, axis=0) - done  # the row's episode within its column
    for k in range(done.shape[1]):
        tasks = np.asarray(segments.get(k, []))
        if len(tasks) != int(done[:, k].sum()) + 1:
            continue
        row_tasks = tasks[episode_of_row[:, k]]
        ok = keep[:, k] & (row_tasks >= 0) & (row_tasks < len(sums))
        sums += np.bincount(row_tasks[ok], weights=step_scores[ok, k], minlength=len(sums))
        rows += np.bincount(row_tasks[ok], minlength=len(rows))


def worker_callbacks(config: Any, callbacks: DefaultCallbacks) -> DefaultCallbacks:
    """A rollout worker's callbacks: ``callbacks``, plus a :class:`TaskPicker` under an automatic curriculum."""
    block = getattr(config, "curriculum", None)
    if block is None or not is_automatic(block):
        return callbacks
    picker = TaskPicker(block.get("score", "positive_value_loss") if block.get("type") == "plr" else None, config.seed)
    if type(callbacks) is DefaultCallbacks:
        return picker
    inner = callbacks.callbacks if isinstance(callbacks, MultiCallbacks) else [callbacks]
    return MultiCallbacks([*inner, picker])


def find_picker(callbacks: Any) -> TaskPicker | None:
    """The :class:`TaskPicker` among a worker's callbacks, or None."""
    if isinstance(callbacks, TaskPicker):
        return callbacks
    for inner in getattr(callbacks, "callbacks", ()):
        if isinstance(inner, TaskPicker):
            return inner
    return None


def _ship(tasks: list[Any], probs: list[float], worker: Any) -> None:
    picker = find_picker(worker.callbacks)
    if picker is not None:
        picker.set_distribution(tasks, probs, worker)


# -- the trainer side --------------------------------------------------------------------------
class AutoCurriculumCallback(DefaultCallbacks):
    """The trainer's half of an automatic curriculum (``curriculum: {type: learning_progress | plr}``).

    After each iteration: the task statistics of every worker's episodes
    (from ``result["hist_stats"]``, then removed from it) update the sampler,
    whose new distribution every worker gets at once; ``result["curriculum"]``
    holds ``task_probs``, ``task_score``, ``task_episodes`` and ``task_return``
    (the mean return of the last iteration the task was played in) by task, and
    ``curriculum_task`` is the most likely task. :meth:`get_state` /
    :meth:`set_state` carry the task list, the sampler's statistics and the
    distribution through checkpoints (resume, retry, PBT's exploit).
    """

    def __init__(self, curriculum: Any) -> None:
        from rltune.callbacks._curriculum import parse_curriculum

        self.curriculum = parse_curriculum(curriculum)
        if not is_automatic(self.curriculum):
            raise ConfigError("curriculum.type: AutoCurriculumCallback runs learning_progress or plr")
        declared = self.curriculum.declared_tasks()
        self.tasks: list[Any] = list(declared) if declared is not None else []
        self.sampler: TaskSampler | None = self.curriculum.sampler(len(self.tasks)) if self.tasks else None
        self.rng = np.random.default_rng()

    def probs(self) -> list[float]:
        """The current distribution over :attr:`tasks`."""
        return [] if self.sampler is None else self.sampler.probs().tolist()

    def on_trainer_init(self, *, trainer: Any, **kwargs: Any) -> None:
        if self.sampler is None:
            spaces = [s for s in trainer.foreach_env(_env_task_space) if s is not None]
            if not spaces:
                raise ConfigError("curriculum: an automatic curriculum needs tasks: give curriculum.tasks or "
                                  "task_range, or a task_space on the env (a TaskSettableEnv)")
            self.tasks = tasks_of_space(spaces[0], self.curriculum.bins, "the env's task_space")
            self.sampler = self.curriculum.sampler(len(self.tasks))
        self.rng = np.random.default_rng(trainer.config.get("seed"))
        self.ship(trainer, redraw=True)

    def ship(self, trainer: Any, redraw: bool = False) -> None:
        """Send the task list and distribution to every rollout worker (one call each).

        ``redraw``: first give every env a task drawn from the distribution
        (at the start, and after a restore, which sets the saved tasks).
        """
        if redraw:
            places = list(trainer.get_tasks())
            if places:
                probs = np.asarray(self.probs())
                draws = self.rng.choice(len(self.tasks), size=len(places), p=probs / probs.sum())
                trainer.workers.set_env_tasks({place: self.tasks[i] for place, i in zip(places, draws)})
        trainer.foreach_worker(partial(_ship, self.tasks, self.probs()))

    def on_checkpoint_loaded(self, *, trainer: Any, **kwargs: Any) -> None:
        self.ship(trainer, redraw=True)

    def on_worker_recreated(self, *, trainer: Any, **kwargs: Any) -> None:
        self.ship(trainer)

    def on_train_result(self, *, trainer: Any, result: dict[str, Any], **kwargs: Any) -> None:
        hist = result.get("hist_stats") or {}
        stats = TaskStats.from_hist(hist)
        for key in HIST_KEYS:
            hist.pop(key, None)
        if self.sampler is None:
            return
        self.sampler.update(stats)
        probs = self.sampler.probs()
        scores = self.sampler.scores()
        labels = [task_label(t) for t in self.tasks]
        result["curriculum"] = {
            "task_probs": dict(zip(labels, probs.tolist())),
            "task_score": {label: float(s) for label, s in zip(labels, scores) if np.isfinite(s)},
            "task_episodes": dict(zip(labels, self.sampler.episodes.tolist())),
            # 0 for a task not played yet: a study's metric (e.g. curriculum/task_return/20) is there from the start
            "task_return": dict(zip(labels, np.nan_to_num(self.sampler.last_return, nan=0.0).tolist())),
        }
        result["curriculum_task"] = self.tasks[int(np.argmax(probs))]
        self.ship(trainer)

    def get_state(self) -> dict[str, Any]:
        if self.sampler is None:
            return {}
        return {"tasks": self.tasks, "sampler": self.sampler.get_state()}

    def set_state(self, state: dict[str, Any]) -> None:
        if not state:
            return
        if self.sampler is not None and state.get("tasks") != self.tasks:
            logger.warning("the checkpoint's curriculum has other tasks (%d) than this one (%d): its statistics "
                           "are not restored", len(state.get("tasks") or ()), len(self.tasks))
            return
        self.tasks = list(state["tasks"])
        self.sampler = self.curriculum.sampler(len(self.tasks))
        self.sampler.set_state(state.get("sampler") or {})
