"""Task samplers of automatic curricula: per-task statistics in, a sampling distribution over the tasks out.

A sampler knows tasks by index (``0 .. num_tasks - 1``). Once per training
iteration the driver merges what every worker saw (:class:`TaskStats`) and
calls :meth:`TaskSampler.update`; :meth:`TaskSampler.probs` is then shipped to
the workers, whose envs draw their next task from it at every reset.

Invariants: ``probs()`` is a probability vector over every task (each > 0
unless a rule says otherwise, summing to 1); ``get_state()`` is JSON-able and
``set_state(get_state())`` continues the same schedule; a task with no new
statistics keeps its old ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

# The per-episode lists a worker's task picker adds to ``hist_data`` (and so to the result's ``hist_stats``).
HIST_TASK = "curriculum_task_index"  # the task index of each finished episode
HIST_RETURN = "curriculum_return"  # and its return
HIST_SCORE_TASK = "curriculum_score_task"  # PLR: a task index per scored segment of a fragment
HIST_SCORE = "curriculum_score_sum"  # its summed per-step score
HIST_SCORE_ROWS = "curriculum_score_rows"  # and its number of steps
HIST_KEYS = (HIST_TASK, HIST_RETURN, HIST_SCORE_TASK, HIST_SCORE, HIST_SCORE_ROWS)


@dataclass
class TaskStats:
    """What one iteration's episodes said about each task, by task index: sums and counts, merged over workers."""

    returns: dict[int, list[float]] = field(default_factory=dict)  # episode returns
    score_sum: dict[int, float] = field(default_factory=dict)  # PLR: summed per-step scores (|GAE advantage| ...)
    score_rows: dict[int, int] = field(default_factory=dict)  # PLR: how many steps those sums cover

    @classmethod
    def from_hist(cls, hist: dict[str, list[float]]) -> "TaskStats":
        """From the ``hist_stats`` lists (``HIST_*``) the workers' task pickers fill."""
        stats = cls()
        for task, ret in zip(hist.get(HIST_TASK, ()), hist.get(HIST_RETURN, ())):
            stats.returns.setdefault(int(task), []).append(float(ret))
        for task, total, rows in zip(hist.get(HIST_SCORE_TASK, ()), hist.get(HIST_SCORE, ()), hist.get(HIST_SCORE_ROWS, ())):
            stats.score_sum[int(task)] = stats.score_sum.get(int(task), 0.0) + float(total)
            stats.score_rows[int(task)] = stats.score_rows.get(int(task), 0) + int(rows)
        return stats


