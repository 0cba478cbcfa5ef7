"""Ray Tune's ``Callback`` (``RunConfig(callbacks=[...])``): the study loop's events told to the user's hooks.

A subclass of :class:`Callback` overrides the hooks it needs; they are called
in the orchestrator's process, in this order for each trial:
``on_trial_start`` (also on a restart after a failure), ``on_trial_result``
after each result is answered, ``on_checkpoint`` after each committed
checkpoint, then ``on_trial_complete`` (COMPLETE or PRUNED) or
``on_trial_error`` (FAIL); ``setup`` comes before the first trial and
``on_experiment_end`` after the last. Every hook takes keywords:
``iteration`` (a count of the loop's events), ``trials`` (every trial seen
so far, as :class:`TrialInfo`) and ``trial``. A hook that raises is logged
once (a WARNING with its traceback) and not called again; the study goes on.
"""

from __future__ import annotations

import logging
import traceback
from dataclasses import dataclass, field
from typing import Any

from rltune.orchestrator._checkpoint import Checkpoint
from rltune.orchestrator._events import Observer

logger = logging.getLogger(__name__)


@dataclass
class TrialInfo:
    """A trial as a callback sees it: Ray's ``Trial`` attributes that rltune has."""

    trial_id: str
    number: int
    config: dict[str, Any]
    local_path: str
    status: str = "RUNNING"  # RUNNING, TERMINATED (complete or pruned), ERROR, INTERRUPTED
    last_result: dict[str, Any] = field(default_factory=dict)
    checkpoint: Checkpoint | None = None

    @property
    def logdir(self) -> str:
        """The trial's directory (Ray's older name of ``local_path``)."""
        return self.local_path

    def __str__(self) -> str:
        return self.trial_id


class Callback:
    """Ray Tune's callback interface; each hook is a no-op unless overridden (hooks take keywords)."""

    def setup(self, stop: dict[str, Any] | None = None, num_samples: int | None = None,
              total_num_samples: int | None = None, **info: Any) -> None:
        """Before the first trial: the study's stop criteria, num_samples and number of trials."""

    def on_trial_start(self, iteration: int, trials: list[TrialInfo], trial: TrialInfo, **info: Any) -> None:
        """A trial's process started (or restarted after a failure)."""

    def on_trial_result(self, iteration: int, trials: list[TrialInfo], trial: TrialInfo,
                        result: dict[str, Any], **info: Any) -> None:
        """A trial reported ``result`` (and was answered)."""

    def on_checkpoint(self, iteration: int, trials: list[TrialInfo], trial: TrialInfo, checkpoint: Checkpoint,
                      **info: Any) -> None:
        """A trial committed ``checkpoint``."""

    def on_trial_complete(self, iteration: int, trials: list[TrialInfo], trial: TrialInfo, **info: Any) -> None:
        """A trial ended without error (its stop met, its function returned, pruned)."""

    def on_trial_error(self, iteration: int, trials: list[TrialInfo], trial: TrialInfo, **info: Any) -> None:
        """A trial failed (after its restarts)."""

    def on_experiment_end(self, trials: list[TrialInfo], **info: Any) -> None:
        """The study's run ended (every trial, or interrupted)."""


class CallbackObserver(Observer):
    """Tells the study loop's events to the user's :class:`Callback` objects (an observer of the runner)."""

    def __init__(self, callbacks: list[Callback], study_name: str) -> None:
        """``callbacks`` of the study ``study_name`` (trial ids are ``<study>_<number>``)."""
        self.callbacks = list(callbacks)
        self.study_name = study_name
        self.trials: dict[int, TrialInfo] = {}
        self.iteration = 0

    def call(self, hook: str, **kwargs: Any) -> None:
        """Call ``hook`` of every callback; one that raises is named once and dropped."""
        for callback in list(self.callbacks):
            try:
                getattr(callback, hook)(**kwargs)
            except Exception:  # noqa: BLE001 - a user's hook must not end the study
                text = (f"callback {type(callback).__name__}.{hook} raised; it is not called again:\n"
                        f"{traceback.format_exc().rstrip()}")
                logger.warning("%s", text)
                self.callbacks.remove(callback)

    def _info(self, a: Any) -> TrialInfo:
        info = self.trials.get(a.number)
        if info is None:
            info = TrialInfo(f"{self.study_name}_{a.number:05d}", a.number, dict(a.config), str(a.trial_dir))
            self.trials[a.number] = info
        info.last_result = dict(a.last_result or {})
        return info

    def _tell(self, hook: str, a: Any, **extra: Any) -> None:
        self.iteration += 1
        trial = self._info(a)
        self.call(hook, iteration=self.iteration, trials=list(self.trials.values()), trial=trial, **extra)

    def trial_started(self, a: Any) -> None:
        """Ray's ``on_trial_start``."""
        self._info(a).status = "RUNNING"
        self._tell("on_trial_start", a)

    def trial_result(self, a: Any) -> None:
        """Ray's ``on_trial_result``."""
        self._tell("on_trial_result", a, result=dict(a.last_result or {}))

    def checkpoint_saved(self, a: Any) -> None:
        """Ray's ``on_checkpoint``."""
        checkpoint = Checkpoint(a.checkpoint)
        self._info(a).checkpoint = checkpoint
        self._tell("on_checkpoint", a, checkpoint=checkpoint)

    def trial_ended(self, a: Any, state: str, value: float | None) -> None:
        """Ray's ``on_trial_complete`` or ``on_trial_error`` (an interrupted trial gets neither)."""
        statuses = {"COMPLETE": "TERMINATED", "PRUNED": "TERMINATED", "FAIL": "ERROR"}
        self._info(a).status = statuses.get(state, state)
        if state in ("COMPLETE", "PRUNED"):
            self._tell("on_trial_complete", a)
        elif state == "FAIL":
            self._tell("on_trial_error", a)

    def end(self) -> None:
        """Ray's ``on_experiment_end``."""
        self.call("on_experiment_end", trials=list(self.trials.values()))
