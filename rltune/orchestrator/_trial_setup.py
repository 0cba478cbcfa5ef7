"""Trial setup: which trial runs next (an interrupted one, a retry of a failed one (:mod:`._retry`), a grid
point, a stale worker's retry, a new one), its config, seed and directory, and what it already reported.

:class:`TrialSetup` is a collaborator of :class:`rltune.orchestrator._runner.StudyRunner`
working on the shared :class:`~rltune.orchestrator._study_state.StudyState`.
"""

from __future__ import annotations

import json
import time
import warnings
from pathlib import Path
from typing import Any

from rltune._disk import writing
from rltune._trial_files import checkpoint_iteration
from rltune.errors import DiskError
from rltune.orchestrator._optuna_compat import pop_waiting_trial, retry_of, trial_id, trial_of
from rltune.orchestrator._ownership import make_owner
from rltune.orchestrator._reporter import json_safe, latest_checkpoint
from rltune.orchestrator._retry import RETRY_OF, predecessor, start_retry
from rltune.orchestrator._pbt import config_in_force, replacements
from rltune.orchestrator._search_space import decode_params, resolve_config, suggest
from rltune.orchestrator._spec import StudyPlan
from rltune.orchestrator._seed_spec import seed_group_of, seeds_of, stop_criteria
from rltune.orchestrator._study_state import StudyState
from rltune.orchestrator._trial import PARAMS_FILE
from rltune.orchestrator._trial_end import TrialEnding
from rltune.orchestrator._trial_host import ActiveTrial


