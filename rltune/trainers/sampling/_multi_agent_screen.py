"""The multi-agent row layout's screening of non-finite rewards and observations (``nan_policy``).

Part of :class:`~rltune.trainers.sampling._agent_rows.AgentRows`
kept in its own module: what it screens and when is in
:mod:`rltune.trainers.sampling._nonfinite`. In a multi-agent env a step's rewards of
an env are screened before they are summed into transitions, a done agent's
final observation as it comes, and the observations agents act on as one
array per policy: before the policy's observation filter (at the end of the
step), or, without a filter, before its forward pass. A dropped episode's
trajectories are forgotten and its env reset; the agents of its new episode
act from the next step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from rltune.errors import EnvError
from rltune.trainers.sampling._nonfinite import NanPolicy, bad_reward, describe_obs, describe_reward, finite, has_floats
from rltune.trainers.policies._policy import Policy

if TYPE_CHECKING:
    from rltune.trainers.sampling._agent_rows import AgentRows

Groups = dict[str, tuple[list[tuple[int, Any]], np.ndarray]]  # policy -> (env, agent) of each row, their observations
MAX_PASSES = 4  # screening passes of one step: a pass that drops episodes screens their new ones in the next


class AgentScreen:
    """Screens a multi-agent row layout's rewards and observations; raises or drops episodes as ``nan_policy`` says."""

    def __init__(self, sampler: AgentRows, nan_policy: str) -> None:
        self.sampler = sampler
        self.nan = NanPolicy(nan_policy)
        self._screened: dict[str, tuple[Policy, bool]] = {}  # by policy id: (the policy, whether its obs may hold floats)
        self._last_drop = 0  # the env whose episode was dropped last

    def screens(self, pid: str) -> bool:
        """Whether the observations of policy ``pid`` are screened (they may hold floats)."""
        policy = self.sampler.policies[pid]
        entry = self._screened.get(pid)
        if entry is None or entry[0] is not policy:
            entry = self._screened[pid] = (policy, has_floats(policy.observation_space))
        return entry[1]

    # -- where values come in ----------------------------------------------------------------
    def dropped_for_rewards(self, i: int, rewards: dict[Any, Any]) -> bool:
        """Whether env ``i``'s step rewards, whose sum :func:`bad_reward` refused, hold a bad one (its episode then dropped)."""
        agent = next((a for a, r in rewards.items() if bad_reward(r)), self)
        if agent is self:
            return False  # a huge sum of finite rewards
        self.drop(i, describe_reward(rewards[agent]), agent)
        return True

    def dropped_for_final_obs(self, i: int, agent: Any, vec: np.ndarray) -> bool:
        """Whether a done agent's final observation (preprocessed), that :func:`finite` refused, dropped its episode."""
        if not self.screens(self.sampler._agent_policy[i][agent]):
            return False
        self.drop(i, describe_obs(vec), agent)
        return True

    def acting_groups(self) -> Groups:
        """The agents to act, by policy across every env: their (env, agent)s and observations as one array.

        The observations of a policy without a filter are screened here,
        before its forward pass (a filter's were, before the filter).
        """
        sampler = self.sampler
        for _ in range(MAX_PASSES):
            groups: dict[str, tuple[list[tuple[int, Any]], list[np.ndarray]]] = {}
            for i in range(sampler.num_envs):
                policy_of = sampler._agent_policy[i]
                for agent, vec in sampler._acting[i].items():
                    group = groups.get(policy_of[agent])
                    if group is None:
                        group = groups[policy_of[agent]] = ([], [])
                    group[0].append((i, agent))
                    group[1].append(vec)
            # rows of one policy's preprocessor: one shape (np.stack is ~3x slower here)
            arrays = {pid: (members, np.array(vecs)) for pid, (members, vecs) in groups.items()}
            bad = [pid for pid, (_, obs) in arrays.items() if pid not in sampler.filters and not finite(obs) and self.screens(pid)]
            if not bad:
                return arrays
            for pid in bad:
                members, obs = arrays[pid]
                dropped: set[int] = set()
                for row in np.flatnonzero(~np.isfinite(obs).all(axis=1)).tolist():
                    i, agent = members[row]
                    if i not in dropped:
                        dropped.add(i)
                        self.drop(i, describe_obs(obs[row]), agent)
        raise self._resets_not_finite()

    def filter_step(self) -> None:
        """Filter the step's observations in place, one batch per policy across every env, screened first.

        A non-finite row never reaches a filter: its agent's episode is
        dropped, and the first observations of the env's new episode are
        filtered in the next pass (the other rows of a dropped episode are
        filtered all the same: they are finite).
        """
        sampler = self.sampler
        for _ in range(MAX_PASSES):
            pending, sampler._unfiltered = sampler._unfiltered, {}
            for pid, vecs in pending.items():
                obs_filter = sampler.filters.get(pid)
                if obs_filter is None:
                    continue
                rows = np.stack(vecs)
                if not finite(rows) and self.screens(pid):
                    keep = np.isfinite(rows).all(axis=1)
                    self._drop_acting([vec for vec, ok in zip(vecs, keep) if not ok])
                    vecs, rows = [vec for vec, ok in zip(vecs, keep) if ok], rows[keep]
                for vec, row in zip(vecs, obs_filter(rows, sampler._update_filters)):
                    vec[:] = row
            if not sampler._unfiltered:
                return
        raise self._resets_not_finite()

    # -- dropping ----------------------------------------------------------------------------
    def drop(self, i: int, what: str, agent: Any) -> None:
        """Env ``i``'s running episode gave a non-finite ``what`` (of ``agent``): raise, or forget the episode and reset the env."""
        sampler = self.sampler
        self.nan.found(sampler._place(i), what, sampler._lengths[i], agent)
        self._last_drop = i
        number = sampler.episode_numbers[i]
        for store in sampler._store.values():
            store.drop_episode(i, number)
        if sampler.episode_buffer is not None:
            sampler.episode_buffer.discard_episode(i, number)
        sampler._open[i] = {}
        sampler._new_episode(i)

    def _drop_acting(self, vecs: list[np.ndarray]) -> None:
        """Drop the episodes of the agents that would act on these observations (those of dropped episodes are skipped)."""
        for bad in vecs:
            for i, acting in enumerate(self.sampler._acting):
                agent = next((a for a, vec in acting.items() if vec is bad), acting)
                if agent is not acting:
                    self.drop(i, describe_obs(bad), agent)
                    break

    def _resets_not_finite(self) -> EnvError:
        place = self.sampler._place(self._last_drop)
        return EnvError(f"{place}: reset() returned a non-finite observation {MAX_PASSES - 1} times in a row")
