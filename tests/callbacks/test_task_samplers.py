"""Task samplers of automatic curricula, on constructed statistics: learning progress and Prioritized Level Replay."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rltune.callbacks import LearningProgressSampler, PrioritizedLevelReplay, TaskStats
from rltune.callbacks._auto_curriculum import TaskPicker, fragment_scores
from rltune.callbacks._task_samplers import HIST_RETURN, HIST_SCORE, HIST_SCORE_ROWS, HIST_SCORE_TASK, HIST_TASK
from rltune.trainers.sampling._fragment import Fragment


def stats(returns=None, scores=None) -> TaskStats:
    s = TaskStats(returns={k: list(v) for k, v in (returns or {}).items()})
    for task, (total, rows) in (scores or {}).items():
        s.score_sum[task], s.score_rows[task] = total, rows
    return s


def test_stats_are_merged_from_the_hist_lists_of_every_workers_episodes():
    hist = {HIST_TASK: [0.0, 2.0, 0.0], HIST_RETURN: [1.0, 5.0, 3.0],
            HIST_SCORE_TASK: [2.0, 2.0, 1.0], HIST_SCORE: [1.0, 3.0, 0.5], HIST_SCORE_ROWS: [2.0, 2.0, 1.0]}
    merged = TaskStats.from_hist(hist)
    assert merged.returns == {0: [1.0, 3.0], 2: [5.0]}
    assert merged.score_sum == {2: 4.0, 1: 0.5} and merged.score_rows == {2: 4, 1: 1}


def test_learning_progress_draws_the_task_whose_return_moves_most():
    sampler = LearningProgressSampler(3, fast_alpha=0.5, slow_alpha=0.1, epsilon=0.1)
    assert np.allclose(sampler.probs(), 1 / 3)  # nothing seen: uniform
    sampler.update(stats({0: [0.0], 1: [0.0], 2: [0.0]}))
    assert np.allclose(sampler.probs(), 1 / 3)  # no progress anywhere: uniform
    sampler.update(stats({0: [1.0], 1: [0.0], 2: [0.0]}))  # task 0 improves
    # fast = 0.5, slow = 0.1: progress 0.4 on task 0 only
    assert np.allclose(sampler.scores(), [0.4, 0.0, 0.0])
    assert np.allclose(sampler.probs(), [0.1 / 3 + 0.9, 0.1 / 3, 0.1 / 3])
    assert np.isclose(sampler.probs().sum(), 1.0)
    assert sampler.episodes.tolist() == [2, 2, 2]


def test_learning_progress_gives_an_unseen_task_the_largest_progress():
    sampler = LearningProgressSampler(3, epsilon=0.0)
    sampler.update(stats({0: [0.0], 1: [0.0]}))
    sampler.update(stats({0: [1.0], 1: [0.5]}))
    assert np.allclose(sampler.scores(), [0.4, 0.2, 0.4])
    assert np.allclose(sampler.probs(), [0.4, 0.2, 0.4])


def test_plr_ranks_by_score_with_temperature_and_mixes_in_staleness():
    sampler = PrioritizedLevelReplay(3, temperature=1.0, staleness_coef=0.0)
    sampler.update(stats({0: [0], 1: [0], 2: [0]}, {0: (1.0, 2), 1: (4.0, 2), 2: (2.0, 2)}))  # scores 0.5, 2, 1
    weights = np.array([1 / 3, 1.0, 1 / 2])
    assert np.allclose(sampler.probs(), weights / weights.sum())
    colder = PrioritizedLevelReplay(3, temperature=0.5, staleness_coef=0.0)
    colder.set_state(sampler.get_state())
    assert np.allclose(colder.probs(), weights ** 2 / (weights ** 2).sum())  # lower temperature: sharper
    # Staleness: episodes since each task was last played.
    stale = PrioritizedLevelReplay(3, temperature=1.0, staleness_coef=1.0)
    stale.update(stats({0: [0, 0], 1: [0], 2: [0]}, {0: (1.0, 1), 1: (1.0, 1), 2: (1.0, 1)}))  # 4 episodes
    stale.update(stats({0: [0, 0]}))  # 6 episodes: 1 and 2 last played at 4
    assert np.allclose(stale.probs(), [0.0, 0.5, 0.5])


def test_plr_plays_every_task_before_replaying_by_score():
    sampler = PrioritizedLevelReplay(3, temperature=0.1, staleness_coef=0.0)
    sampler.update(stats({0: [0]}, {0: (5.0, 1)}))
    probs = sampler.probs()
    assert probs[0] < 0.01 and np.isclose(probs[1], probs[2])  # the unscored come first, alike


@pytest.mark.parametrize("cls", [LearningProgressSampler, PrioritizedLevelReplay])
def test_state_round_trip_through_json_continues_the_same_distribution(cls):
    rng = np.random.default_rng(0)
    batches = [stats({int(t): [float(rng.random())] for t in rng.integers(0, 4, 3)},
                     {int(t): (float(rng.random()), 2) for t in rng.integers(0, 4, 2)}) for _ in range(6)]
    reference = cls(4)
    for batch in batches:
        reference.update(batch)
    for cut in range(1, len(batches)):
        first = cls(4)
        for batch in batches[:cut]:
            first.update(batch)
        second = cls(4)
        second.set_state(json.loads(json.dumps(first.get_state())))
        for batch in batches[cut:]:
            second.update(batch)
        assert np.allclose(second.probs(), reference.probs()), cut


def corridor_fragment(rewards, dones) -> Fragment:
    """One env's column of a fragment: its rewards, terminated flags and values (0.5, then 1.0)."""
    rewards = np.array(rewards, dtype=float)[:, None]
    values = np.where(np.arange(len(rewards)) < 2, 0.5, 1.0)[:, None]
    return Fragment("default_policy", {"rewards": rewards, "vf_preds": values, "terminateds": np.array(dones)[:, None],
                                       "truncateds": np.zeros((len(rewards), 1), dtype=bool)})


