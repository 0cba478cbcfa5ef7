"""The per-env recurrent state of a sampler's policy: kept between steps, reset at episode starts, recorded per step.

A sampler asks :func:`acting_function` once per fragment for the function
its step loop calls. A stateless policy gets its own ``compute_actions``
(the loop does no other work per step); a recurrent policy (one whose
``get_initial_state()`` is not empty) gets :meth:`RecurrentStates.act`,
which resets the state of every env whose episode ended at the step before
(ended, failed, or dropped for a non-finite value: each marks its row done),
calls ``compute_actions_with_state`` with the ``[N, ...]`` states and adds
the columns ``state_in_k`` (the state the step acted from) and
``state_out_k`` (the state after it) to the step's extras. After the
fragment (and any row its screening marked done at the end),
:meth:`RecurrentStates.end` resets the envs whose episode ended at its last row.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

import numpy as np

from rltune.trainers.learning._sequences import STATE_IN, STATE_OUT, state_columns
from rltune.trainers.policies._policy import Policy
from rltune.trainers.sampling._sample_batch import SampleBatch

ActFn = Callable[..., tuple[np.ndarray, dict[str, np.ndarray]]]


class RecurrentStates:
    """The recurrent states of N envs that share one policy (one ``[N, ...]`` array per state tensor)."""

    def __init__(self, policy: Policy, num_envs: int) -> None:
        self.policy = policy
        self.initial = policy.get_initial_state()
        self.states = [np.repeat(s[None], num_envs, axis=0) for s in self.initial]
        self._terminateds: Optional[np.ndarray] = None
        self._truncateds: Optional[np.ndarray] = None
        self._t = 0

    def reset(self, envs: Optional[Sequence[int]] = None) -> None:
        """Back to the initial state: every env, or those in ``envs``."""
        for state, initial in zip(self.states, self.initial):
            if envs is None:
                state[:] = initial
            else:
                state[envs] = initial

    def begin(self, terminateds: np.ndarray, truncateds: np.ndarray) -> ActFn:
        """Start a fragment whose ``[T, N]`` done flags the sampler fills in these arrays; the step function."""
        self._terminateds, self._truncateds, self._t = terminateds, truncateds, 0
        return self.act

    def act(self, obs: np.ndarray, explore: bool = True) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """The fragment's next step: actions and extras (with the state columns), as ``compute_actions`` returns them."""
        t = self._t
        if t:
            self._reset_done(t - 1)
        state_in = self.states
        actions, state_out, extras = self.policy.compute_actions_with_state(obs, state_in, explore=explore)
        self.states = [np.array(s, dtype=np.float32) for s in state_out]
        columns = dict(extras)
        for k, (before, after) in enumerate(zip(state_in, self.states)):
            columns[f"{STATE_IN}{k}"] = before
            columns[f"{STATE_OUT}{k}"] = after
        self._t = t + 1
        return actions, columns

    def end(self) -> None:
        """The fragment is over: envs whose episode ended at its last row start the next one from the initial state."""
        if self._t:
            self._reset_done(self._t - 1)
        self._terminateds = self._truncateds = None
        self._t = 0

    def _reset_done(self, t: int) -> None:
        done = self._terminateds[t] | self._truncateds[t]  # type: ignore[index]
        if done.any():
            self.reset(np.flatnonzero(done))


def acting_function(
    policy: Policy, states: Optional[RecurrentStates], num_envs: int, terminateds: np.ndarray, truncateds: np.ndarray
) -> tuple[ActFn, Optional[RecurrentStates]]:
    """The step function of a fragment (see the module docstring) and the sampler's states (None: stateless).

    ``states`` are the sampler's states so far (kept while the policy is the same one).
    """
    if not policy.is_recurrent():
        return policy.compute_actions, None
    if states is None or states.policy is not policy:
        states = RecurrentStates(policy, num_envs)
    return states.begin(terminateds, truncateds), states


def fragment_state_in(batch: SampleBatch) -> Optional[list[np.ndarray]]:
    """The state at a ``[T, K]`` fragment's start (each ``state_in_k``'s first row), or None for a stateless policy's."""
    names = state_columns(batch, STATE_IN)
    return [batch[name][0] for name in names] if names else None


def reset_states(states: Optional[RecurrentStates]) -> None:
    """Reset a sampler's states (None: a stateless policy, nothing to do)."""
    if states is not None:
        states.reset()


def end_fragment(states: Optional[RecurrentStates]) -> None:
    """:meth:`RecurrentStates.end` of a sampler's states (None: a stateless policy, nothing to do)."""
    if states is not None:
        states.end()


class AgentStates:
    """The multi-agent sampler's recurrent states, per (env index, agent id), for the policies that are recurrent.

    An agent's state starts at its policy's initial state when it first acts
    in an episode (:meth:`new_episode` forgets an env's agents) and goes on
    from its last step's ``state_out`` after that.
    """

    def __init__(self) -> None:
        self.recurrent: set[str] = set()  # the ids of the recurrent policies (refreshed once per sample call)
        self._initial: dict[str, list[np.ndarray]] = {}
        self._states: dict[tuple[int, Any], list[np.ndarray]] = {}

    def refresh(self, policies: dict[str, Policy]) -> None:
        """Look again which policies are recurrent (policies may have been added)."""
        self._initial = {pid: initial for pid, policy in policies.items() if (initial := policy.get_initial_state())}
        self.recurrent = set(self._initial)

    def new_episode(self, env_index: int) -> None:
        """Env ``env_index`` starts an episode: its agents start again from their initial states."""
        if self._states:
            self._states = {key: state for key, state in self._states.items() if key[0] != env_index}

    def act(
        self, pid: str, policy: Policy, members: list[tuple[int, Any]], obs: np.ndarray, explore: bool
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """``compute_actions_with_state`` for the acting agents ``members`` (env index, agent id) of one policy, with state columns."""
        initial = self._initial[pid]
        states = [self._states.get(member, initial) for member in members]
        state_in = [np.stack([state[k] for state in states]) for k in range(len(initial))]
        actions, state_out, extras = policy.compute_actions_with_state(obs, state_in, explore=explore)
        state_out = [np.array(s, dtype=np.float32) for s in state_out]
        for j, member in enumerate(members):
            self._states[member] = [s[j] for s in state_out]
        columns = dict(extras)
        for k, (before, after) in enumerate(zip(state_in, state_out)):
            columns[f"{STATE_IN}{k}"] = before
            columns[f"{STATE_OUT}{k}"] = after
        return actions, columns
