"""AgentRows: the row layout of multi-agent envs: one batched forward per policy per step, one trajectory per agent.

The step loop under the :class:`~._collector.EpisodeCollector` for
multi-agent envs (the collector packs the trajectories into fragments and
runs ``complete_episodes``).

Each step, the agents that must act (those in the env's latest observation
dict) are grouped by the policy they were mapped to, across all the envs of
the worker, and each policy computes their actions in one forward pass.

A transition of an agent runs from its action to its next observation; the
rewards the env gives the agent in between (also while it does not act, in
a turn-based game) are summed into it. A transition still open when a
fragment ends (the agent acted and has not observed since) moves to the
next fragment. At the end of a fragment each policy's transitions are
grouped into trajectories, one per agent and episode, which the collector
packs into the time-major ``[T, K]`` columns of one raw :class:`~._fragment.Fragment`
(the last step of a trajectory cut by the fragment end is marked truncated,
so it bootstraps from its next observation; padding rows are not kept),
which the algorithm postprocesses in one call. Rewards and observations are screened
for non-finite numbers as they come (``nan_policy``, :mod:`._multi_agent_screen`).
"""

from __future__ import annotations

import logging
from typing import Any, Callable

import gymnasium as gym
import numpy as np

from rltune.callbacks._callbacks import DefaultCallbacks
from rltune.callbacks._episode import MultiAgentEpisode
from rltune.env._context import EnvContext
from rltune.env._multi_agent import ALL
from rltune.env._multi_agent_check import done_agent_observed, unpack_reset, unpack_step
from rltune.errors import EnvError
from rltune.trainers.policies._filters import Filters
from rltune.trainers.sampling._multi_agent_screen import AgentScreen
from rltune.trainers.sampling._nonfinite import bad_reward, finite
from rltune.trainers.sampling._agent_transitions import (
    TrajectoryKey,
    Transitions,
    in_trajectory_order,
)
from rltune.trainers.sampling._collector import Steps
from rltune.trainers.sampling._env_slots import EnvSlots
from rltune.trainers.sampling._complete_episodes import EpisodeBuffer, Trajectories
from rltune.trainers.sampling._recurrent_states import AgentStates
from rltune.trainers.policies._policy import Policy
from rltune.trainers.policies._policy_spec import PolicyMapping
from rltune.trainers.policies._space_fit import check_fit
from rltune.trainers.sampling._sample_batch import EpisodeMetrics, SampleBatch

logger = logging.getLogger(__name__)
_NONE: dict[Any, Any] = {}  # no fast-path preprocessors

