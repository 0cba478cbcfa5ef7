"""Trainer evaluation: deterministic episodes in separate envs, every ``evaluation_interval`` iterations."""

from __future__ import annotations

import copy
import math
from typing import Any

import numpy as np

from rltune.trainers.rllib._rllib_names import Translated, add_result_spellings
from rltune.trainers.sampling._rollout_worker import RolloutWorker
from rltune.trainers.sampling._sample_batch import EpisodeMetrics


def _mean_or_nan(values: list[float]) -> float:
    return float(np.mean(values)) if values else math.nan



class EvaluationMixin:
    """The evaluation methods of :class:`~rltune.trainers._trainer.Trainer`."""

    def _periodic_evaluation(self) -> dict[str, Any]:
        """The ``evaluation`` stats for this iteration's result (``evaluation_interval`` is set).

        The first iteration (of a trainer that has no evaluation yet) and
        every ``evaluation_interval``-th one run :meth:`evaluate`; the others
        carry the latest stats with ``episodes_this_iter: 0``. So every
        result has the keys and a value: a stop criterion or a tuning metric
        on ``evaluation/episode_reward_mean`` works from the first result on,
        and a trial that stops early still has a final value.
        """
        if self._last_evaluation is None or self.iteration % self.cfg.evaluation_interval == 0:
            self._last_evaluation = self.evaluate()["evaluation"]
            return copy.deepcopy(self._last_evaluation)  # callbacks may edit the result; the carried stats stay as measured
        carried = {**copy.deepcopy(self._last_evaluation), "episodes_this_iter": 0, "hist_stats": {"episode_reward": []}}
        return add_result_spellings(carried)

    def evaluate(self, num_episodes: int | None = None, *, task: Any = None) -> dict[str, Any]:
        """Run deterministic episodes in a separate env (with ``evaluation_config``); training stats are untouched.

        The observations are filtered with the trainer's observation filters, frozen.

        The evaluation env gets the training envs' current task, or ``task``
        when given (e.g. the hardest task, to judge a curriculum).
        """
        n = num_episodes or self.cfg.evaluation_duration
        worker = self._evaluation_worker(n)
        if task is None:
            task = self.current_task()
        if task is not None:
            worker.set_task_all(task)
        worker.set_policy_set(self.workers.local_worker.policy_set_state())
        local = self.workers.local_worker
        worker.set_weights(local.get_weights(), {"timestep": self.timesteps_total}, local.get_filters())
        episodes = worker.run_episodes(n, explore=False)
        return {"evaluation": _evaluation_stats(episodes)}

    def _evaluation_worker(self, num_episodes: int) -> RolloutWorker:
        """The worker that runs ``num_episodes`` evaluation episodes, built on first use.

        It steps up to ``num_envs_per_worker`` envs of the evaluation config
        at once, never more envs than episodes (so ``evaluate(1)`` builds one
        env). Its ``worker_index`` is ``num_workers + 1``: its envs get seeds
        (and indices) of their own, not the training envs'.
        """
        if self._eval_cfg is None:  # validated once: evaluate() may run every few iterations
            # (the typed multiagent block: its dump holds the policies' spaces as text)
            overrides = {**self.config, "multiagent": self.cfg.multiagent, **self.cfg.evaluation_config}
            self._eval_cfg = self.validate(Translated(overrides)) if self.cfg.evaluation_config else self.cfg
        eval_cfg = self._eval_cfg
        num_envs = min(eval_cfg.num_envs_per_worker, num_episodes)
        worker = self._eval_workers.get(num_envs)
        if worker is None:
            local = self.workers.local_worker
            worker = RolloutWorker(
                env_spec=self.env_spec,
                config=eval_cfg,
                policy_class=self.policy_class,
                worker_index=self.cfg.num_workers + 1,
                num_workers=self.cfg.num_workers,
                num_envs=num_envs,
                spaces=local.get_policy_spaces(),
                multi_agent=local.multi_agent,
            )
            self._eval_workers[num_envs] = worker
        return worker


def _evaluation_stats(episodes: list[EpisodeMetrics]) -> dict[str, Any]:
    """The ``evaluation`` dict of a result for these episodes (NaN stats when there are none)."""
    rewards = [e.episode_reward for e in episodes]
    policy_rewards: dict[str, list[float]] = {}  # multi-agent: one entry per agent and episode
    for episode in episodes:
        for _, pid, reward in episode.agent_rewards:
            policy_rewards.setdefault(pid, []).append(reward)
    return add_result_spellings({
        "episode_reward_mean": _mean_or_nan(rewards),
        "episode_reward_min": float(np.min(rewards)) if rewards else math.nan,
        "episode_reward_max": float(np.max(rewards)) if rewards else math.nan,
        "episode_len_mean": _mean_or_nan([float(e.episode_length) for e in episodes]),
        "episodes_this_iter": len(episodes),
        "hist_stats": {"episode_reward": rewards, **{f"policy_{pid}_reward": r for pid, r in policy_rewards.items()}},
        **({"policy_reward_mean": {pid: _mean_or_nan(r) for pid, r in policy_rewards.items()},
            "policy_reward_min": {pid: float(np.min(r)) for pid, r in policy_rewards.items()},
            "policy_reward_max": {pid: float(np.max(r)) for pid, r in policy_rewards.items()}} if policy_rewards else {}),
    })
