"""Trainer evaluation: deterministic episodes in separate envs, every ``evaluation_interval`` iterations."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any, Callable

from rltune.trainers._config import TrainerSettings
from rltune.trainers._trainer_parts import episode_stats
from rltune.trainers.rllib._rllib_names import Translated, add_result_spellings
from rltune.trainers.sampling._rollout_worker import RolloutWorker

if TYPE_CHECKING:
    from rltune.trainers._trainer_parts import TrainerParts


class TrainerEvaluation:
    """A trainer's evaluation: its own rollout workers (built on first use) and the stats of each evaluation.

    ``validate`` checks the evaluation config (the trainer's
    :meth:`~rltune.trainers._trainer.Trainer.validate`); ``current_task``
    gives the training envs' task, which the evaluation envs get unless
    another is asked for. The latest stats live in ``parts.progress``.
    """

    def __init__(
        self,
        parts: "TrainerParts",
        validate: Callable[[Any], TrainerSettings],
        current_task: Callable[[], Any],
    ) -> None:
        self.parts = parts
        self.validate = validate
        self.current_task = current_task
        self.workers: dict[int, RolloutWorker] = {}  # by number of envs
        self._eval_cfg: TrainerSettings | None = None

    def periodic(self) -> dict[str, Any]:
        """The ``evaluation`` stats for this iteration's result (``evaluation_interval`` is set).

        The first iteration (of a trainer that has no evaluation yet) and
        every ``evaluation_interval``-th one run :meth:`evaluate`; the others
        carry the latest stats with ``episodes_this_iter: 0``. So every
        result has the keys and a value: a stop criterion or a tuning metric
        on ``evaluation/episode_reward_mean`` works from the first result on,
        and a trial that stops early still has a final value.
        """
        progress = self.parts.progress
        if progress.last_evaluation is None or progress.iteration % self.parts.cfg.evaluation_interval == 0:
            progress.last_evaluation = self.evaluate()["evaluation"]
            return copy.deepcopy(progress.last_evaluation)  # callbacks may edit the result; the carried stats stay as measured
        carried = {**copy.deepcopy(progress.last_evaluation), "episodes_this_iter": 0, "hist_stats": {"episode_reward": []}}
        return add_result_spellings(carried)

    def evaluate(self, num_episodes: int | None = None, *, task: Any = None) -> dict[str, Any]:
        """Run deterministic episodes in a separate env (with ``evaluation_config``); training stats are untouched.

        The observations are filtered with the trainer's observation filters, frozen.

        The evaluation env gets the training envs' current task, or ``task``
        when given (e.g. the hardest task, to judge a curriculum).
        """
        n = num_episodes or self.parts.cfg.evaluation_duration
        worker = self.worker(n)
        if task is None:
            task = self.current_task()
        if task is not None:
            worker.set_task_all(task)
        owned = self.parts.policy_set
        worker.set_policy_set(owned.state())
        worker.set_weights(owned.get_weights(), {"timestep": self.parts.progress.timesteps_total}, owned.filter_stats())
        episodes = worker.run_episodes(n, explore=False)
        return {"evaluation": episode_stats(episodes)}

    def worker(self, num_episodes: int) -> RolloutWorker:
        """The worker that runs ``num_episodes`` evaluation episodes, built on first use.

        It steps up to ``num_envs_per_worker`` envs of the evaluation config
        at once, never more envs than episodes (so ``evaluate(1)`` builds one
        env). Its ``worker_index`` is ``num_workers + 1``: its envs get seeds
        (and indices) of their own, not the training envs'.
        """
        cfg = self.parts.cfg
        if self._eval_cfg is None:  # validated once: evaluate() may run every few iterations
            # (the typed multiagent block: its dump holds the policies' spaces as text)
            overrides = {**self.parts.config, "multiagent": cfg.multiagent, **cfg.evaluation_config}
            self._eval_cfg = self.validate(Translated(overrides)) if cfg.evaluation_config else cfg
        eval_cfg = self._eval_cfg
        num_envs = min(eval_cfg.num_envs_per_worker, num_episodes)
        worker = self.workers.get(num_envs)
        if worker is None:
            owned = self.parts.policy_set
            worker = RolloutWorker(
                env_spec=self.parts.env_spec,
                config=eval_cfg,
                policy_class=self.parts.policy_class,
                worker_index=cfg.num_workers + 1,
                num_workers=cfg.num_workers,
                num_envs=num_envs,
                spaces=owned.policy_spaces(),
                multi_agent=owned.multi_agent,
            )
            self.workers[num_envs] = worker
        return worker

    def set_task(self, task: Any) -> None:
        """Give every env of the evaluation workers built so far ``task``."""
        for worker in self.workers.values():
            worker.set_task_all(task)

    def stop(self) -> None:
        """Stop the evaluation workers (close their envs)."""
        for worker in self.workers.values():
            worker.stop()
