"""EnvRows: the row layout of single-agent envs: N envs as ``[T, N]`` columns, one batched policy forward per step.

A single-agent env is one agent mapped to ``default_policy``. This layout
is the step loop under the :class:`~._collector.EpisodeCollector` for such
envs (in the trainer's process with ``num_workers=0`` and in every rollout
worker process alike): each step, every env's observation goes through one
forward of the policy, and the fragment's columns are written in place, so
no per-agent bookkeeping runs. Non-finite rewards and observations are
screened here (``nan_policy``), as they come.
"""

from __future__ import annotations

from typing import Any, Callable

import gymnasium as gym
import numpy as np

from rltune.callbacks._callbacks import DefaultCallbacks
from rltune.callbacks._episode import Episode
from rltune.env._context import EnvContext
from rltune.errors import EnvError
from rltune.trainers.sampling._env_slots import EnvSlots
from rltune.trainers.sampling._collector import Steps
from rltune.trainers.sampling._complete_episodes import EpisodeBuffer, split_env_columns
from rltune.trainers.sampling._fragment import INFOS, Fragment, info_column
from rltune.trainers.policies._filters import MeanStdFilter
from rltune.trainers.sampling._recurrent_states import RecurrentStates, acting_function, end_fragment, fragment_state_in, reset_states
from rltune.trainers.sampling._nonfinite import NanPolicy, describe_obs, describe_reward, finite, has_floats
from rltune.trainers.policies._policy import DEFAULT_POLICY_ID, Policy
from rltune.trainers.sampling._sample_batch import (
    ACTIONS,
    NEW_OBS,
    OBS,
    REWARDS,
    TERMINATEDS,
    TRUNCATEDS,
    EpisodeMetrics,
)

_NO_INFO: dict[str, Any] = {}  # the info of a step whose env raised (shared: read only)


