"""Automatic curricula: every env draws its next task at each reset from a distribution the driver learns.

``curriculum: {type: learning_progress | plr, ...}`` over a finite task list:
the block's ``tasks`` (or ``task_range``), else the env's ``task_space`` (a
:class:`~rltune.env.TaskSettableEnv` attribute: a list of tasks, a
``Discrete`` or ``MultiDiscrete`` space, or a 1-D ``Box`` with ``bins``).

Two parts, one per process role, and no message per step:

- :class:`TaskPicker` (in every rollout worker's callbacks): once per
  fragment, records the task index and return of every episode that ended
  (PLR: the per-task sums of its GAE-advantage scores, from the fragment's
  ``vf_preds``) in the ``hist_data`` of an episode the worker returns anyway,
  and gives each env its next task (for its next reset), drawn from the last
  distribution shipped to it.
- :class:`AutoCurriculumCallback` (the trainer's): once per iteration, merges
  the lists of every worker's episodes (``result["hist_stats"]``), updates the
  sampler (``_task_samplers.py``), ships the new distribution to every
  worker with one ``foreach_worker`` call, and adds
  ``result["curriculum"]`` (``task_probs``, ``task_score``,
  ``task_episodes``, ``task_return``, by task) for MLflow. Its ``get_state``/``set_state``
  (sampler statistics, task list, distribution) go into checkpoints.
"""

