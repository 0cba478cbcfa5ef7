"""Learning-side postprocessing: raw fragments from a sample source to flat training batches, where the learner is.

Each policy's fragments become one time-major ``[T, K]`` batch and one call
of its ``postprocess_trajectory`` (value bootstraps, GAE, n-step returns)
with the learner's own policy, whatever source and process they came from.
Trajectory by trajectory instead, with the other agents' batches of the same
episode, when the policy's ``postprocess_trajectory`` takes
``other_agent_batches`` (a centralized critic) or the callbacks override
``on_postprocess_trajectory`` (the source then hands each agent trajectory
over as a fragment of its own, with its episode).
"""

from __future__ import annotations

from typing import Any

from rltune.callbacks._callbacks import DefaultCallbacks, call_hook
from rltune.trainers.policies._policy import Policy, wants_other_agent_batches
from rltune.trainers.learning._sequences import SEQ_STARTS, env_major
from rltune.trainers.sampling._fragment import INFOS, Fragment, stack_fragments
from rltune.trainers.sampling._sample_batch import SampleBatch, concat_batches


class Postprocessor:
    """Postprocesses fragments with the learner-side policies; ``callbacks``' ``on_postprocess_trajectory`` sees each trajectory.

    ``worker``: what the hook gets as its ``worker`` argument (the trainer's local rollout worker).
    """

    def __init__(self, callbacks: DefaultCallbacks | None = None, worker: Any = None) -> None:
        self.callbacks = callbacks or DefaultCallbacks()
        self.worker = worker

    def __call__(self, policies: dict[str, Policy], fragments: list[Fragment]) -> dict[str, SampleBatch]:
        """Flat training batches by policy id, of the fragments of ``policies`` (others are skipped)."""
        by_policy: dict[str, list[Fragment]] = {}
        for fragment in fragments:
            if fragment.policy_id in policies and fragment.shape[0]:
                by_policy.setdefault(fragment.policy_id, []).append(fragment)
        hook = self.callbacks.overrides("on_postprocess_trajectory")
        batches = {}
        for pid, mine in by_policy.items():
            policy = policies[pid]
            each = [f for f in mine if f.agents is not None] if hook or wants_other_agent_batches(policy) else []
            stacked = [f for f in mine if f.agents is None] if each else mine
            parts = [self._each(pid, policy, each, fragments, policies, hook)] if each else []
            if stacked:
                parts.append(_without_infos(postprocess_stacked(policy, stacked)))
            batch = concat_batches(parts)
            if len(next(iter(batch.values()), ())):
                batches[pid] = batch
        return batches

    def _each(
        self, pid: str, policy: Policy, mine: list[Fragment], everyone: list[Fragment], policies: dict[str, Policy], hook: bool
    ) -> SampleBatch:
        """One call per agent trajectory, with the other agents' (flat) batches of its episode, by agent id, as ``(policy_id, batch)``."""
        by_episode: dict[tuple[int, int, int], list[tuple[Any, str, SampleBatch]]] = {}
        for fragment in everyone:
            for k, key in enumerate(fragment.agents or ()):
                flat = {name: column[:, k] for name, column in fragment.columns.items()}
                by_episode.setdefault(key[:3], []).append((key[3], fragment.policy_id, flat))
        wants_others = wants_other_agent_batches(policy)
        processed = []
        for fragment in mine:
            for k, key in enumerate(fragment.agents):
                agent = key[3]
                others = {a: (other_pid, flat) for a, other_pid, flat in by_episode.get(key[:3], ()) if a != agent}
                piece = {name: column[:, k:k + 1] for name, column in fragment.columns.items()}
                episode = fragment.episodes[k] if fragment.episodes else None
                if wants_others:
                    out = policy.postprocess_trajectory(piece, other_agent_batches=others, episode=episode)
                else:
                    out = policy.postprocess_trajectory(piece)
                if hook:
                    call_hook(
                        self.callbacks, "on_postprocess_trajectory", f"worker {key[0]}, env {key[1]}",
                        worker=self.worker, episode=episode, agent_id=agent, policy_id=pid,
                        policies=policies, postprocessed_batch=out, original_batches=others,
                    )
                processed.append(_without_infos(out))
        return concat_batches(processed)


def postprocess_stacked(policy: Policy, fragments: list[Fragment]) -> SampleBatch:
    """Fragments of one policy postprocessed in one call, as one ``[T, K]`` batch; the rows not kept are dropped."""
    batch, keep = stack_fragments(fragments)
    processed = policy.postprocess_trajectory(batch)
    if keep is None:
        return processed
    # A recurrent policy's batch is flattened env-major (its sequences contiguous), a stateless one's step-major.
    rows = env_major(keep) if SEQ_STARTS in processed else keep.reshape(-1)
    return {name: column[rows] for name, column in processed.items()}


def _without_infos(batch: SampleBatch) -> SampleBatch:
    if INFOS in batch:
        batch = dict(batch)
        del batch[INFOS]
    return batch
