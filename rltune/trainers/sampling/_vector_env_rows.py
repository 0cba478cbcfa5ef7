"""VectorEnvRows: the row layout of a gymnasium ``VectorEnv``: its sub-envs stepped by ONE ``step(actions)`` call per step.

:class:`VectorEnvRows` is the :class:`~rltune.trainers.sampling._env_rows.EnvRows`
layout with another way to step and reset: everything else (buffers,
episode metrics, callbacks, nan screening, observation filters) is the
list-of-envs layout's, per sub-env, and the collector's
(``complete_episodes``, fragments).

gymnasium's autoreset modes (``metadata['autoreset_mode']``):

- ``NEXT_STEP`` (the default): the step after a sub-env's episode ended
  resets it and ignores its action. That step's row is left out of the
  batch (a cut row, dropped like a nan-dropped episode's) and is no step of
  any episode (it still counts in the sampled timesteps: the vector env was
  stepped); the new episode starts with the observation it returned.
- ``SAME_STEP``: the step that ends an episode returns the new episode's
  first observation; the final one is ``infos['final_obs']``.
- ``DISABLED``: the sub-envs whose episode ended are reset together with
  ``reset(options={'reset_mask': mask})``.

A sub-env is restarted out of turn (a dropped episode, see ``nan_policy``)
with that masked reset, in any mode.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import concatenate, create_empty_array, iterate

from rltune.env._context import EnvContext
from rltune.env._vector import autoreset_mode, sub_info
from rltune.errors import EnvError
from rltune.trainers.policies._policy import Policy
from rltune.trainers.sampling._sample_batch import EpisodeMetrics
from rltune.trainers.sampling._env_rows import EnvRows

_ARRAY_SPACES = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)


class VectorEnvRows(EnvRows):
    """The ``[T, N]`` row layout of the N sub-envs of one gymnasium ``VectorEnv`` (see the module's doc)."""

    def __init__(self, env: VectorEnv, contexts: list[EnvContext], policy: Policy, **options: Any) -> None:
        options["restart_failed"] = False  # refused with a vector env (vector_config_problem)
        super().__init__([env] * len(contexts), contexts, policy, **options)
        self.vector_env = env
        self.mode = autoreset_mode(env, self.env_name)
        obs_space, act_space = env.single_observation_space, env.single_action_space
        # Chosen once: a Box observation's rows are the sub-envs' observations; other spaces are split.
        self._split: Callable[[Any], Any] = (
            (lambda obs: obs) if isinstance(obs_space, spaces.Box) else (lambda obs: list(iterate(obs_space, obs)))
        )
        self._act_space = act_space
        self._act_out = create_empty_array(act_space, self.num_envs)
        self._pending: dict[int, tuple[Any, dict[str, Any]]] = {}  # sub-envs' next first observation and info
        self._autoresetting: set[int] = set()  # NEXT_STEP: sub-envs whose next step is their reset

    def _where(self) -> str:
        return f"env {self.env_name!r} (worker {self.contexts[0].worker_index}, a VectorEnv of {self.num_envs} sub-envs)"

    def _vector_reset(self, seed: int | None, mask: np.ndarray | None) -> tuple[Any, dict[str, Any]]:
        """``reset`` of the vector env (only the sub-envs in ``mask``, if given); its (observations, infos)."""
        options = None if mask is None else {"reset_mask": mask}
        try:
            result = self.vector_env.reset(seed=seed, options=options)
        except Exception as exc:
            how = "reset()" if mask is None else f"reset(options={{'reset_mask': {mask.tolist()}}})"
            raise EnvError(f"{self._where()} raised in {how}: {type(exc).__name__}: {exc}") from exc
        if not (isinstance(result, tuple) and len(result) == 2):
            raise EnvError(f"{self._where()}: reset() must return (obs, infos), but returned {type(result).__name__}")
        obs, infos = result
        return self._split(obs), infos or {}

    def reset_all(self, update_filter: bool = True) -> None:
        """Reset the vector env (the first call seeds sub-env ``i`` with the seed a list's env ``i`` gets); in-progress episodes are dropped."""
        first = self._obs is None
        # One int seed: gymnasium seeds sub-env i with seed + i, as the list of envs is seeded.
        obs, infos = self._vector_reset(self._env_seed(0) if first else None, None)
        self._pending = {i: (obs[i], sub_info(infos, i)) for i in range(self.num_envs)}
        self._autoresetting.clear()
        super().reset_all(update_filter)

    def _reset(self, i: int, seed: int | None = None) -> Any:
        """Sub-env ``i``'s new first observation and info: the one the vector env gave, else a masked reset of it alone."""
        pending = self._pending.pop(i, None)
        if pending is not None:
            return pending
        mask = np.zeros(self.num_envs, dtype=bool)
        mask[i] = True
        obs, infos = self._vector_reset(None, mask)
        self._autoresetting.discard(i)
        return obs[i], sub_info(infos, i)

    def _batched_actions(self, env_actions: list[Any]) -> Any:
        if isinstance(self._act_space, _ARRAY_SPACES):
            return np.asarray(env_actions, dtype=self._act_space.dtype)
        return concatenate(self._act_space, env_actions, self._act_out)

    def _step_envs(
        self, t: int, env_actions: Any, step_obs: list[Any], step_rewards: list[Any], step_terminated: list[Any],
        step_truncated: list[Any], step_infos: list[Any], failed: list[int], episodes: list[EpisodeMetrics],
    ) -> list[int]:
        """One ``step`` of the vector env (step ``t``) into the ``step_*`` lists; return the sub-envs whose episode ended and that reset now."""
        try:
            result = self.vector_env.step(self._batched_actions(env_actions))
        except Exception as exc:
            raise EnvError(f"{self._where()} raised in step(): {type(exc).__name__}: {exc}") from exc
        try:
            obs, rewards, terminateds, truncateds, infos = result
        except (TypeError, ValueError):
            raise EnvError(f"{self._where()}: step() must return (obs, rewards, terminateds, truncateds, infos), "
                           f"but returned {result!r:.200}") from None
        obs, infos = self._split(obs), infos or {}
        same_step, track = self.mode is AutoresetMode.SAME_STEP, self._track
        returns, lengths, resets = self._returns, self._lengths, []
        for i in range(self.num_envs):
            if i in self._autoresetting:  # NEXT_STEP: this step reset sub-env i and ignored its action
                self._reset_row(t, i, obs[i], sub_info(infos, i), step_obs, step_rewards, step_terminated, step_truncated, step_infos)
                continue
            reward, terminated, truncated = float(rewards[i]), bool(terminateds[i]), bool(truncateds[i])
            done = terminated or truncated
            if done and same_step:
                next_obs, info = self._final_obs(infos, i), sub_info(infos.get("final_info", {}), i)
            else:
                next_obs, info = obs[i], sub_info(infos, i)
            step_obs[i], step_rewards[i], step_terminated[i], step_truncated[i], step_infos[i] = (
                next_obs, reward, terminated, truncated, info)
            returns[i] += reward
            lengths[i] += 1
            if track:
                self._track_step(i, env_actions[i], reward, next_obs, info)
            if done:
                episodes.append(self._episode_ended(i, t))
                self._after_episode(i, obs[i], infos, resets)
        if resets and self.mode is AutoresetMode.DISABLED:
            mask = np.zeros(self.num_envs, dtype=bool)
            mask[resets] = True
            first, first_infos = self._vector_reset(None, mask)
            self._pending.update((i, (first[i], sub_info(first_infos, i))) for i in resets)
        return resets

    def _final_obs(self, infos: dict[str, Any], i: int) -> Any:
        """SAME_STEP: sub-env ``i``'s final observation, from ``infos['final_obs']``."""
        try:
            return infos["final_obs"][i]
        except (KeyError, IndexError, TypeError):
            raise EnvError(f"{self._where()}: its autoreset mode is SAME_STEP, but the infos of the step that ended "
                           f"sub-env {i}'s episode hold no infos['final_obs'][{i}] (its final observation)") from None

    def _track_step(self, i: int, action: Any, reward: float, obs: Any, info: dict[str, Any]) -> None:
        """Sub-env ``i``'s step into its episode object; ``on_episode_step``."""
        episode = self._episodes[i]
        episode.add_step(action, reward, obs, info)
        self._call_episode_hook("on_episode_step", i, episode)

    def _after_episode(self, i: int, obs: Any, infos: dict[str, Any], resets: list[int]) -> None:
        """Sub-env ``i``'s episode ended: how its next one starts, by autoreset mode."""
        if self.mode is AutoresetMode.NEXT_STEP:
            self._autoresetting.add(i)  # its next step resets it; it acts once more on its final observation
            return
        if self.mode is AutoresetMode.SAME_STEP:
            self._pending[i] = (obs, sub_info(infos, i))  # the vector env reset it already
        resets.append(i)

    def _reset_row(
        self, t: int, i: int, obs: Any, info: dict[str, Any], step_obs: list[Any], step_rewards: list[Any],
        step_terminated: list[Any], step_truncated: list[Any], step_infos: list[Any],
    ) -> None:
        """NEXT_STEP's reset step of sub-env ``i``: a cut row left out of the batch; its new episode starts with ``obs``."""
        self._autoresetting.discard(i)
        step_obs[i], step_rewards[i], step_terminated[i], step_truncated[i], step_infos[i] = obs, 0.0, False, True, info
        self._dropped.append((i, t, t))
        if self._track:
            self._start_episode(i, obs, info)
