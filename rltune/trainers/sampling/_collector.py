"""EpisodeCollector: the one collector of every rollout worker, single-agent and multi-agent envs alike.

The collector drives sampling: a fragment of ``num_steps`` steps per env
(``truncate_episodes``), or whole episodes of at least ``num_steps x
num_envs`` env steps (``complete_episodes``, through one
:class:`~._complete_episodes.EpisodeBuffer`), packed into raw
:class:`~._fragment.Fragment` s by policy id (one per policy, or one per
agent trajectory when postprocessing wants the episode around it), with
each policy's ``on_fragment`` hook. Evaluation, episode metrics, the
``nan_policy`` counters and env restarts read the same way whatever the env.

How an env's agents become rows is its **row layout** (:class:`RowLayout`):

- :class:`~._env_rows.EnvRows`: a single-agent env is one agent mapped to
  ``default_policy``; N envs step as ``[T, N]`` columns, one batched forward
  per step (:class:`~._vector_env_rows.VectorEnvRows`: the N sub-envs of one
  gymnasium ``VectorEnv``).
- :class:`~._agent_rows.AgentRows`: a multi-agent env's agents act through
  their mapped policies, one forward per policy per step, a trajectory per
  agent and episode (turn-based agents, agents that come and go).

A layout owns its envs' step loop (the part whose speed is the sampler's),
the per-env or per-agent recurrent states and the screening of non-finite
numbers; everything after the step loop is the collector's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Protocol

from rltune.env._context import EnvContext

from rltune.trainers.policies._policy import Policy, wants_other_agent_batches
from rltune.trainers.sampling._agent_transitions import TrajectoryKey
from rltune.trainers.sampling._complete_episodes import EpisodeBuffer, Trajectories, chunk_steps
from rltune.trainers.sampling._fragment import Fragment, pack_rows
from rltune.trainers.sampling._nonfinite import NanPolicy
from rltune.trainers.sampling._recurrent_states import fragment_state_in
from rltune.trainers.sampling._sample_batch import REWARDS, EpisodeMetrics, SampleResult


@dataclass
class Steps:
    """What a layout's steps gave: the episodes that ended, the actions computed, and the kept rows by policy.

    ``packed``: fragments already in their final ``[T, N]`` form (a dense
    layout's); ``trajectories``: per-agent trajectories the collector packs.
    """

    episodes: list[EpisodeMetrics]
    agent_steps: int
    packed: list[Fragment] = field(default_factory=list)
    trajectories: dict[str, Trajectories] = field(default_factory=dict)


class RowLayout(Protocol):
    """How a worker's envs and their agents become rows: the step loop under the :class:`EpisodeCollector`."""

    num_envs: int
    num_env_restarts: int
    contexts: list[EnvContext]
    episode_buffer: Optional[EpisodeBuffer]  # set by the collector (complete_episodes), or None
    nan: NanPolicy
    policies: dict[str, Policy]
    per_agent: bool  # rows are agent trajectories, with episode objects (postprocessing may take them one by one)
    episode_numbers: list[int]  # each env's running episode's number (its earlier ones ended)

    def start(self, update_filter: bool) -> None:
        """Before a ``sample()``: reset (and seed) the envs on the first call; refresh what may have changed."""

    def reset_all(self, update_filter: bool = True) -> None:
        """Start a new episode in every env; in-progress episodes are dropped."""

    def batched(self) -> set[str]:
        """The ids of the policies whose steps are kept (those that may be trained)."""

    def step(self, num_steps: int, explore: bool, batched: set[str], update_filter: bool) -> Steps:
        """Step every env ``num_steps`` times; keep the steps of the ``batched`` policies."""

    def step_into(
        self, buffer: EpisodeBuffer, num_steps: int, explore: bool, batched: set[str], update_filter: bool
    ) -> list[EpisodeMetrics]:
        """Step every env ``num_steps`` times into ``buffer`` (trajectory pieces by key); the episodes that ended."""

    def episode_of(self, key: TrajectoryKey) -> Any:
        """The episode object of a trajectory (per-agent layouts)."""

    def uses_policy(self, policy_id: str) -> bool:
        """Whether an agent of a running episode is mapped to ``policy_id``."""

    def remap(self, mapping: Any, batched: Callable[[], set[str]]) -> None:
        """The policy set changed: its new agent mapping, and which policies' steps are kept."""


class EpisodeCollector:
    """Collects raw fragments and episode metrics from a worker's envs, through their :class:`RowLayout`.

    ``complete_episodes``: ``batch_mode: complete_episodes`` (whole episodes
    only, see :mod:`._complete_episodes`). ``per_trajectory``: the callbacks
    override ``on_postprocess_trajectory`` (a per-agent layout then hands
    each trajectory over as a fragment of its own, with its episode).
    """

    def __init__(self, layout: RowLayout, *, complete_episodes: bool = False, per_trajectory: bool = False) -> None:
        self.layout = layout
        self.per_trajectory = per_trajectory
        self.episode_buffer: Optional[EpisodeBuffer] = EpisodeBuffer() if complete_episodes else None
        layout.episode_buffer = self.episode_buffer

    # -- what the worker reads -------------------------------------------------------------
    @property
    def num_envs(self) -> int:
        """The envs (or a VectorEnv's sub-envs) this collector steps."""
        return self.layout.num_envs

    @property
    def num_env_restarts(self) -> int:
        """Envs rebuilt after raising (``restart_failed_sub_environments``), in all."""
        return self.layout.num_env_restarts

    @property
    def nan(self) -> NanPolicy:
        """The ``nan_policy`` in force, with the number of episodes it dropped."""
        return self.layout.nan

    def uses_policy(self, policy_id: str) -> bool:
        """Whether an agent of a running episode is mapped to ``policy_id``."""
        return self.layout.uses_policy(policy_id)

    def reset_all(self, update_filter: bool = True) -> None:
        """Start a new episode in every env (the first call seeds them); in-progress episodes are dropped."""
        if self.episode_buffer is not None:
            self.episode_buffer.clear()
        self.layout.reset_all(update_filter)

    # -- sampling ------------------------------------------------------------------------------
    def sample(self, num_steps: int, explore: bool = True, collect: bool = True, update_filter: bool = True) -> SampleResult:
        """Step every env ``num_steps`` times; return the raw fragments of every batched policy and the episodes that ended.

        With ``complete_episodes`` (and ``collect``), step until whole
        episodes of at least ``num_steps x num_envs`` env steps ended, and
        return those only. ``collect``: False keeps no steps (evaluation:
        episodes only). ``update_filter``: add the observations to the
        observation filters' statistics (False: apply them frozen, as
        evaluation does).
        """
        layout = self.layout
        layout.start(update_filter)
        batched = layout.batched() if collect else set()
        if self.episode_buffer is not None and batched:
            return self._complete_episodes(num_steps, explore, batched, update_filter)
        steps = layout.step(num_steps, explore, batched, update_filter)
        result = SampleResult(episodes=steps.episodes, env_steps=num_steps * layout.num_envs, agent_steps=steps.agent_steps)
        for fragment in steps.packed:
            layout.policies[fragment.policy_id].on_fragment(fragment.columns)
        result.fragments = steps.packed + self._fragments(steps.trajectories)
        return result

    def _complete_episodes(self, num_steps: int, explore: bool, batched: set[str], update_filter: bool) -> SampleResult:
        """Step until whole episodes of at least ``num_steps x num_envs`` env steps ended; return those only."""
        buffer, layout = self.episode_buffer, self.layout
        target = num_steps * layout.num_envs
        episodes: list[EpisodeMetrics] = []
        env_steps = 0  # of the episodes that ended (the steps they took in earlier calls wait in the buffer)
        while env_steps < target:
            steps = chunk_steps(target, env_steps, layout.num_envs, num_steps)
            ended = layout.step_into(buffer, steps, explore, batched, update_filter)
            episodes.extend(ended)
            env_steps += sum(e.episode_length for e in ended)
        ready = buffer.take(batched)
        fragments = self._fragments(ready)
        numbers = layout.episode_numbers
        buffer.episodes = {key: episode for key, episode in buffer.episodes.items() if key[1] >= numbers[key[0]]}
        agent_steps = sum(len(flat[REWARDS]) for flat, _, _ in ready.values())
        return SampleResult(fragments=fragments, episodes=episodes, env_steps=env_steps, agent_steps=agent_steps)

    def _fragments(self, trajectories: dict[str, Trajectories]) -> list[Fragment]:
        """Each policy's trajectories as one packed fragment; or, for per-trajectory postprocessing, one fragment each."""
        policies = self.layout.policies
        each = self.layout.per_agent and (
            self.per_trajectory or any(wants_other_agent_batches(policies[pid]) for pid in trajectories))
        fragments = []
        for pid, (flat, keys, lengths) in trajectories.items():
            if not each:
                batch, keep = pack_rows(flat, lengths)
                policies[pid].on_fragment(batch)
                fragments.append(Fragment(pid, batch, keep, state_in=fragment_state_in(batch)))
                continue
            policies[pid].on_fragment({name: column[:, None] for name, column in flat.items()})
            start = 0
            for key, length in zip(keys, lengths):
                piece = {name: column[start:start + length, None] for name, column in flat.items()}
                start += length
                env_index, number, agent = key
                agent_key = (self.layout.contexts[env_index].worker_index, env_index, number, agent)
                fragments.append(Fragment(pid, piece, agents=[agent_key], episodes=[self.layout.episode_of(key)],
                                          state_in=fragment_state_in(piece)))
        return fragments