from __future__ import annotations

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
from rltune.callbacks._plr_scores import fragment_scores
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
    """In every rollout worker: after each fragment, the per-task statistics of its episodes, and each env's next task.

    Everything happens once per fragment, in ``on_sample_end``, from the
    fragment's columns (no episode hook, so no per-step bookkeeping): the
    rows of each env are split into episodes at its done flags; the episode
    running when the fragment began ran the task it started with, the ones
    started in the fragment the env's pending task (``get_task()``, which
    takes effect at a reset). The returns of the episodes that ended (PLR:
    the per-task sums of each row's GAE-advantage score too) go into the
    ``hist_data`` of an episode the worker returns; then every env gets its
    next task, drawn from the last distribution shipped to the worker, for
    its next reset. Idle until the trainer ships one
    (:meth:`set_distribution`), so evaluation workers keep the task they are
    given.
    """

    def __init__(self, score: str | None = None, seed: int | None = None) -> None:
        self.score = score  # PLR's per-step score, None for samplers that only read returns
        self.seed = seed
        self.tasks: list[Any] = []
        self.index: dict[str, int] = {}  # by JSON text
        self.hashed: dict[Any, int] = {}  # by the task itself (hashable tasks: the fast path)
        self.cdf = np.zeros(0)
        self.rng: np.random.Generator | None = None
        self.first_task = np.zeros(0, dtype=np.int64)  # per env: the task index of its open episode
        self.carried = np.zeros(0)  # and that episode's return so far
        self.unsent: dict[str, list[float]] = {}  # statistics of fragments in which no episode ended
        self.gamma, self.lam = 0.99, 1.0
        self._targets: tuple[tuple[int, ...], list[Any]] = ((), [])

    @property
    def active(self) -> bool:
        """Whether the trainer shipped a distribution."""
        return bool(len(self.cdf))

    def set_distribution(self, tasks: list[Any], probs: list[float], worker: Any) -> None:
        """Take the trainer's task list and distribution (the envs' first tasks are the trainer's draws)."""
        if not self.active:
            seed = None if self.seed is None else [self.seed, worker.worker_index]
            self.rng = np.random.default_rng(seed)
            self.gamma, self.lam = float(worker.config.gamma), float(worker.config.get("lambda", 1.0))
        if tasks != self.tasks:
            self.tasks = list(tasks)
            self.index = {json.dumps(t, sort_keys=True): i for i, t in enumerate(tasks)}
            self.hashed = {}
            for i, t in enumerate(tasks):
                try:
                    self.hashed.setdefault(t, i)
                except TypeError:  # a list or dict task: found by its JSON text
                    pass
            self.first_task, self.carried, self.unsent = np.zeros(0, dtype=np.int64), np.zeros(0), {}
        self.cdf = np.cumsum(probs)

    def task_index(self, task: Any) -> int:
        """The index of ``task`` in the list, -1 if it is not there."""
        try:
            return self.hashed[task]
        except (KeyError, TypeError):
            return self.index.get(json.dumps(task, sort_keys=True, default=repr), -1)

    def draw(self, n: int) -> np.ndarray:
        """``n`` task indices drawn from the distribution."""
        return np.minimum(np.searchsorted(self.cdf, self.rng.random(n) * self.cdf[-1], side="right"), len(self.tasks) - 1)

    def _task_targets(self, worker: Any) -> list[Any]:
        ids = tuple(map(id, worker.envs))  # rebuilt envs (after a crash) are new objects
        if ids != self._targets[0]:
            self._targets = (ids, [task_env(env) for env in worker.envs])
        return self._targets[1]

    def on_sample_end(self, *, samples: Any, worker: Any = None, **kwargs: Any) -> None:
        if not self.active or worker is None:
            return
        targets = self._task_targets(worker)
        pending = np.array([-1 if t is None else self.task_index(t.get_task()) for t in targets], dtype=np.int64)
        hist: dict[str, list[float]] = self.unsent
        for fragment in samples.fragments:
            if fragment.agents is None and fragment.shape[1] == len(targets):
                self._fragment_stats(fragment, pending, hist)
        for target, old, new in zip(targets, pending.tolist(), self.draw(len(targets)).tolist()):
            if target is not None and new != old:
                target.set_task(self.tasks[new])  # takes effect at the env's next reset
        if samples.episodes:
            samples.episodes[0].hist_data.update(hist)
            self.unsent = {}
        else:
            self.unsent = hist

    def _fragment_stats(self, fragment: Any, pending: np.ndarray, hist: dict[str, list[float]]) -> None:
        """Add the returns of the fragment's ended episodes (and PLR's scores) to ``hist``, by task index."""
        columns = fragment.columns
        done = np.asarray(columns["terminateds"], dtype=bool) | np.asarray(columns["truncateds"], dtype=bool)
        if self.first_task.shape != pending.shape:  # the first fragment: its first episodes started with the pending task
            self.first_task, self.carried = pending.copy(), np.zeros(len(pending))
        total = np.cumsum(np.asarray(columns["rewards"], dtype=np.float64), axis=0)  # each env's rewards so far
        ends_col, ends_row = np.nonzero(done.T)  # episode ends, env by env, in time order
        first, carried, later = self.first_task.tolist(), self.carried.tolist(), pending.tolist()
        tasks, returns = hist.setdefault(HIST_TASK, []), hist.setdefault(HIST_RETURN, [])
        last_end: dict[int, float] = {}
        for col, end_total in zip(ends_col.tolist(), total[ends_row, ends_col].tolist()):
            task = later[col] if col in last_end else first[col]
            if task >= 0:
                tasks.append(float(task))
                returns.append(end_total - last_end.get(col, -carried[col]))
            last_end[col] = end_total
        last_total = total[-1].tolist()
        for col, finished in enumerate(done[-1].tolist()):
            if col in last_end:  # the open episode started in this fragment, with the pending task
                self.first_task[col], self.carried[col] = later[col], 0.0 if finished else last_total[col] - last_end[col]
            else:
                self.carried[col] += last_total[col]
        if self.score and "vf_preds" in columns:
            episode_of_row = np.cumsum(done, axis=0) - done  # the row's episode within its env's column
            row_tasks = np.where(episode_of_row == 0, np.asarray(first), pending)
            sums, counts = fragment_scores(fragment, row_tasks, len(self.tasks), self.score, self.gamma, self.lam)
            for task in np.flatnonzero(counts):
                hist.setdefault(HIST_SCORE_TASK, []).append(float(task))
                hist.setdefault(HIST_SCORE, []).append(float(sums[task]))
                hist.setdefault(HIST_SCORE_ROWS, []).append(float(counts[task]))


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
        self._labelled: list[Any] | None = None  # the task list _task_labels were made for
        self._task_labels: list[str] = []

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

    def ship(self, trainer: Any, redraw: bool = False, probs: list[float] | None = None) -> None:
        """Send the task list and distribution to every rollout worker (one call each).

        ``redraw``: first give every env a task drawn from the distribution
        (at the start, and after a restore, which sets the saved tasks).
        """
        if redraw:
            places = list(trainer.get_tasks())
            if places:
                weights = np.asarray(self.probs())
                draws = self.rng.choice(len(self.tasks), size=len(places), p=weights / weights.sum())
                trainer.workers.set_env_tasks({place: self.tasks[i] for place, i in zip(places, draws)})
        trainer.foreach_worker(partial(_ship, self.tasks, self.probs() if probs is None else probs))

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
        shipped, scores, returns = probs.tolist(), self.sampler.scores(), self.sampler.last_return
        labels = self._labels()
        result["curriculum"] = {
            "task_probs": dict(zip(labels, shipped)),
            "task_score": {label: float(s) for label, s in zip(labels, scores) if np.isfinite(s)},
            "task_episodes": dict(zip(labels, self.sampler.episodes.tolist())),
            # 0 for a task not played yet: a study's metric (e.g. curriculum/task_return/20) is there from the start
            "task_return": dict(zip(labels, np.where(np.isnan(returns), 0.0, returns).tolist())),
        }
        result["curriculum_task"] = self.tasks[int(np.argmax(probs))]
        self.ship(trainer, probs=shipped)

    def _labels(self) -> list[str]:
        """The tasks' labels, computed again only when the task list is replaced (start, restore)."""
        if self._labelled is not self.tasks:
            self._labelled, self._task_labels = self.tasks, [task_label(t) for t in self.tasks]
        return self._task_labels

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
