"""EnvSlots: what every row layout does with its envs, whatever their agents: seeds, resets, failures, episode hooks.

The single-agent layout (``_env_rows.py``, and its gymnasium ``VectorEnv``
form) and the multi-agent one (``_agent_rows.py``) differ in how they act
and step; the envs they step are handled here, once: each env's
seed, a reset retried after the env raised, rebuilding a failed env (or one
clear EnvError), the place an error names, and the episode callbacks.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

import gymnasium as gym

from rltune.callbacks._callbacks import EPISODE_HOOKS, DefaultCallbacks, call_hook
from rltune.env._build import where
from rltune.env._context import EnvContext
from rltune.errors import EnvError

logger = logging.getLogger(__name__)
RESET_ATTEMPTS = 3  # a reset that raised this many times in a row ends sampling


class EnvSlots:
    """N envs by index with their contexts: seeding, resets with retries, failure handling, episode hooks.

    ``rebuild_env(i)`` is called to replace env ``i`` after it raised, when
    ``restart_failed`` (``restart_failed_sub_environments``) is on; it returns the new env.
    """

    def __init__(
        self,
        envs: list[gym.Env],
        contexts: list[EnvContext],
        *,
        env_name: str,
        seed: int | None,
        restart_failed: bool,
        rebuild_env: Callable[[int], gym.Env],
        callbacks: DefaultCallbacks | None,
        worker: Any,
    ) -> None:
        self.envs = envs
        self.contexts = contexts
        self.env_name = env_name
        self.restart_failed = restart_failed
        self.rebuild_env = rebuild_env
        self.num_envs = len(envs)
        self._seed = seed
        self.num_env_restarts = 0
        self.callbacks = callbacks or DefaultCallbacks()
        self.worker = worker
        # Episode objects exist only when an episode hook is overridden: no cost otherwise.
        self._track = any(self.callbacks.overrides(h) for h in EPISODE_HOOKS)

    def _env_seed(self, i: int) -> int | None:
        """Env ``i``'s seed for its first reset: distinct per worker and vector index (None: unseeded)."""
        if self._seed is None:
            return None
        ctx = self.contexts[i]
        return self._seed + 1000 * ctx.worker_index + ctx.vector_index

    def _place(self, i: int) -> str:
        """Env ``i`` as an error message names it."""
        return f"env {self.env_name!r} ({where(self.contexts[i])})"

    def _reset_env(self, i: int, seed: int | None = None) -> Any:
        """What env ``i``'s ``reset`` returned; an env that raised is rebuilt (or raises) and reset again, 3 times at most."""
        for _ in range(RESET_ATTEMPTS):
            try:
                # both keywords, as RLlib does: an env written reset(self, seed, options) has no defaults
                return self.envs[i].reset(seed=seed, options=None)
            except Exception as exc:
                self._handle_failure(i, "reset", exc)
        raise EnvError(f"{self._place(i)}: reset() failed {RESET_ATTEMPTS} times in a row")

    def _handle_failure(self, i: int, method: str, exc: Exception) -> None:
        """Env ``i`` raised in ``method``: rebuild it (``restart_failed``) or raise one EnvError naming it."""
        if not self.restart_failed:
            raise EnvError(
                f"{self._place(i)} raised in {method}(): {type(exc).__name__}: {exc} "
                "(set 'restart_failed_sub_environments': True to rebuild failing envs and go on)"
            ) from exc
        logger.warning("%s raised in %s(): %s: %s; rebuilding it", self._place(i), method, type(exc).__name__, exc)
        try:
            self.envs[i].close()
        except Exception:  # a broken env may fail to close too; it is dropped either way
            pass
        self.envs[i] = self.rebuild_env(i)
        self.num_env_restarts += 1

    def _call_episode_hook(self, hook: str, i: int, episode: Any) -> None:
        """The callbacks' ``hook`` (if overridden) for env ``i``'s ``episode``."""
        if self.callbacks.overrides(hook):
            place = f"worker {self.contexts[i].worker_index}, env {i}, episode {episode.episode_id}"
            call_hook(self.callbacks, hook, place, episode=episode, env=self.envs[i], env_index=i, worker=self.worker)