class TaskSampler:
    """Base: uniform over ``num_tasks`` tasks; counts episodes per task."""

    def __init__(self, num_tasks: int) -> None:
        self.num_tasks = num_tasks
        self.episodes = np.zeros(num_tasks, dtype=np.int64)  # per task, since the start
        self.last_return = np.full(num_tasks, np.nan)  # per task: the mean return of the last iteration it was played in

    def update(self, stats: TaskStats) -> None:
        """Take one iteration's merged statistics."""
        for task, returns in stats.returns.items():
            if 0 <= task < self.num_tasks and returns:
                self.episodes[task] += len(returns)
                self.last_return[task] = float(np.mean(returns))

    def probs(self) -> np.ndarray:
        """The distribution the envs draw their next task from."""
        return np.full(self.num_tasks, 1.0 / self.num_tasks)

    def scores(self) -> np.ndarray:
        """Each task's current score (what the distribution is built from; 0 for the uniform sampler)."""
        return np.zeros(self.num_tasks)

    def get_state(self) -> dict[str, Any]:
        """JSON-able state, saved in checkpoints."""
        return {"episodes": self.episodes.tolist(), "last_return": _json_floats(self.last_return)}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`get_state` (a checkpoint of as many tasks)."""
        self.episodes = _array(state.get("episodes"), self.num_tasks, np.int64, 0)
        self.last_return = _array(state.get("last_return"), self.num_tasks, float, np.nan)


class LearningProgressSampler(TaskSampler):
    """Learning progress: tasks whose mean return is changing fastest are drawn most.

    Per task, a fast and a slow exponential moving average of the mean
    episode return of each iteration it was played in; its learning progress
    is ``|fast - slow|``. The distribution is ``epsilon`` uniform plus
    ``1 - epsilon`` proportional to learning progress (uniform while no task
    has any). A task never played has the largest progress seen, so every
    task is tried early.
    """

    def __init__(self, num_tasks: int, *, fast_alpha: float = 0.5, slow_alpha: float = 0.1, epsilon: float = 0.1) -> None:
        super().__init__(num_tasks)
        self.fast_alpha, self.slow_alpha, self.epsilon = fast_alpha, slow_alpha, epsilon
        self.fast = np.full(num_tasks, np.nan)
        self.slow = np.full(num_tasks, np.nan)

    def update(self, stats: TaskStats) -> None:
        super().update(stats)
        for task, returns in stats.returns.items():
            if not (0 <= task < self.num_tasks and returns):
                continue
            value = float(np.mean(returns))
            if np.isnan(self.fast[task]):
                self.fast[task] = self.slow[task] = value
            else:
                self.fast[task] += self.fast_alpha * (value - self.fast[task])
                self.slow[task] += self.slow_alpha * (value - self.slow[task])

    def scores(self) -> np.ndarray:
        progress = np.abs(self.fast - self.slow)
        seen = ~np.isnan(progress)
        unseen_value = progress[seen].max() if seen.any() else 0.0
        return np.where(seen, progress, unseen_value)

    def probs(self) -> np.ndarray:
        progress = self.scores()
        total = progress.sum()
        uniform = np.full(self.num_tasks, 1.0 / self.num_tasks)
        if not total > 0:
            return uniform
        return self.epsilon * uniform + (1.0 - self.epsilon) * progress / total

    def get_state(self) -> dict[str, Any]:
        return {**super().get_state(), "fast": _json_floats(self.fast), "slow": _json_floats(self.slow)}

    def set_state(self, state: dict[str, Any]) -> None:
        super().set_state(state)
        self.fast = _array(state.get("fast"), self.num_tasks, float, np.nan)
        self.slow = _array(state.get("slow"), self.num_tasks, float, np.nan)


class PrioritizedLevelReplay(TaskSampler):
    """Prioritized Level Replay (Jiang et al., 2021) over a finite task list.

    A task's score is the mean per-step score (e.g. positive GAE advantage)
    of the last iteration it was played in. Rank prioritization:
    ``P_S(i) ∝ (1 / rank(score_i)) ** (1 / temperature)``; staleness:
    ``P_C(i) ∝ episodes_total - episodes_total_when_i_was_last_played``; the
    distribution is ``(1 - staleness_coef) * P_S + staleness_coef * P_C``.
    Tasks never played come first (rank 1) until each has a score; tied
    tasks share their best rank (so a trainer without value predictions,
    whose tasks are never scored, draws by staleness and uniformly).
    """

    def __init__(self, num_tasks: int, *, temperature: float = 0.3, staleness_coef: float = 0.1) -> None:
        super().__init__(num_tasks)
        self.temperature, self.staleness_coef = temperature, staleness_coef
        self.score = np.full(num_tasks, np.nan)
        self.last_played = np.zeros(num_tasks, dtype=np.int64)  # episodes_total when last played

    def update(self, stats: TaskStats) -> None:
        super().update(stats)
        total = int(self.episodes.sum())
        for task, rows in stats.score_rows.items():
            if 0 <= task < self.num_tasks and rows > 0:
                self.score[task] = stats.score_sum[task] / rows
        for task, returns in stats.returns.items():
            if 0 <= task < self.num_tasks and returns:
                self.last_played[task] = total

    def scores(self) -> np.ndarray:
        return np.where(np.isnan(self.score), np.inf, self.score)

    def probs(self) -> np.ndarray:
        scores = self.scores()
        ranks = 1 + np.searchsorted(np.sort(-scores), -scores, side="left")  # tied tasks share the best rank
        weights = (1.0 / ranks) ** (1.0 / self.temperature)
        p_score = weights / weights.sum()
        stale = (self.episodes.sum() - self.last_played).astype(float)
        p_stale = stale / stale.sum() if stale.sum() > 0 else np.full(self.num_tasks, 1.0 / self.num_tasks)
        return (1.0 - self.staleness_coef) * p_score + self.staleness_coef * p_stale

    def get_state(self) -> dict[str, Any]:
        return {**super().get_state(), "score": _json_floats(self.score), "last_played": self.last_played.tolist()}

    def set_state(self, state: dict[str, Any]) -> None:
        super().set_state(state)
        self.score = _array(state.get("score"), self.num_tasks, float, np.nan)
        self.last_played = _array(state.get("last_played"), self.num_tasks, np.int64, 0)


def _json_floats(values: np.ndarray) -> list[float | None]:
    """NaN as None (JSON has no NaN)."""
    return [None if np.isnan(v) else float(v) for v in values]


def _array(values: Any, size: int, dtype: Any, missing: Any) -> np.ndarray:
    """A saved list back as an array of ``size`` (None -> ``missing``); a list of another size starts afresh."""
    if not isinstance(values, list) or len(values) != size:
        return np.full(size, missing, dtype=dtype)
    return np.array([missing if v is None else v for v in values], dtype=dtype)
