"""Curriculum learning: a phase schedule driven by results, for envs whose task can be set.

Ways to move every env of every worker to a new task (all reach local and
remote workers; with a :class:`TaskSettableEnv`, the task is also restored
into rebuilt envs, recreated workers, restored checkpoints and the
evaluation env):

1. a loop around ``trainer.train()`` calling ``trainer.foreach_env(fn)``;
2. an ``on_train_result`` callback calling ``trainer.foreach_env(fn)``;
3. config ``env_task_fn(result, env, env_context) -> task``, evaluated per
   env after every iteration (tasks may differ by worker or vector index);
   ``set_task`` is only called when the task changes;
4. :class:`CurriculumCallback`, built from a ``curriculum:`` block: ordered
   phases, each with a task and a rule for moving on.
"""

from __future__ import annotations

import math
from typing import Any, Literal, Mapping, Optional

from pydantic import ConfigDict, Field, ValidationError, model_validator

from rltune._validation import UserInput, error_text
from rltune.callbacks._callbacks import DefaultCallbacks
from rltune.errors import ConfigError


class StrictBlock(UserInput):
    """A block of user input: unknown keys and non-finite numbers are refused."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # threshold: .inf is refused



class PhaseConfig(StrictBlock):
    """One curriculum phase: its task, and when to move on to the next phase."""

    task: Any = Field(..., description="The task every env gets during this phase.")
    metric: Optional[str] = Field(None, description="Result key the rules read (nested keys with '/'); default: the block's.")
    threshold: Optional[float] = Field(None, description="Promote when metric >= threshold (None: final phase).")
    min_iterations: int = Field(1, ge=0, description="Iterations spent in this phase before a promotion.")
    patience: int = Field(1, ge=1, description="Consecutive iterations the rule must hold before moving.")
    demote_below: Optional[float] = Field(None, description="Go back one phase when metric < this value.")


class CurriculumConfig(StrictBlock):
    """A ``curriculum:`` block of phases (``type: phases``, the default)."""

    type: Literal["phases"] = Field("phases", description="phases; or learning_progress, plr (automatic curricula).")
    metric: str = Field("episode_reward_mean", description="Default result key of the phase rules.")
    phases: list[PhaseConfig] = Field(..., min_length=1, description="Ordered phases, easiest first.")

    @model_validator(mode="after")
    def _thresholds(self) -> "CurriculumConfig":
        for i, phase in enumerate(self.phases[:-1]):
            if phase.threshold is None:
                raise ValueError(f"phases[{i}] needs a threshold (only the last phase may have none)")
        return self


CURRICULUM_TYPES = ("phases", "learning_progress", "plr")


def parse_curriculum(block: Any, where: str = "curriculum") -> Any:
    """Validate a ``curriculum:`` block, naming every problem by its path.

    A :class:`CurriculumConfig` of phases, or (``type: learning_progress`` or
    ``plr``) an automatic curriculum's config (``_auto_curriculum.py``).
    """
    if isinstance(block, StrictBlock):
        return block
    kind = block.get("type", "phases") if isinstance(block, Mapping) else "phases"
    if kind not in CURRICULUM_TYPES:
        raise ConfigError(f"{where}.type: must be one of {', '.join(CURRICULUM_TYPES)}, but got {kind!r}")
    if kind != "phases":
        from rltune.callbacks._auto_curriculum import AUTO_CONFIGS

        return validate_block(AUTO_CONFIGS[kind], block, where)
    return validate_block(CurriculumConfig, block, where)


def validate_block(model: type[StrictBlock], block: Any, where: str) -> Any:
    """``model.model_validate(block)``; every problem a ConfigError line named by its path under ``where``."""
    try:
        return model.model_validate(block)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            path = ".".join(str(p) for p in (where, *err["loc"]))
            problems.append(f"{path}: {'unknown key' if err['type'] == 'extra_forbidden' else error_text(err)}")
        raise ConfigError(problems) from None


def curriculum_callback(block: Any) -> DefaultCallbacks:
    """The callback that runs a ``curriculum:`` block: phases, or an automatic curriculum's."""
    config = parse_curriculum(block)
    if isinstance(config, CurriculumConfig):
        return CurriculumCallback(config)
    from rltune.callbacks._auto_curriculum import AutoCurriculumCallback

    return AutoCurriculumCallback(config)


def lookup_metric(result: dict[str, Any], key: str) -> Any:
    """``result[key]``, with nested keys written ``a/b/c`` or ``a.b.c``; None when missing."""
    if key in result:
        return result[key]
    value: Any = result
    for part in key.replace(".", "/").split("/"):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


class CurriculumCallback(DefaultCallbacks):
    """Moves every env through the phases of a ``curriculum:`` block.

    After each iteration it reads the phase's metric: ``patience``
    consecutive values ``>= threshold`` (after ``min_iterations`` in the
    phase) promote to the next phase; ``patience`` values below
    ``demote_below`` go back one. Phase and task are added to every result
    (``curriculum_phase``, ``curriculum_task``) and saved in checkpoints.
    """

    def __init__(self, curriculum: Any) -> None:
        config = parse_curriculum(curriculum)
        if not isinstance(config, CurriculumConfig):
            raise ConfigError(f"curriculum.type: CurriculumCallback runs phases; {config.type!r} runs in AutoCurriculumCallback")
        self.curriculum = config
        self.phase = 0
        self.iterations_in_phase = 0
        self.streak_up = 0
        self.streak_down = 0

    @property
    def task(self) -> Any:
        """The current phase's task."""
        return self.curriculum.phases[self.phase].task

    def on_trainer_init(self, *, trainer: Any, **kwargs: Any) -> None:
        trainer.set_task(self.task)

    def on_checkpoint_loaded(self, *, trainer: Any, **kwargs: Any) -> None:
        trainer.set_task(self.task)

    def on_train_result(self, *, trainer: Any, result: dict[str, Any], **kwargs: Any) -> None:
        phase = self.curriculum.phases[self.phase]
        metric = phase.metric or self.curriculum.metric
        value = lookup_metric(result, metric)
        self.iterations_in_phase += 1
        ok = isinstance(value, (int, float)) and not math.isnan(value)
        up = ok and phase.threshold is not None and value >= phase.threshold
        down = ok and phase.demote_below is not None and value < phase.demote_below
        self.streak_up = self.streak_up + 1 if up else 0
        self.streak_down = self.streak_down + 1 if down else 0
        moved = 0
        last = len(self.curriculum.phases) - 1
        if self.streak_up >= phase.patience and self.iterations_in_phase >= phase.min_iterations and self.phase < last:
            moved = 1
        elif self.streak_down >= phase.patience and self.phase > 0:
            moved = -1
        if moved:
            self.phase += moved
            self.iterations_in_phase = self.streak_up = self.streak_down = 0
            trainer.set_task(self.task)
        result["curriculum_phase"] = self.phase
        result["curriculum_task"] = self.task

    def get_state(self) -> dict[str, Any]:
        return {
            "phase": self.phase,
            "iterations_in_phase": self.iterations_in_phase,
            "streak_up": self.streak_up,
            "streak_down": self.streak_down,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        self.phase = min(int(state.get("phase", 0)), len(self.curriculum.phases) - 1)
        self.iterations_in_phase = int(state.get("iterations_in_phase", 0))
        self.streak_up = int(state.get("streak_up", 0))
        self.streak_down = int(state.get("streak_down", 0))
