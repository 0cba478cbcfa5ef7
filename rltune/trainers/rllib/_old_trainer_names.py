"""RLlib's older names on a trainer: ``trainer.optimizer.foreach_evaluator``, ``default_resource_request``.

Old RLlib (0.x-1.x) reached the rollout workers through the trainer's policy
optimizer (``trainer.optimizer.foreach_evaluator(fn)``,
``trainer.optimizer.local_evaluator``); Ray Tune asks a trainable for the
resources of a trial with ``default_resource_request(config)``, as a
placement-group factory (a bundle for the trainer process, one per rollout
worker). Both are answered here in rltune's terms.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from rltune.trainers._trainer import Trainer

_INSTEAD = {
    "remote_evaluators": "trainer.workers.foreach_worker(fn, local=False) (the rollout worker processes only)",
    "foreach_evaluator_with_index": "trainer.foreach_worker(fn) (each worker's index is worker.worker_index)",
    "workers": "trainer.workers",
}


class OldOptimizer:
    """``trainer.optimizer`` of old RLlib: its ``foreach_evaluator`` and ``local_evaluator``, over rltune's workers."""

    def __init__(self, trainer: Trainer) -> None:
        self._trainer = trainer

    def foreach_evaluator(self, fn: Callable[[Any], Any]) -> list[Any]:
        """``fn(worker)`` on every rollout worker, local first: :meth:`Trainer.foreach_worker` (its new name)."""
        return self._trainer.foreach_worker(fn)

    @property
    def local_evaluator(self) -> Any:
        """The trainer's local rollout worker: ``trainer.workers.local_worker`` (its new name)."""
        return self._trainer.workers.local_worker

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        instead = _INSTEAD.get(name, "trainer.foreach_worker(fn), trainer.foreach_env(fn) or trainer.workers.local_worker")
        raise AttributeError(f"trainer.optimizer.{name}: old RLlib's policy optimizer is gone (rltune keeps only "
                             f"foreach_evaluator and local_evaluator on it); use {instead}")


class OldOptimizerAttribute:
    """``Trainer.optimizer``: an :class:`OldOptimizer` of the trainer, unless a subclass sets its own ``optimizer``.

    A non-data descriptor, so that ``self.optimizer = ...`` in a user's trainer simply takes the name.
    """

    def __get__(self, trainer: Trainer | None, owner: type | None = None) -> Any:
        return self if trainer is None else OldOptimizer(trainer)


@dataclass(frozen=True)
class PlacementGroupFactory:
    """The resources of a trial as Ray Tune asks for them: one bundle per process (trainer first, then each worker).

    rltune's study budget counts CPUs only: :attr:`required_resources` ``["CPU"]``
    is what a trial holds (``resources_per_trial`` takes this object).
    """

    bundles: list[dict[str, float]]
    strategy: str = "PACK"

    @property
    def required_resources(self) -> dict[str, float]:
        """The sum of the bundles, by resource (``{"CPU": 3, "GPU": 0}``)."""
        total: dict[str, float] = {}
        for bundle in self.bundles:
            for name, amount in bundle.items():
                total[name] = total.get(name, 0) + amount
        return total


# The config keys (RLlib's names of every version) that a trial's resources come from.
_RESOURCE_KEYS = frozenset({
    "num_workers", "num_rollout_workers", "num_env_runners", "num_gpus", "num_cpus_per_worker",
    "num_cpus_per_env_runner", "num_cpus_for_driver", "num_cpus_for_local_worker", "num_cpus_for_main_process",
    "num_gpus_per_worker", "num_gpus_per_env_runner", "framework",
})


def default_resource_request(trainer_cls: type[Trainer], config: Any) -> PlacementGroupFactory:
    """The placement-group factory of a trial of ``trainer_cls`` with ``config`` (a dict or a config builder).

    The trainer process holds ``num_cpus_for_driver`` CPUs and ``num_gpus``
    GPUs; each of ``num_workers`` rollout workers ``num_cpus_per_worker``.
    Only those settings are read, as RLlib reads them: other keys (a function
    trainable's own, such as ``"train-iterations"``) are left alone; an
    invalid resource setting is the trainer's :class:`~rltune.errors.ConfigError`.
    """
    as_dict = config.to_dict() if hasattr(config, "to_dict") and not isinstance(config, dict) else dict(config or {})
    cfg = trainer_cls.validate({key: value for key, value in as_dict.items() if key in _RESOURCE_KEYS})
    head = {"CPU": float(cfg.num_cpus_for_driver), "GPU": float(cfg.num_gpus)}
    return PlacementGroupFactory([head] + [{"CPU": float(cfg.num_cpus_per_worker)} for _ in range(cfg.num_workers)])