class AgentRows(EnvSlots):
    """The per-agent row layout of N multi-agent envs whose agents act through a map of policies.

    ``batched`` names the policies whose transitions are kept and
    postprocessed (those that may be trained); the others only act.
    ``rebuild_env(i)`` replaces env ``i`` after it raised, when
    ``restart_failed_sub_environments`` is on. ``filters`` (the worker's, by
    policy id; none for NoFilter) filter the observations of each policy's
    agents, all those of one step (every env's) as one batch.
    ``policy_spaces``: the spaces each policy was built with, which its agents must fit.
    """

    def __init__(
        self,
        envs: list[gym.Env],
        contexts: list[EnvContext],
        policies: dict[str, Policy],
        mapping: PolicyMapping,
        *,
        batched: Callable[[], set[str]],
        env_name: str,
        seed: int | None,
        restart_failed: bool,
        rebuild_env: Callable[[int], gym.Env],
        callbacks: DefaultCallbacks | None = None,
        worker: Any = None,
        filters: Filters | None = None,
        policy_spaces: dict[str, tuple[gym.Space, gym.Space]] | None = None,
        nan_policy: str = "raise",
        observation_fn: Any = None,
    ) -> None:
        super().__init__(envs, contexts, env_name=env_name, seed=seed, restart_failed=restart_failed,
                         rebuild_env=rebuild_env, callbacks=callbacks, worker=worker)
        self.observation_fn = observation_fn  # an ObservationFn (_observation_fn.py), or None
        self.screen = AgentScreen(self, nan_policy)
        self.nan = self.screen.nan
        self.filters = filters if filters is not None else {}
        self._update_filters = True
        self._unfiltered: dict[str, list[np.ndarray]] = {}  # this step's observations, by policy, until filtered
        self.policies = policies
        self.mapping = mapping
        self.batched = batched
        self.per_agent = True
        self._started = False
        self._agent_states = AgentStates()  # recurrent policies' per-(env, agent) states (_recurrent_states.py)
        n = self.num_envs
        self._episodes: list[MultiAgentEpisode | None] = [None] * n
        self.episode_numbers = [0] * n
        self._agent_policy: list[dict[Any, str]] = [{} for _ in range(n)]
        self._agent_preprocessor: list[dict[Any, Callable[[Any], np.ndarray]]] = [{} for _ in range(n)]  # by mapping
        self._acting: list[dict[Any, np.ndarray]] = [{} for _ in range(n)]  # agents to act next: their preprocessed obs
        self._open: list[dict[Any, tuple[str, int]]] = [{} for _ in range(n)]  # agents' open transitions
        self._agent_returns: list[dict[Any, float]] = [{} for _ in range(n)]
        self._held: list[dict[Any, float]] = [{} for _ in range(n)]  # rewards of agents yet to act in the episode
        self._done_at: list[dict[Any, int]] = [{} for _ in range(n)]  # agents done in the episode: the step
        self.policy_spaces = policy_spaces if policy_spaces is not None else {}
        self._fitted: dict[tuple[Any, str], tuple] = {}  # (agent, policy id) pairs checked, with the spaces they fit
        self._unobserved_warned: set[Any] = set()
        self._lengths = [0] * n
        self._store: dict[str, Transitions] = {}
        self.episode_buffer: EpisodeBuffer | None = None  # the collector's (complete_episodes), or None

    def uses_policy(self, policy_id: str) -> bool:
        """Whether an agent of a running episode is mapped to ``policy_id``."""
        return any(policy_id in mapped.values() for mapped in self._agent_policy)

    def remap(self, mapping: PolicyMapping, batched: Callable[[], set[str]]) -> None:
        """The policy set changed: agents of new episodes map through ``mapping``; ``batched`` names the policies kept."""
        self.mapping, self.batched = mapping, batched

    # -- episodes -------------------------------------------------------------------------
    def _policy_of(self, i: int, agent: Any) -> str:
        pid = self._agent_policy[i].get(agent)
        if pid is None:
            pid = self.mapping(agent, self._episodes[i], self.worker)
            spaces = self.policy_spaces.get(pid)
            if spaces is not None and self._fitted.get((agent, pid)) is not spaces:
                check_fit(self.envs[i], agent, pid, spaces, self.env_name, observations=self.observation_fn is None)
                self._fitted[(agent, pid)] = spaces
            self._agent_policy[i][agent] = pid
            self._agent_preprocessor[i][agent] = self.policies[pid].preprocessor
            self._episodes[i].set_policy(agent, pid)
        return pid

    def _new_episode(self, i: int, seed: int | None = None) -> None:
        """Reset env ``i`` and start its next episode (its agents to act, their policies)."""
        obs, infos = unpack_reset(self._reset_env(i, seed), self.env_name, self.contexts[i])
        if not obs:
            raise EnvError(f"{self._place(i)}: reset() returned no observation, so no agent can act")
        episode = MultiAgentEpisode(env_index=i, worker_index=self.contexts[i].worker_index, observation=obs, info=infos or {})
        self._episodes[i] = episode
        self.episode_numbers[i] += 1
        if self.episode_buffer is not None:  # its trajectories may be postprocessed after it ended
            self.episode_buffer.episodes[(i, self.episode_numbers[i])] = episode
        self._agent_policy[i] = {}
        self._agent_preprocessor[i] = {}
        self._agent_states.new_episode(i)
        self._agent_returns[i] = {}
        self._held[i], self._done_at[i] = {}, {}
        self._open[i] = {}
        self._lengths[i] = 0
        if self.observation_fn is not None:
            obs = self.observation_fn(obs, self.envs[i], episode, lambda a: self._policy_of(i, a), self._place(i))
        self._acting[i] = {agent: self._preprocess(i, agent, o) for agent, o in obs.items()}
        self._hook("on_episode_start", i)

    def _preprocess(self, i: int, agent: Any, obs: Any) -> np.ndarray:
        pid = self._policy_of(i, agent)
        policy = self.policies[pid]
        try:
            vec = policy.preprocessor(obs)
        except Exception as exc:
            raise EnvError(
                f"{self._place(i)}: the observation of agent {agent!r} does not fit the observation space "
                f"{policy.observation_space} of its policy {pid!r}: {type(exc).__name__}: {exc}"
            ) from exc
        if pid in self.filters:
            vec = vec.astype(np.float32)  # its own float memory (not the env's array): filtered in place at the end of the step
            self._unfiltered.setdefault(pid, []).append(vec)
        return vec

    def _hook(self, hook: str, i: int) -> None:
        self._call_episode_hook(hook, i, self._episodes[i])

    def _episode_ended(self, i: int) -> EpisodeMetrics:
        returns = self._agent_returns[i]
        metrics = EpisodeMetrics(
            float(sum(returns.values())), self._lengths[i], self.contexts[i].worker_index, self.contexts[i].vector_index
        )
        metrics.agent_rewards = [(a, pid, float(r)) for a, r in returns.items() if (pid := self._agent_policy[i].get(a))]
        unobserved = [a for a in self._held[i] if a not in self._agent_policy[i] and a not in self._unobserved_warned]
        if unobserved:  # counted in the episode's reward only: no policy acted for them (warned once per agent)
            self._unobserved_warned.update(unobserved)
            logger.warning("%s: agents %s got rewards but no observation in an episode: their rewards count in the "
                           "episode's reward only (no policy's batch or policy_reward_mean)", self._place(i), unobserved)
        if self._track:
            self._hook("on_episode_end", i)
            metrics.custom_metrics = self._episodes[i].custom_metrics
            metrics.hist_data = self._episodes[i].hist_data
        return metrics

    def reset_all(self, update_filter: bool = True) -> None:
        """Start a new episode in every env (first call seeds them); in-progress episodes are dropped."""
        first = not self._started
        self._started = True
        self._store = {}
        self._update_filters = update_filter
        self._unfiltered = {}
        for i in range(self.num_envs):
            self._new_episode(i, self._env_seed(i) if first else None)
        self.screen.filter_step()

    # -- the layout's contract (_collector.RowLayout) ------------------------------------------
    def start(self, update_filter: bool) -> None:
        """Before a ``sample()``: the first call resets (and seeds) the envs; which policies are recurrent, again."""
        if not self._started:
            self.reset_all(update_filter)
        self._update_filters = update_filter
        self._agent_states.refresh(self.policies)  # once per call: policies may have been added

    def step(self, num_steps: int, explore: bool, batched: set[str], update_filter: bool) -> Steps:
        """Step every env ``num_steps`` times; the closed trajectories of the ``batched`` policies (open ones carry on)."""
        for pid in batched:
            self._store.setdefault(pid, Transitions())
        episodes: list[EpisodeMetrics] = []
        agent_steps = 0
        for _ in range(num_steps):
            agent_steps += self._act_and_step(explore, batched, episodes)
        steps = Steps(episodes, agent_steps)
        if batched:
            steps.trajectories = self._closed_trajectories(batched)
        else:
            self._store = {}
        return steps

    def step_into(
        self, buffer: EpisodeBuffer, num_steps: int, explore: bool, batched: set[str], update_filter: bool
    ) -> list[EpisodeMetrics]:
        """Step every env ``num_steps`` times into ``buffer``, a trajectory piece per agent and episode; the episodes that ended."""
        steps = self.step(num_steps, explore, batched, update_filter)
        numbers = self.episode_numbers
        ended = lambda episode: episode[1] < numbers[episode[0]]  # noqa: E731 - (env index, number)
        for pid, (flat, keys, lengths) in steps.trajectories.items():
            start = 0
            for key, length in zip(keys, lengths):
                piece = {name: column[start:start + length] for name, column in flat.items()}
                buffer.add(pid, key, piece, ended=ended(key[:2]))
                start += length
        buffer.end_episodes(ended)
        return steps.episodes

    def _act_and_step(self, explore: bool, batched: set[str], episodes: list[EpisodeMetrics]) -> int:
        action_dicts: list[dict[Any, Any]] = [{} for _ in range(self.num_envs)]
        steps = 0
        for pid, (members, obs) in self.screen.acting_groups().items():
            policy = self.policies[pid]
            if pid in self._agent_states.recurrent:
                actions, extras = self._agent_states.act(pid, policy, members, obs, explore)
            else:
                actions, extras = policy.compute_actions(obs, explore=explore)
            env_actions = policy.to_env_actions(actions)
            if pid in batched:
                store = self._store[pid]
                numbers = self.episode_numbers
                first = store.open_rows([(i, numbers[i], agent) for i, agent in members], store.add_chunk(obs, actions, extras))
                for j, (i, agent) in enumerate(members):
                    action_dicts[i][agent] = env_actions[j]
                    self._open[i][agent] = (pid, first + j)
                    if agent in self._held[i]:  # rewards it got before its first observation: on its first transition
                        store.rewards[first + j] += self._held[i].pop(agent)
            else:
                for j, (i, agent) in enumerate(members):
                    action_dicts[i][agent] = env_actions[j]
            steps += len(members)
        for i in range(self.num_envs):
            self._step_env(i, action_dicts[i], episodes)
        if self._unfiltered:
            self.screen.filter_step()
        return steps

    def _step_env(self, i: int, actions: dict[Any, Any], episodes: list[EpisodeMetrics]) -> None:
        try:
            step = self.envs[i].step(actions)
        except Exception as exc:
            self._handle_failure(i, "step", exc)
            self._end_episode(i, {}, {}, cut=True)  # dropped; its open transitions end cut
            self._new_episode(i)
            return
        obs, rewards, terminateds, truncateds, infos = unpack_step(step, self.env_name, self.contexts[i])
        infos = infos or {}
        if self.observation_fn is not None and obs:
            obs = self.observation_fn(obs, self.envs[i], self._episodes[i], lambda a: self._policy_of(i, a), self._place(i))
        self._lengths[i] += 1
        if bad_reward(sum(rewards.values())) and self.screen.dropped_for_rewards(i, rewards):
            return
        returns = self._agent_returns[i]
        open_ = self._open[i]
        policy_of = self._agent_policy[i]
        for agent, reward in rewards.items():
            returns[agent] = returns.get(agent, 0.0) + reward
            opened = open_.get(agent)
            if opened is not None:
                self._store[opened[0]].rewards[opened[1]] += reward
            elif agent not in policy_of:  # not observed yet in this episode: held for its first transition
                self._held[i][agent] = self._held[i].get(agent, 0.0) + reward
        if self._track:
            self._episodes[i].add_multi_agent_step(actions, rewards, obs, infos)
        all_terminated = bool(terminateds.get(ALL, False))
        over = all_terminated or bool(truncateds.get(ALL, False))
        acting: dict[Any, np.ndarray] = {}
        # With observation filters every obs takes _preprocess, which also collects it for its policy's filter.
        preprocessors = self._agent_preprocessor[i] if not self.filters else _NONE
        done_at = self._done_at[i]
        for agent, o in obs.items():
            if agent in done_at:
                raise EnvError(f"{self._place(i)}, step {self._lengths[i]} of an episode: {done_agent_observed(agent, done_at[agent])}")
            try:
                vec = preprocessors[agent](o)
            except Exception:  # not mapped yet, filtered, or an obs that does not fit: the slow path maps or explains
                vec = self._preprocess(i, agent, o)
            terminated = bool(terminateds.get(agent, False))
            done = terminated or bool(truncateds.get(agent, False))
            if not (done or over):
                acting[agent] = vec
            elif not finite(vec) and self.screen.dropped_for_final_obs(i, agent, vec):
                return
            opened = open_.pop(agent, None)
            if opened is not None:
                terminated = terminated or all_terminated
                self._store[opened[0]].close(opened[1], vec, terminated, (done or over) and not terminated, infos.get(agent, _NONE))
        for flags in (terminateds, truncateds):  # agents done (and those that left without a final observation)
            for agent, flag in flags.items():
                if flag and agent != ALL:
                    done_at.setdefault(agent, self._lengths[i])
                    if agent in open_:
                        self._close_without_obs(i, agent, terminateds)
        self._acting[i] = acting
        if self._track:
            self._hook("on_episode_step", i)
        if over:
            self._end_episode(i, terminateds, truncateds, cut=False)
            episodes.append(self._episode_ended(i))
            self._new_episode(i)
        elif not acting:
            raise EnvError(
                f"{self._place(i)}: step() returned no observation for any agent, but the episode is not over "
                f"(set terminateds['{ALL}'] or truncateds['{ALL}'] to True to end it)"
            )

    def _close_without_obs(self, i: int, agent: Any, terminateds: dict[Any, Any]) -> None:
        pid, tid = self._open[i].pop(agent)
        store = self._store[pid]
        terminated = bool(terminateds.get(agent, False) or terminateds.get(ALL, False))
        store.close(tid, None, terminated, not terminated)

    def _end_episode(self, i: int, terminateds: dict[Any, Any], truncateds: dict[Any, Any], *, cut: bool) -> None:
        """Close the open transitions of env ``i``'s episode (terminated if the env said so, else truncated)."""
        for agent in list(self._open[i]):
            if cut:
                pid, tid = self._open[i].pop(agent)
                store = self._store[pid]
                store.close(tid, None, False, True)
            else:
                self._close_without_obs(i, agent, terminateds)

    # -- fragments ----------------------------------------------------------------------
    def _closed_trajectories(self, batched: set[str]) -> dict[str, Trajectories]:
        """Each policy's closed transitions of the fragment as trajectories; open ones move to the next fragment."""
        old = self._store
        self._store = {pid: Transitions() for pid in batched}
        trajectories: dict[str, tuple[SampleBatch, list[TrajectoryKey], list[int]]] = {}
        computed = {pid: store.computed() for pid, store in old.items() if store.chunks}
        for pid, store in old.items():
            closed = store.closed_trajectories()
            if closed:
                trajectories[pid] = in_trajectory_order(store.columns(computed[pid]), closed)
        self._carry_open_transitions(old, computed)
        return trajectories

    def episode_of(self, key: TrajectoryKey) -> Any:
        """The episode object of a trajectory (for ``on_postprocess_trajectory`` and centralized critics)."""
        env_index, number, _ = key
        episode = self._episodes[env_index]
        if self.episode_buffer is not None:  # complete episodes: the episode may have ended since
            episode = self.episode_buffer.episodes.get((env_index, number), episode)
        return episode

    def _carry_open_transitions(self, old: dict[str, Transitions], computed: dict[str, Any]) -> None:
        """The transitions still open (the agent acted, has not observed since) start the next fragment."""
        carried: dict[str, list[tuple[int, Any, int]]] = {}
        for i in range(self.num_envs):
            for agent, (pid, tid) in self._open[i].items():
                carried.setdefault(pid, []).append((i, agent, tid))
        for pid, items in carried.items():
            store, new = old[pid], self._store.setdefault(pid, Transitions())
            rows = np.asarray([store.rows[tid] for _, _, tid in items], dtype=np.int64)
            obs, actions, extras = computed[pid]
            first = new.add_chunk(obs[rows], actions[rows], {name: v[rows] for name, v in extras.items()})
            for k, (i, agent, tid) in enumerate(items):
                key = (i, self.episode_numbers[i], agent)
                self._open[i][agent] = (pid, new.open(key, first + k, store.rewards[tid]))
