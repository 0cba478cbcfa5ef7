"""What the parts of a study's runner share: the plan, the open study, the trials run here and their ends.

:class:`~rltune.orchestrator._runner.StudyRunner` is built from
collaborators (:class:`~._study_setup.StudyOpener`,
:class:`~._trial_setup.TrialSetup`, :class:`~._trial_end.TrialEnding`);
each gets a :class:`StudyState` and reads or updates it there, never the
runner's own attributes.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rltune.orchestrator._events import Observers
from rltune.orchestrator._spec import StudyPlan
from rltune.orchestrator._trial_host import ActiveTrial, TrialEnd

logger = logging.getLogger(__name__)


@dataclass
class StudyState:
    """The study a runner runs and the trials it runs, shared by the runner's parts.

    ``study``, ``storage`` and ``shared`` are set once the study is open;
    ``active`` are the trials with a process (or being set up), ``ended``
    how trials ended in this run (for the display), ``results`` and
    ``configs`` the last result and config of each trial run here.
    ``no_space``: why no new trial starts (a trial found the disk full).
    """

    plan: StudyPlan
    observers: Observers
    run_id: str
    study_dir: Path  # where the trials' directories are (a default name moved past a held study changes it)
    study: Any = None  # optuna.Study, once open
    storage: Any = None
    shared: bool = False  # an RDB storage that other workers may share
    active: list[ActiveTrial] = field(default_factory=list)
    ended: list[TrialEnd] = field(default_factory=list)
    results: dict[int, dict[str, Any]] = field(default_factory=dict)
    configs: dict[int, dict[str, Any]] = field(default_factory=dict)
    no_space: str | None = None
    scheduler: Any = None  # pbt: the study's Scheduler (_decision.Scheduler) asked after the pruner, or None

    @property
    def spec(self) -> Any:
        """The study's spec (the plan's: a default name moved past a held study changes it)."""
        return self.plan.spec

    def say(self, text: str) -> None:
        """A line for the user: logged, and told to the observers (the display)."""
        logger.info("%s", text)
        self.observers.message(text)

