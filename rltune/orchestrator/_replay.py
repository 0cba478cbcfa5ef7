"""A hyperparameter schedule that ``rltune train -f`` replays: the ``schedule:`` field of a train file.

A PBT study's ``best_config.yaml`` writes the schedule its best member
followed (through the trials it exploited, back to iteration 0)::

    config: {lr: 0.001, clip_param: 0.2, ...}
    schedule:
      - {at_iteration: 0, config: {lr: 0.0005, clip_param: 0.2}}
      - {at_iteration: 8, config: {lr: 0.0006, clip_param: 0.3}}

Each segment's ``config`` is merged into the train file's ``config`` once
the trial has reported its ``at_iteration`` (or ``at_timesteps``: its
``timesteps_total`` reached that count); the next iterations train with it.
A segment starting at 0 is the config the trainer is built with. A later
one is applied as PBT applies an exploit (:func:`._trial_process.exploit_into`):
the trial checkpoints, a trainer of the new config restores that checkpoint
and trains on, so the new values really train (``result["config"]`` and
the learner's ``cur_lr`` show them).
"""

from __future__ import annotations

from typing import Any, Optional

from pydantic import Field, model_validator

from rltune._validation import UserInput
from rltune.errors import ConfigError
from rltune.orchestrator._yaml_files import deep_merge

# Keys a trainer is built around: a checkpoint of one value does not restore into a trainer of another.
FIXED_KEYS = frozenset({
    "env", "env_config", "num_workers", "num_envs_per_worker", "model", "framework", "seed", "multiagent",
    "policies", "policy_mapping_fn", "callbacks", "curriculum", "observation_filter", "num_gpus",
    "replay_buffer_config", "evaluation_config", "evaluation_num_workers",
})


class ScheduleSegment(UserInput):
    """One segment of a replayed schedule: when it starts (``at_iteration`` or ``at_timesteps``) and its config."""

    at_iteration: Optional[int] = Field(None, ge=0, description="Applied once this training iteration is reported.")
    at_timesteps: Optional[int] = Field(None, ge=0, description="Applied once timesteps_total reaches this count.")
    config: dict[str, Any] = Field(description="Config keys set from then on (merged into the file's config).")

    @model_validator(mode="after")
    def _one_start(self) -> "ScheduleSegment":
        if (self.at_iteration is None) == (self.at_timesteps is None):
            raise ValueError("give its start as at_iteration or at_timesteps (one of them)")
        return self

    @property
    def unit(self) -> str:
        """``at_iteration`` or ``at_timesteps``: the key its start is given in."""
        return "at_iteration" if self.at_iteration is not None else "at_timesteps"

    @property
    def start(self) -> int:
        """Its start, in :attr:`unit`."""
        return self.at_iteration if self.at_iteration is not None else int(self.at_timesteps or 0)


def schedule_problems(segments: list[ScheduleSegment]) -> list[str]:
    """What is wrong with a schedule as a whole: mixed units, starts not increasing, keys fixed for a run."""
    problems: list[str] = []
    for i, segment in enumerate(segments):
        if segment.unit != segments[0].unit:
            problems.append(f"schedule.{i}: starts {segment.unit} but schedule.0 {segments[0].unit}; "
                            "give every start in one unit")
        elif i and segment.start <= segments[i - 1].start:
            problems.append(f"schedule.{i}.{segment.unit}: {segment.start} must be greater than the previous "
                            f"segment's {segments[i - 1].start} (segments in order, one per start)")
        fixed = sorted(FIXED_KEYS & set(segment.config))
        if fixed and (i or segment.start):
            problems.append(f"schedule.{i}.config.{fixed[0]}: cannot change during a run (the trainer is built "
                            f"around it); set it in config, or in a segment at 0")
    return problems


def checked_configs(trainer_cls: Any, config: dict[str, Any], segments: list[ScheduleSegment],
                    where: str) -> list[dict[str, Any]]:
    """The config in force in each segment (``config`` merged with each one so far), each validated by the trainer.

    One :class:`ConfigError` names every problem, each with its segment.
    """
    problems = schedule_problems(segments)
    configs, current = [], dict(config)
    for i, segment in enumerate(segments):
        current = deep_merge(current, segment.config)
        configs.append(current)
        try:
            trainer_cls.validate({k: v for k, v in current.items() if k != "env"})
        except ConfigError as exc:
            problems.extend(f"schedule.{i}.config: {p}" for p in exc.problems)
    if problems:
        raise ConfigError(problems, where=where)
    return configs


class ScheduleReplay:
    """Which segment is due after a result: the config to apply next (see the module docstring)."""

    def __init__(self, segments: list[ScheduleSegment], configs: list[dict[str, Any]]) -> None:
        self.unit = segments[0].unit if segments else "at_iteration"
        self.pending = [(s.start, c) for s, c in zip(segments, configs) if s.start > 0]

    def due(self, result: dict[str, Any]) -> dict[str, Any] | None:
        """The config of the last segment that ``result`` reached (those before it are skipped), or None."""
        key = "training_iteration" if self.unit == "at_iteration" else "timesteps_total"
        now = result.get(key)
        if not isinstance(now, (int, float)) or isinstance(now, bool):
            return None
        config = None
        while self.pending and self.pending[0][0] <= now:
            config = self.pending.pop(0)[1]
        return config


def replay_of(trainer_cls: Any, config: dict[str, Any], env: Any, segments: list[ScheduleSegment],
              where: str) -> tuple[dict[str, Any], ScheduleReplay]:
    """The config to build the trainer with (a segment at 0 merged in) and the replay of the later segments."""
    configs = checked_configs(trainer_cls, config, segments, where)
    first = configs[0] if segments[0].start == 0 else dict(config)
    return first, ScheduleReplay(segments, [{**c, "env": env} for c in configs])
