"""The study side of seed-aware tuning: what ``seeds_per_trial``, ``seed_mode``, ``aggregate`` and
``final_evaluation`` make of a trial (its seeds, its CPUs, its stop criteria).

See docs/seeds.md. The trial process runs the seeds (:mod:`._seed_group`);
the runner sees one trial and one result per step, as without seeds.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from rltune._ipc import SeedGroup
from rltune.orchestrator._objectives import as_list
from rltune.orchestrator._seed_stats import RACE_NEXT, derive_seed
from rltune.orchestrator._stop import StopCriteria, StopReason

MAX_SEEDS_PER_TRIAL = 64


class FinalEvaluation(BaseModel):
    """``final_evaluation: {top_k: 3, seeds: 10}``: after the search, the ``top_k`` configurations are trained
    again on ``seeds`` seeds never used in the search; the study's best is chosen on those."""

    model_config = ConfigDict(extra="forbid")

    top_k: int = Field(3, ge=1, le=100, description="How many of the best configurations are evaluated again.")
    seeds: int = Field(10, ge=1, le=MAX_SEEDS_PER_TRIAL, description="Fresh seeds each of them is trained on.")


def seeds_of(spec: Any, trial_seed: int) -> list[int]:
    """The seeds a trial of ``spec`` runs: its own seed, then ``seeds_per_trial - 1`` derived from it."""
    return [derive_seed(trial_seed, i) for i in range(max(1, int(spec.seeds_per_trial)))]


def seed_group_of(spec: Any, trial_seed: int | None) -> SeedGroup | None:
    """The :class:`~rltune._ipc.SeedGroup` a trial's process runs, or None (one seed: the trial as always)."""
    if int(spec.seeds_per_trial) <= 1:
        return None
    return SeedGroup(seeds=tuple(seeds_of(spec, int(trial_seed or 0))), mode=spec.seed_mode,
                     aggregate=spec.aggregate, metric=as_list(spec.metric)[0], direction=as_list(spec.mode)[0],
                     stop=dict(spec.stop) if spec.stop else None, checkpoint_at_end=spec.checkpoint_at_end)


def parallel_seeds(spec: Any) -> int:
    """How many seed processes of one trial run at once: its CPUs count this many times."""
    return int(spec.seeds_per_trial) if spec.seed_mode == "parallel" else 1


class SeedStopCriteria(StopCriteria):
    """The study's stop criteria as the orchestrator judges a seed group's results.

    A race group's result marked ``seed_race_next`` met the criteria for one
    seed, and the next seed starts: it does not stop the trial.
    """

    def check(self, result: dict[str, Any]) -> StopReason | None:  # noqa: D102 - as StopCriteria.check
        if result.get(RACE_NEXT):
            return None
        return super().check(result)


def stop_criteria(spec: Any) -> StopCriteria:
    """The stop criteria of a trial of ``spec`` (a seed group's: :class:`SeedStopCriteria`)."""
    cls = SeedStopCriteria if int(spec.seeds_per_trial) > 1 else StopCriteria
    return cls(spec.stop, where="stop")