class TrialSetup:
    """Sets up the trials of a :class:`~rltune.orchestrator._runner.StudyRunner`, in order, on its ``state``.

    ``resumable`` (interrupted trials), ``retries`` (failed trials to retry)
    and ``started_total`` come from :class:`~._study_setup.StudyOpener` (``restart``: its retries start
    from scratch);
    ``start_time`` is the clock of the study's ``timeout_s``; ``ending``
    ends a trial that cannot run (its stop already met, its disk full).
    """

    def __init__(self, state: StudyState, ending: TrialEnding, *, resumable: list[Any], retries: list[Any],
                 started_total: int, start_time: float, restart: bool = False) -> None:
        self.state = state
        self.ending = ending
        self.resumable = resumable
        self.retries = retries
        self.started_total = started_total
        self.start_time = start_time
        self.restart = restart  # retries start from scratch, not from the failed trials' checkpoints

    def next_trial(self) -> ActiveTrial | None:
        """The next trial to run, set up; None when none is due (the budget is spent, the disk is full...)."""
        while self.resumable:
            frozen = self.resumable.pop(0)
            resumed = self._prepare_fitting(trial_of(self.state.study, frozen), frozen, "resume", resumed=frozen)
            if resumed is not None and not self.ending.complete_if_stopped(resumed):
                return resumed
        while self.retries:
            started = start_retry(self.state.study, self.retries.pop(0))
            if started is not None:
                active = self._prepare_fitting(*started, "retry", retry=started[1])
                if active is not None:
                    return active
        if self.state.no_space is not None:  # the disk is full: a new trial would fail as well
            return None
        if self.state.spec.timeout_s is not None and time.monotonic() - self.start_time > self.state.spec.timeout_s:
            return None
        if self.state.shared:
            trial = pop_waiting_trial(self.state.study)
            if trial is None:
                return None
            self.started_total += 1
            self.state.storage.record_heartbeat(trial_id(trial))
            frozen = self.state.storage.get_trial(trial_id(trial))
            return self._prepare(trial, retry=frozen if predecessor(frozen) is not None else None)
        total = self.state.plan.total_trials
        if self.started_total >= total and self.started_total >= total + replacements(self.state):  # pbt: members
            return None  # that failed are replaced
        trial = self.state.study.ask()
        self.started_total += 1
        return self._prepare(trial)

    def _prepare_fitting(self, trial: Any, frozen: Any, verb: str, **kind: Any) -> ActiveTrial | None:
        """:meth:`_prepare` of a stored trial; if its params no longer fit the study's space, it FAILs (None)."""
        import optuna

        try:
            return self._prepare(trial, **kind)
        except ValueError as exc:  # the study's search space changed since the trial started
            error = (f"cannot {verb} trial {frozen.number}: its params {frozen.params} do not fit the study's "
                     f"search space any more ({exc})")
            trial.set_user_attr("error", error)
            self.state.study.tell(trial, state=optuna.trial.TrialState.FAIL)
            self.state.observers.message(error)
            return None

    def _prepare(self, trial: Any, resumed: Any = None, retry: Any = None) -> ActiveTrial | None:
        """An ActiveTrial for ``trial``: a new one, one ``resumed`` in place, or a ``retry`` of a failed trial.

        ``resumed``, ``retry``: the trial's FrozenTrial. None if the trial's
        files cannot be written (a full or read-only disk): it FAILs, recorded.
        """
        number = trial.number
        trial.set_user_attr("owner", make_owner(self.state.run_id))
        with warnings.catch_warnings():
            # a resumed trial keeps the values it drew, even if the study file's ranges changed since
            warnings.filterwarnings("ignore", message="Inconsistent parameter values", category=RuntimeWarning)
            values = suggest(trial, self.state.plan.space)
        source = retry if retry is not None else resumed
        drawn = source.user_attrs.get("config") if source is not None else None  # its tune.sample_from values
        config = resolve_config(self.state.plan.config, self.state.plan.space, values,
                                drawn if isinstance(drawn, dict) else None)
        if source is not None and self.state.plan.scheduler is not None:  # pbt: the config it trains with now
            config = config_in_force(self.state.plan, self.state.study, source, config)
        retried = predecessor(source) if source is not None else None  # the failed trial this one retries
        previous = source.user_attrs if retried is not None else {}  # a retry's: the failed trial's seed and config
        if isinstance(previous.get("seed"), int) and config.get("seed") is None:
            config["seed"] = previous["seed"]
        seed = previous["seed"] if isinstance(previous.get("seed"), int) else self._seed(number, config)
        trial_dir = self.state.study_dir / f"trial_{number:05d}"
        fresh = resumed is None or "trial_dir" not in resumed.user_attrs  # new, or asked just before a kill
        if fresh:
            trial.set_user_attr("config", json_safe(config))
            trial.set_user_attr("seed", seed)
            trial.set_user_attr("trial_dir", str(trial_dir))
            if self.state.spec.seeds_per_trial > 1:
                trial.set_user_attr("seeds", seeds_of(self.state.spec, seed))
        self.state.configs[number] = config
        active = ActiveTrial(trial, number, values, config, seed, trial_dir, self.state.plan.cpus_per_trial(config),
                             stop_criteria(self.state.spec))
        active.seed_group = seed_group_of(self.state.spec, seed)
        active.retry_of = retried
        self.state.observers.trial_opened(active)
        try:
            with writing(trial_dir, "the trial directory"):
                trial_dir.mkdir(parents=True, exist_ok=True)
                if fresh:
                    (trial_dir / PARAMS_FILE).write_text(json.dumps(json_safe({
                        "trial": number, "seed": seed, "params": values, "config": config}), indent=2,
                        sort_keys=True) + "\n")
                if retried is not None and (retry is not None or fresh):  # (fresh: a retry killed as it started)
                    self._continue_from(active, source)
        except DiskError as exc:
            self.ending.setup_failed(active, exc)
            return None
        if resumed is not None:
            active.failures = int(resumed.user_attrs.get("num_failures", 0))
            active.reported = dict(resumed.intermediate_values)
            if isinstance(resumed.user_attrs.get("last_result"), dict):
                active.last_result = resumed.user_attrs["last_result"]
            if active.retry_of is not None:  # a retry resumed before its own first checkpoint starts from its inherited one
                self._inherit_checkpoint(active, resumed.user_attrs.get("checkpoint"))
        return active

    def _continue_from(self, a: ActiveTrial, retry: Any) -> None:
        """A retry starts from its predecessor's latest checkpoint, with its results so far (copied here)."""
        previous = self._retried_attrs(retry)
        a.trial.set_user_attr(RETRY_OF, a.retry_of)
        if self.restart:
            self.state.observers.message(f"trial {a.number} retries trial {a.retry_of} from scratch (a restart)")
            return
        a.reported = dict(retry.intermediate_values)  # inherited from a stale trial (shared storage)
        old_dir = Path(previous["trial_dir"]) if isinstance(previous.get("trial_dir"), str) else None
        found = latest_checkpoint(old_dir) if old_dir is not None and old_dir.is_dir() else None
        inherited = previous.get("checkpoint")
        if found is None and isinstance(inherited, str) and Path(inherited).is_dir():
            # a retry that died before its own first checkpoint: the attr still names an earlier one
            old_dir = Path(inherited).parent
            found = (checkpoint_iteration(inherited) or 0, inherited)
        if found is None or old_dir is None:
            self.state.observers.message(f"trial {a.number} retries trial {a.retry_of} from scratch (no checkpoint)")
            return
        a.checkpoint_iteration, a.checkpoint = found
        a.trial.set_user_attr("checkpoint", a.checkpoint)
        old_results = old_dir / "result.json"
        if old_results.exists() and not (a.trial_dir / "result.json").exists():
            (a.trial_dir / "result.json").write_bytes(old_results.read_bytes())  # truncated to the checkpoint at launch
        self.state.observers.message(f"trial {a.number} retries trial {a.retry_of} from its checkpoint at iteration "
                               f"{a.checkpoint_iteration}")

    def _retried_attrs(self, retry: Any) -> dict[str, Any]:
        """The user attrs of the trial ``retry`` retries: copied into it by Optuna's retry callback (a stale
        trial's, shared storage), else read from the study (a retry of a failed trial, :mod:`._retry`)."""
        if retry_of(retry)[1]:
            return retry.user_attrs
        number = predecessor(retry)
        found = [t for t in self.state.study.get_trials(deepcopy=False) if t.number == number]
        return found[0].user_attrs if found else {}

    def _inherit_checkpoint(self, a: ActiveTrial, inherited: Any) -> None:
        """Restore ``a`` from the checkpoint its retry inherited, if it has none of its own yet."""
        if latest_checkpoint(a.trial_dir) is None and isinstance(inherited, str) and Path(inherited).is_dir():
            a.checkpoint_iteration, a.checkpoint = checkpoint_iteration(inherited) or 0, inherited

    def _seed(self, number: int, config: dict[str, Any]) -> int:
        base = self.state.spec.seed if self.state.spec.seed is not None else 0
        if self.state.plan.trainable.kind == "trainer":
            if config.get("seed") is None:
                config["seed"] = base + number
            return config["seed"]
        given = config.get("seed")
        if isinstance(given, int) and not isinstance(given, bool):
            return given
        config["seed"] = base + number  # a function trainable reads its seed where a trainer does
        return config["seed"]


def decode_trial_config(plan: StudyPlan, frozen: Any) -> dict[str, Any]:
    """The config a stored trial ran with (its params decoded into the plan's config)."""
    values = decode_params(plan.space, frozen.params)
    drawn = frozen.user_attrs.get("config")
    config = resolve_config(plan.config, plan.space, values, drawn if isinstance(drawn, dict) else None)
    seed = frozen.user_attrs.get("seed")
    if config.get("seed") is None and seed is not None:  # trainers and function trainables alike
        config["seed"] = seed
    return config

