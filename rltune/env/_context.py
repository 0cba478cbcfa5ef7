"""EnvContext: the ``env_config`` dict every environment is built with, plus where it runs."""

from __future__ import annotations

from typing import Any


class EnvContext(dict):
    """The user's ``env_config`` plus the position of the env in the rollout.

    It is a plain ``dict`` of the user's keys, so ``MyEnv(env_config)`` code
    written for RLlib works unchanged; the attributes say where the env runs:

    - ``worker_index``: 0 for the local worker (the trainer's process),
      1..``num_workers`` for the rollout worker processes, ``num_workers + 1``
      for the evaluation envs (``evaluate()``, in the trainer's process).
    - ``vector_index``: index of the env among the worker's
      ``num_envs_per_worker`` envs.
    - ``num_workers``: number of remote rollout workers of the trainer.
    - ``recreated``: True when the env was rebuilt after it raised.
    """

    def __init__(
        self,
        env_config: dict[str, Any] | None = None,
        *,
        worker_index: int = 0,
        vector_index: int = 0,
        num_workers: int = 0,
        recreated: bool = False,
    ) -> None:
        super().__init__(env_config or {})
        self.worker_index = worker_index
        self.vector_index = vector_index
        self.num_workers = num_workers
        self.recreated = recreated

    def copy_with_overrides(self, **attributes: Any) -> "EnvContext":
        """A copy with the same keys and some attributes changed (e.g. ``vector_index=2``)."""
        fields = {
            "worker_index": self.worker_index,
            "vector_index": self.vector_index,
            "num_workers": self.num_workers,
            "recreated": self.recreated,
        }
        fields.update(attributes)
        return EnvContext(dict(self), **fields)

    def __repr__(self) -> str:
        return (
            f"EnvContext({dict.__repr__(self)}, worker_index={self.worker_index}, "
            f"vector_index={self.vector_index}, num_workers={self.num_workers})"
        )