def test_plr_fragment_scores_are_gae_advantages_summed_by_the_task_of_each_row():
    # 4 steps: an episode of task 1 ends at step 1 (terminated), then one of task 2 runs on.
    fragment = corridor_fragment([0.0, 1.0, 0.0, 2.0], [False, True, False, False])
    row_tasks = np.array([[1], [1], [2], [2]])
    sums, rows = fragment_scores(fragment, row_tasks, 3, "value_l1", 1.0, 1.0)
    # gamma = lambda = 1; the last step bootstraps from its own value.
    # episode 1: returns 1, 1 -> advantages 0.5, 0.5; episode 2: deltas 0 + 1 - 1 = 0 and 2 + 1 - 1 = 2 -> advantages 2, 2
    assert rows.tolist() == [0, 2, 2]
    assert np.allclose(sums, [0.0, 1.0, 4.0])
    fragment.columns["rewards"] = np.array([[0.0], [0.0], [0.0], [2.0]])  # episode 1's advantages: -0.5, -0.5
    assert np.allclose(fragment_scores(fragment, row_tasks, 3, "positive_value_loss", 1.0, 1.0)[0], [0.0, 0.0, 4.0])


def test_the_picker_splits_each_envs_rows_into_episodes_and_carries_an_open_one_to_the_next_fragment():
    picker = TaskPicker(score="value_l1")
    picker.set_distribution(["a", "b", "c"], [0.0, 0.0, 1.0], FakeWorker())
    hist: dict = {}
    # The env's pending task is "b" (index 1): the first fragment's first episode started with it too.
    picker._fragment_stats(corridor_fragment([0.0, 1.0, 0.5, 0.5], [False, True, False, False]), np.array([1]), hist)
    assert (hist[HIST_TASK], hist[HIST_RETURN]) == ([1.0], [1.0])  # the open episode (1.0 so far) is carried
    assert (picker.first_task.tolist(), picker.carried.tolist()) == ([1], [1.0])
    hist = {}
    # Meanwhile the env was given "c" (index 2): the open episode keeps "b", the next ones run "c".
    picker._fragment_stats(corridor_fragment([2.0, 0.0, 3.0, 1.0], [True, False, True, False]), np.array([2]), hist)
    assert (hist[HIST_TASK], hist[HIST_RETURN]) == ([1.0, 2.0], [3.0, 3.0])
    assert (picker.first_task.tolist(), picker.carried.tolist()) == ([2], [1.0])
    assert hist[HIST_SCORE_TASK] == [1.0, 2.0] and hist[HIST_SCORE_ROWS] == [1.0, 3.0]


class FakeWorker:
    worker_index = 1

    class config:
        gamma = 1.0

        @staticmethod
        def get(key, default=None):
            return 1.0