class EnvRows(EnvSlots):
    """The ``[T, N]`` row layout of N single-agent envs that share one policy (``default_policy``).

    ``rebuild_env(i)`` is called to replace env ``i`` after it raised, when
    ``restart_failed_sub_environments`` is on; it returns the new env.
    ``obs_filter`` (a :class:`~rltune.trainers.policies._filters.MeanStdFilter`, or
    None for NoFilter) filters each step's observations as one batch; the
    policy acts on, and the batch holds, the filtered ones.
    ``nan_policy``: what a non-finite reward or observation does (see
    :mod:`rltune.trainers.sampling._nonfinite`); both are screened as each step comes,
    observations before the filter and the policy see them.
    """

    def __init__(
        self,
        envs: list[gym.Env],
        contexts: list[EnvContext],
        policy: Policy,
        *,
        env_name: str,
        seed: int | None,
        restart_failed: bool,
        rebuild_env: Callable[[int], gym.Env],
        callbacks: DefaultCallbacks | None = None,
        worker: Any = None,
        obs_filter: MeanStdFilter | None = None,
        nan_policy: str = "raise",
    ) -> None:
        super().__init__(envs, contexts, env_name=env_name, seed=seed, restart_failed=restart_failed,
                         rebuild_env=rebuild_env, callbacks=callbacks, worker=worker)
        self.nan = NanPolicy(nan_policy)
        self._screen_obs = has_floats(policy.observation_space)
        self._dropped: list[tuple[int, int, int]] = []  # this fragment's dropped episodes: (env, first row, last row)
        self._ends: dict[tuple[int, int], EpisodeMetrics] = {}  # this fragment's ended episodes, by (step, env)
        self._start_lengths: list[int] = []  # the running episodes' lengths as this fragment started
        self.obs_filter = obs_filter
        self._obs_dtype = policy.preprocessor.dtype if obs_filter is None else np.float32  # a filter's rows are float
        self.policy = policy
        self.policies = {DEFAULT_POLICY_ID: policy}
        self.per_agent = False  # one [T, N] block: no per-trajectory fragments
        self._obs: np.ndarray | None = None
        self._returns = [0.0] * self.num_envs
        self._lengths = [0] * self.num_envs
        self._episodes: list[Episode | None] = [None] * self.num_envs
        self.episode_buffer: EpisodeBuffer | None = None  # the collector's (complete_episodes), or None
        self.episode_numbers = [0] * self.num_envs
        self._states: RecurrentStates | None = None  # a recurrent policy's per-env state (_recurrent_states.py)

    # -- env calls (seeding, retries and failure handling: EnvSlots) -------------------------
    def _reset(self, i: int, seed: int | None = None) -> Any:
        result = self._reset_env(i, seed)
        if not (isinstance(result, tuple) and len(result) == 2):
            raise EnvError(f"{self._place(i)}: reset() must return (obs, info), but returned {type(result).__name__}")
        return result

    def _start_episode(self, i: int, obs: Any, info: dict[str, Any]) -> None:
        episode = Episode(env_index=i, worker_index=self.contexts[i].worker_index, observation=obs, info=info)
        self._episodes[i] = episode
        self._call_episode_hook("on_episode_start", i, episode)

    def _new_episode(self, i: int, seed: int | None = None) -> Any:
        """Reset env ``i``, start tracking its new episode; return the raw first observation."""
        obs, info = self._reset(i, seed)
        if self._track:
            self._start_episode(i, obs, info)
        return obs

    def _first_obs(self, i: int, seed: int | None = None) -> np.ndarray:
        """Reset env ``i`` and start its next episode; its first observation, preprocessed and screened (nan_policy)."""
        for _ in range(3):
            vec = self.policy.preprocessor(self._new_episode(i, seed))
            if not self._screen_obs or finite(vec):
                return vec
            self.nan.found(self._place(i), describe_obs(vec), 0)
            seed = None
        raise EnvError(f"{self._place(i)}: reset() returned a non-finite observation 3 times in a row")

    def reset_all(self, update_filter: bool = True) -> None:
        """Start a new episode in every env (first call seeds them); in-progress episodes are dropped."""
        first = self._obs is None
        pre = self.policy.preprocessor
        obs = np.empty((self.num_envs, pre.size), dtype=self._obs_dtype)
        for i in range(self.num_envs):
            obs[i] = self._first_obs(i, self._env_seed(i) if first else None)
        if self.obs_filter is not None:
            self.obs_filter(obs, update_filter, out=obs)
        self._obs = obs
        self._returns = [0.0] * self.num_envs
        self._lengths = [0] * self.num_envs
        reset_states(self._states)
        self.episode_numbers = [0] * self.num_envs

    # -- the layout's contract (_collector.RowLayout) ------------------------------------------
    def start(self, update_filter: bool) -> None:
        """Before a ``sample()``: the first call resets (and seeds) the envs."""
        if self._obs is None:
            self.reset_all(update_filter)

    def batched(self) -> set[str]:
        """The one policy, whose steps are always kept."""
        return {DEFAULT_POLICY_ID}

    def uses_policy(self, policy_id: str) -> bool:
        """Whether the envs' agent acts with ``policy_id``."""
        return policy_id == DEFAULT_POLICY_ID

    def remap(self, mapping: Any, batched: Any) -> None:
        """The policy set changed: nothing to do, the envs' one agent always acts with ``default_policy``."""

    def episode_of(self, key: Any) -> Any:
        """The episode object of env ``key[0]``'s running episode (None unless episode hooks are overridden)."""
        return self._episodes[key[0]]

    def step(self, num_steps: int, explore: bool, batched: set[str], update_filter: bool) -> Steps:
        """Step every env ``num_steps`` times: one ``[num_steps, N]`` fragment (kept if ``batched``)."""
        batch, episodes = self._step_fragment(num_steps, explore, update_filter)
        steps = Steps(episodes, num_steps * self.num_envs)
        if batched:
            keep = self._kept(num_steps) if self._dropped else None
            steps.packed.append(Fragment(DEFAULT_POLICY_ID, batch, keep, state_in=fragment_state_in(batch)))
        return steps

    def step_into(
        self, buffer: EpisodeBuffer, num_steps: int, explore: bool, batched: set[str], update_filter: bool
    ) -> list[EpisodeMetrics]:
        """Step every env ``num_steps`` times into ``buffer``, a trajectory piece per env and episode; the episodes that ended."""
        numbers = list(self.episode_numbers)
        batch, ended = self._step_fragment(num_steps, explore, update_filter)
        done = batch[TERMINATEDS] | batch[TRUNCATEDS]
        dropped = {(i, numbers[i] + int(done[:first, i].sum())) for i, first, _ in self._dropped}
        for i, number, piece, over in split_env_columns(batch, self.episode_numbers):
            if (i, number) in dropped:
                buffer.discard_episode(i, number)
                continue
            buffer.add(DEFAULT_POLICY_ID, (i, number, None), piece, ended=over)
        return ended

    def _kept(self, num_steps: int) -> np.ndarray:
        """The fragment's rows outside its dropped episodes (``[T, N]``).

        A dropped episode's last row ends it (truncated), and the row before
        its first ended the episode before, so no recursion of the
        postprocessing (GAE, n-step returns) crosses into or out of it.
        """
        keep = np.ones((num_steps, self.num_envs), dtype=bool)
        for i, first, last in self._dropped:
            keep[first:last + 1, i] = False
        return keep

    def _step_fragment(
        self, num_steps: int, explore: bool, update_filter: bool = True
    ) -> tuple[dict[str, np.ndarray], list[EpisodeMetrics]]:
        """Step every env ``num_steps`` times: the time-major ``[num_steps, N]`` columns and the episodes that ended."""
        if self._obs is None:
            self.reset_all(update_filter)
        policy = self.policy
        pre, obs_filter = policy.preprocessor, self.obs_filter
        n = self.num_envs
        obs = self._obs
        obs_buf, new_obs_buf, actions_buf, rewards, terminateds, truncateds, act = self._fragment_buffers(num_steps)
        extras_buf: dict[str, np.ndarray] = {}
        episodes: list[EpisodeMetrics] = []
        # Per-step values are gathered in lists and written to the buffers once per step.
        step_obs: list[Any] = [None] * n
        step_rewards = [0.0] * n
        step_terminated = [False] * n
        step_truncated = [False] * n
        step_infos: list[Any] = [_NO_INFO] * n
        infos: list[list[Any]] = []

        for t in range(num_steps):
            actions, extras = act(obs, explore=explore)
            obs_buf[t] = obs
            actions_buf[t] = actions
            for key, value in extras.items():
                if key not in extras_buf:
                    extras_buf[key] = np.empty((num_steps,) + value.shape, dtype=value.dtype)
                extras_buf[key][t] = value
            env_actions = policy.to_env_actions(actions)
            failed: list[int] = []
            resets = self._step_envs(t, env_actions, step_obs, step_rewards, step_terminated, step_truncated, step_infos, failed, episodes)
            terminateds[t] = step_terminated
            truncateds[t] = step_truncated
            infos.append(step_infos[:])
            rewards[t] = step_rewards
            if obs_filter is None and not failed:  # NoFilter's usual step, inline: the next step acts on a new array
                next_obs = pre.batch(step_obs)
                new_obs_buf[t] = next_obs  # the batch's copy, with the final observations (screened at the end)
                for i in resets:
                    next_obs[i] = pre(self._new_episode(i))
                obs = next_obs if not self._screen_obs or finite(next_obs) else self._rescreen(t, next_obs, new_obs_buf[t], obs_buf[t], resets, episodes)
            else:
                obs = self._observe(t, step_obs, obs_buf[t], new_obs_buf[t], failed, resets, episodes, update_filter)
        self._obs = obs
        if self._screen_obs and obs_filter is None and not finite(new_obs_buf):
            self._drop_bad_final_obs(obs_buf, new_obs_buf, episodes)
        if not finite(rewards):  # screened once per fragment, before any use
            self._drop_bad_rewards(episodes, update_filter)
        end_fragment(self._states)

        batch = {OBS: obs_buf, ACTIONS: actions_buf, REWARDS: rewards, NEW_OBS: new_obs_buf,
                 TERMINATEDS: terminateds, TRUNCATEDS: truncateds, INFOS: info_column(infos, n), **extras_buf}
        return batch, episodes

    def _step_envs(
        self, t: int, env_actions: Any, step_obs: list[Any], step_rewards: list[Any], step_terminated: list[Any],
        step_truncated: list[Any], step_infos: list[Any], failed: list[int], episodes: list[EpisodeMetrics],
    ) -> list[int]:
        """Step every env once (step ``t``) into the ``step_*`` lists; return the envs whose episode ended (into ``episodes``)."""
        returns, lengths = self._returns, self._lengths
        envs, track = self.envs, self._track
        resets: list[int] = []
        for i in range(self.num_envs):
            try:
                step = envs[i].step(env_actions[i])
            except Exception as exc:
                self._step_failed(i, exc, failed, step_rewards, step_terminated, step_truncated, step_infos)
                continue
            try:
                next_obs, reward, terminated, truncated, info = step
            except (TypeError, ValueError):
                raise self._bad_step(i, step) from None
            step_obs[i] = next_obs
            step_rewards[i] = reward
            step_terminated[i] = terminated
            step_truncated[i] = truncated
            step_infos[i] = info
            returns[i] += reward
            lengths[i] += 1
            if track:
                episode = self._episodes[i]
                episode.add_step(env_actions[i], reward, next_obs, info)
                self._call_episode_hook("on_episode_step", i, episode)
            if terminated or truncated:
                episodes.append(self._episode_ended(i, t))
                resets.append(i)
        return resets

    def _step_failed(
        self, i: int, exc: Exception, failed: list[int], rewards: list[Any], terminated: list[Any], truncated: list[Any],
        infos: list[Any],
    ) -> None:
        """Env ``i`` raised in step() (it is rebuilt): its episode is dropped; the step is a cut (truncated) transition back to the same observation."""
        self._handle_failure(i, "step", exc)
        failed.append(i)
        rewards[i], terminated[i], truncated[i], infos[i] = 0.0, False, True, _NO_INFO
        self._returns[i], self._lengths[i] = 0.0, 0

    def _observe(
        self, t: int, step_obs: list[Any], obs: np.ndarray, new_obs: np.ndarray, failed: list[int], resets: list[int],
        episodes: list[EpisodeMetrics], update_filter: bool,
    ) -> np.ndarray:
        """Fill ``new_obs`` (step ``t``'s row) with its next observations, screened and filtered; return the ones the next step acts on.

        ``obs``: the step's own (filtered) observations, which the row of a
        failed env (or of a dropped episode) repeats; ``resets`` and failed
        envs act next on their new episode's first. The step's next
        observations and the new episodes' first ones are filtered together,
        as one batch.
        """
        pre, obs_filter = self.policy.preprocessor, self.obs_filter
        if failed:
            new_obs[:] = [obs[j] if j in failed else pre(o) for j, o in enumerate(step_obs)]
        else:
            new_obs[:] = pre.batch(step_obs)
        if self._screen_obs and not finite(new_obs):
            for i in np.flatnonzero(~np.isfinite(new_obs).all(axis=1)).tolist():
                self._drop(t, i, describe_obs(new_obs[i]), failed, resets, episodes)
                new_obs[i] = obs[i]
        restarted = resets + failed
        if obs_filter is None:
            next_obs = new_obs.copy()
            for i in restarted:
                next_obs[i] = self._first_obs(i)
            return next_obs
        if not restarted:  # the usual step
            obs_filter(new_obs, update_filter, out=new_obs)
            return new_obs.copy()
        firsts = np.array([self._first_obs(i) for i in restarted], dtype=np.float32)
        stepped: Any = [j for j in range(self.num_envs) if j not in failed] if failed else slice(None)
        rows = new_obs[stepped]  # failed envs' rows are their own obs, filtered already
        filtered = obs_filter(np.concatenate((rows, firsts)), update_filter)
        new_obs[stepped] = filtered[: len(rows)]
        next_obs = new_obs.copy()
        next_obs[restarted] = filtered[len(rows):]
        return next_obs

    def _drop_bad_rewards(self, episodes: list[EpisodeMetrics], update_filter: bool) -> None:
        """The fragment's non-finite rewards (as float32 holds them; screened once, here): raise, or drop their episodes.

        An episode whose reward was not finite is dropped whole from the
        fragment (its rows and, if it ended, its metrics); one still running
        ends here: its env is reset and the next step acts on its new
        episode's first observation. The bad rewards become 0 (their rows
        are dropped; the postprocessing sees no NaN).
        """
        rewards, terminateds, truncateds = self._columns
        done = terminateds | truncateds
        last = len(rewards) - 1
        for t, i in np.argwhere(~np.isfinite(rewards)).tolist():
            what = describe_reward(rewards[t, i])
            rewards[t, i] = 0.0
            before, after = np.flatnonzero(done[:t, i]), np.flatnonzero(done[t:, i])
            first, end = (int(before[-1]) + 1 if len(before) else 0), (t + int(after[0]) if len(after) else last)
            if any(d[0] == i and d[2] == end for d in self._dropped):
                continue  # dropped already (another bad value of the same episode)
            step = t - first + 1 + (self._start_lengths[i] if first == 0 else 0)
            self.nan.found(self._place(i), what, step)
            self._drop_rows(i, end, self._ends.get((end, i)) if len(after) else None, episodes)
            if not len(after):  # still running: it ends here, the env starts a new episode
                truncateds[end, i] = done[end, i] = True
                self._returns[i], self._lengths[i] = 0.0, 0
                first_obs = self._first_obs(i)
                self._obs[i] = first_obs if self.obs_filter is None else self.obs_filter(first_obs[None], update_filter)[0]

    def _drop(self, t: int, i: int, what: str, failed: list[int], resets: list[int], episodes: list[EpisodeMetrics]) -> None:
        """Env ``i`` gave a non-finite ``what`` at step ``t`` of the fragment: raise, or drop its episode (nan_policy).

        The episode's step ``t`` becomes a cut transition back to its own
        observation with reward 0 (as a step whose env raised), its rows of
        this fragment are left out of the batch (``_dropped``), its metrics
        are forgotten and the env is reset (as a failed one: ``failed``).
        """
        metrics = self._ends.get((t, i))  # the episode ended at this very step, or None
        self.nan.found(self._place(i), what, metrics.episode_length if metrics is not None else self._lengths[i])
        rewards, terminateds, truncateds = self._columns
        rewards[t, i], terminateds[t, i], truncateds[t, i] = 0.0, False, True
        self._drop_rows(i, t, metrics, episodes)
        if i in resets:
            resets.remove(i)
        self._returns[i], self._lengths[i] = 0.0, 0
        failed.append(i)

    def _drop_rows(self, i: int, t: int, metrics: EpisodeMetrics | None, episodes: list[EpisodeMetrics]) -> None:
        """Leave env ``i``'s episode that ends at row ``t`` out of the batch, and its metrics (if it ended) out of ``episodes``."""
        _, terminateds, truncateds = self._columns
        done = np.flatnonzero(terminateds[:t, i] | truncateds[:t, i])
        self._dropped.append((i, int(done[-1]) + 1 if len(done) else 0, t))
        if metrics is not None:
            episodes[:] = [e for e in episodes if e is not metrics]

    def _rescreen(
        self, t: int, next_obs: np.ndarray, new_obs: np.ndarray, own_obs: np.ndarray, resets: list[int], episodes: list[EpisodeMetrics]
    ) -> np.ndarray:
        """NoFilter step ``t``'s next observations (new episodes' first ones in place) hold a non-finite row: raise, or drop.

        A NoFilter step screens what the next step acts on as one array, the
        envs' next observations and the new episodes' first ones, and the
        fragment's final observations once, at its end (:meth:`_drop_bad_final_obs`).

        A new episode's bad first observation drops that episode (the env is
        reset again); an env's bad next observation drops its episode as
        :meth:`_drop` does (its ``new_obs`` row repeats its own observation).
        """
        for i in np.flatnonzero(~np.isfinite(next_obs).all(axis=1)).tolist():
            if i in resets:
                self.nan.found(self._place(i), describe_obs(next_obs[i]), 0)
            else:
                self._drop(t, i, describe_obs(next_obs[i]), [], resets, episodes)
                new_obs[i] = own_obs[i]
            next_obs[i] = self._first_obs(i)
        return next_obs

    def _drop_bad_final_obs(self, own_obs: np.ndarray, new_obs: np.ndarray, episodes: list[EpisodeMetrics]) -> None:
        """NoFilter: the fragment's non-finite final observations (screened once, here): raise, or drop their episodes.

        Those episodes ended at that row (their envs were reset then): their
        rows and metrics are left out, and the row repeats its own observation.
        """
        for t, i in np.argwhere(~np.isfinite(new_obs).all(axis=2)).tolist():
            metrics = self._ends.get((t, i))
            self.nan.found(self._place(i), describe_obs(new_obs[t, i]), metrics.episode_length if metrics is not None else 0)
            new_obs[t, i] = own_obs[t, i]
            self._drop_rows(i, t, metrics, episodes)

    def _fragment_buffers(self, num_steps: int) -> tuple[Any, ...]:
        """Empty time-major ``[num_steps, num_envs, ...]`` columns: obs, new obs, actions, rewards, terminateds, truncateds;
        and the fragment's step function (the policy's ``compute_actions``, or its recurrent states' step: ``_recurrent_states.py``).

        The fragment's rewards and flags are also kept in ``_columns`` (to drop an episode); no episode was
        dropped (``_dropped``) or ended (``_ends``, by step and env) in it yet; ``_start_lengths``: the
        running episodes' lengths as it starts.
        """
        n, policy = self.num_envs, self.policy
        obs = np.empty((num_steps, n, policy.preprocessor.size), dtype=self._obs_dtype)
        actions = np.empty((num_steps, n) + policy.action_shape, dtype=policy.action_dtype)
        self._columns = (np.zeros((num_steps, n), dtype=np.float32), np.zeros((num_steps, n), dtype=bool), np.zeros((num_steps, n), dtype=bool))
        self._dropped, self._ends, self._start_lengths = [], {}, list(self._lengths)
        act, self._states = acting_function(policy, self._states, n, self._columns[1], self._columns[2])  # once per fragment
        return (obs, np.empty_like(obs), actions, *self._columns, act)

    def _episode_ended(self, i: int, t: int) -> EpisodeMetrics:
        """The metrics of env ``i``'s episode, which just ended at step ``t`` of the fragment (its callbacks run); its counters start again."""
        ctx = self.contexts[i]
        metrics = EpisodeMetrics(float(self._returns[i]), int(self._lengths[i]), ctx.worker_index, ctx.vector_index)
        self._ends[(t, i)] = metrics
        if self._track:
            episode = self._episodes[i]
            self._call_episode_hook("on_episode_end", i, episode)
            metrics.custom_metrics = episode.custom_metrics
            metrics.hist_data = episode.hist_data
        self._returns[i] = 0.0
        self._lengths[i] = 0
        return metrics

    def _bad_step(self, i: int, step: Any) -> EnvError:
        return EnvError(
            f"{self._place(i)}: step() must return "
            f"(obs, reward, terminated, truncated, info), but returned {step!r:.200}"
        )
