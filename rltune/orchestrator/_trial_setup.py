"""Trial setup: which trial runs next (an interrupted one, a retry of a failed one (:mod:`._retry`), a grid
point, a stale worker's retry, a new one), its config, seed and directory, and what it already reported.

:class:`TrialSetup` is a part of :class:`rltune.orchestrator._runner.StudyRunner`;
its state lives there.
"""

from __future__ import annotations

import json
import time
import warnings
from pathlib import Path
from typing import Any

from rltune._disk import writing
from rltune._metrics import finite
from rltune._trial_files import last_result
from rltune.errors import ConfigError, DiskError
from rltune.orchestrator._optuna_compat import (pop_waiting_trial, replace_intermediate_value, retry_of, trial_id,
                                               trial_of)
from rltune.orchestrator._ownership import make_owner
from rltune.orchestrator._reporter import json_safe, latest_checkpoint
from rltune.orchestrator._retry import RETRY_OF, predecessor, start_retry
from rltune.orchestrator._search_space import decode_params, resolve_config, suggest
from rltune.orchestrator._spec import StudyPlan
from rltune.orchestrator._stop import StopCriteria, lookup
from rltune.orchestrator._trial import PARAMS_FILE
from rltune.orchestrator._trial_host import ActiveTrial


class TrialSetup:
    """Setting up trials for :class:`~rltune.orchestrator._runner.StudyRunner` (a part of it: its attributes are the runner's)."""

    def _next_trial(self) -> ActiveTrial | None:
        if self.spec_error is not None:
            return None
        while self._resumable:
            frozen = self._resumable.pop(0)
            resumed = self._prepare_fitting(trial_of(self.study, frozen), frozen, "resume", resumed=frozen)
            if resumed is not None and not self._complete_if_stopped(resumed):
                return resumed
        while self._retries:
            started = start_retry(self.study, self._retries.pop(0))
            if started is not None:
                active = self._prepare_fitting(*started, "retry", retry=started[1])
                if active is not None:
                    return active
        if self.no_space is not None:  # the disk is full: a new trial would fail as well
            return None
        if self.spec.timeout_s is not None and time.monotonic() - self._start_time > self.spec.timeout_s:
            return None
        if self.shared:
            trial = pop_waiting_trial(self.study)
            if trial is None:
                return None
            self._started_total += 1
            self.storage.record_heartbeat(trial_id(trial))
            frozen = self.storage.get_trial(trial_id(trial))
            return self._prepare(trial, retry=frozen if predecessor(frozen) is not None else None)
        if self._started_total >= self.plan.total_trials:
            return None
        trial = self.study.ask()
        self._started_total += 1
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
            self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
            self.observers.message(error)
            return None

    def _complete_if_stopped(self, a: ActiveTrial, when: str = "before the study was interrupted") -> bool:
        """A resumed trial whose last recorded result met ``stop`` is COMPLETE with it, not trained once more.

        The orchestrator died after the trial reported that result (and saved
        its checkpoint) but before it told Optuna; or (``when``) the trial's
        process did. With ``checkpoint_at_end``
        the trial must have its checkpoint at that iteration; without it, it
        trains to it again. True if the trial was completed here.
        """
        last = last_result(a.trial_dir)
        if last is None or not a.stop:
            return False
        try:
            reason = a.stop.check(last)
        except ConfigError:  # a stop key the results lack: the trial's run reports it
            return False
        value = finite(lookup(last, self.spec.metric))
        step = last.get("training_iteration")
        if reason is None or value is None or not isinstance(step, int):
            return False
        found = latest_checkpoint(a.trial_dir)
        if self.spec.checkpoint_at_end and (found is None or found[0] != step):
            return False
        if found is not None:
            a.checkpoint_iteration, a.checkpoint = found
        self._backfill(a, upto=step)
        a.last_result, a.iteration = last, step
        self.results[a.number] = last
        a.reason = f"{reason}, met {when}"
        self._record_progress(a)
        self._tell(a, "COMPLETE", value)
        return True

    def _prepare(self, trial: Any, resumed: Any = None, retry: Any = None) -> ActiveTrial | None:
        """An ActiveTrial for ``trial``: a new one, one ``resumed`` in place, or a ``retry`` of a failed trial.

        ``resumed``, ``retry``: the trial's FrozenTrial. None if the trial's
        files cannot be written (a full or read-only disk): it FAILs, recorded.
        """
        number = trial.number
        trial.set_user_attr("owner", make_owner(self.run_id))
        with warnings.catch_warnings():
            # a resumed trial keeps the values it drew, even if the study file's ranges changed since
            warnings.filterwarnings("ignore", message="Inconsistent parameter values", category=RuntimeWarning)
            values = suggest(trial, self.plan.space)
        config = resolve_config(self.plan.config, self.plan.space, values)
        source = retry if retry is not None else resumed
        retried = predecessor(source) if source is not None else None  # the failed trial this one retries
        previous = source.user_attrs if retried is not None else {}  # a retry's: the failed trial's seed and config
        if isinstance(previous.get("seed"), int) and self.plan.trainable.kind == "trainer" and config.get("seed") is None:
            config["seed"] = previous["seed"]
        seed = previous["seed"] if isinstance(previous.get("seed"), int) else self._seed(number, config)
        trial_dir = self.study_dir / f"trial_{number:05d}"
        fresh = resumed is None or "trial_dir" not in resumed.user_attrs  # new, or asked just before a kill
        if fresh:
            trial.set_user_attr("config", json_safe(config))
            trial.set_user_attr("seed", seed)
            trial.set_user_attr("trial_dir", str(trial_dir))
        self.configs[number] = config
        active = ActiveTrial(trial, number, values, config, seed, trial_dir, self.plan.cpus_per_trial(config),
                             StopCriteria(self.spec.stop, where="stop"))
        active.retry_of = retried
        self.observers.trial_opened(active)
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
            self._setup_failed(active, exc)
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
        a.reported = dict(retry.intermediate_values)  # inherited from a stale trial (shared storage)
        a.trial.set_user_attr(RETRY_OF, a.retry_of)
        old_dir = Path(previous["trial_dir"]) if isinstance(previous.get("trial_dir"), str) else None
        found = latest_checkpoint(old_dir) if old_dir is not None and old_dir.is_dir() else None
        inherited = previous.get("checkpoint")
        if found is None and isinstance(inherited, str) and Path(inherited).is_dir():
            # a retry that died before its own first checkpoint: the attr still names an earlier one
            old_dir = Path(inherited).parent
            found = (_checkpoint_iteration(inherited), inherited)
        if found is None or old_dir is None:
            self.observers.message(f"trial {a.number} retries trial {a.retry_of} from scratch (no checkpoint)")
            return
        a.checkpoint_iteration, a.checkpoint = found
        a.trial.set_user_attr("checkpoint", a.checkpoint)
        old_results = old_dir / "result.json"
        if old_results.exists() and not (a.trial_dir / "result.json").exists():
            (a.trial_dir / "result.json").write_bytes(old_results.read_bytes())  # truncated to the checkpoint at launch
        self.observers.message(f"trial {a.number} retries trial {a.retry_of} from its checkpoint at iteration "
                               f"{a.checkpoint_iteration}")

    def _retried_attrs(self, retry: Any) -> dict[str, Any]:
        """The user attrs of the trial ``retry`` retries: copied into it by Optuna's retry callback (a stale
        trial's, shared storage), else read from the study (a retry of a failed trial, :mod:`._retry`)."""
        if retry_of(retry)[1]:
            return retry.user_attrs
        number = predecessor(retry)
        found = [t for t in self.study.get_trials(deepcopy=False) if t.number == number]
        return found[0].user_attrs if found else {}

    def _inherit_checkpoint(self, a: ActiveTrial, inherited: Any) -> None:
        """Restore ``a`` from the checkpoint its retry inherited, if it has none of its own yet."""
        if latest_checkpoint(a.trial_dir) is None and isinstance(inherited, str) and Path(inherited).is_dir():
            a.checkpoint_iteration, a.checkpoint = _checkpoint_iteration(inherited), inherited

    def _seed(self, number: int, config: dict[str, Any]) -> int:
        base = self.spec.seed if self.spec.seed is not None else 0
        if self.plan.trainable.kind == "trainer":
            if config.get("seed") is None:
                config["seed"] = base + number
            return config["seed"]
        given = config.get("seed")
        return given if isinstance(given, int) and not isinstance(given, bool) else base + number

    def _report(self, a: ActiveTrial, step: int, value: float) -> None:
        """Optuna's intermediate value of ``a`` at ``step`` becomes ``value``: reported, or replacing another one.

        A trial that restored a checkpoint runs the steps after it again; the
        trial's history (``result.json``) is what it ran last, so a re-run's
        value replaces the one Optuna got from the earlier run of the step.
        """
        if step not in a.reported:
            a.trial.report(value, step=step)
        elif a.reported[step] != value:
            replace_intermediate_value(a.trial, step, value)
        else:
            return
        a.reported[step] = value

    def _backfill(self, a: ActiveTrial, upto: int | None = None) -> None:
        """Give Optuna the results up to the checkpoint (or ``upto``) as ``result.json`` holds them.

        Those it never got (the orchestrator was killed before it was told),
        and those it got from an earlier run of the step (killed between the
        trial's re-run of the step and telling Optuna).
        """
        path = a.trial_dir / "result.json"
        if not path.exists():
            return
        upto = a.checkpoint_iteration if upto is None else upto
        for line in path.read_text().splitlines():
            try:
                result = json.loads(line)
                step = int(result["training_iteration"])
            except (ValueError, KeyError, TypeError):
                continue
            value = finite(lookup(result, self.spec.metric))
            if step <= upto and value is not None:
                self._report(a, step, value)
            if step == upto:
                a.last_result = result


def _checkpoint_iteration(path: str) -> int:
    """The iteration in a checkpoint directory's name (``checkpoint_000012``), 0 if none."""
    digits = Path(path).name.rpartition("_")[2]
    return int(digits) if digits.isdigit() else 0


def decode_trial_config(plan: StudyPlan, frozen: Any) -> dict[str, Any]:
    """The config a stored trial ran with (its params decoded into the plan's config)."""
    values = decode_params(plan.space, frozen.params)
    config = resolve_config(plan.config, plan.space, values)
    seed = frozen.user_attrs.get("seed")
    if plan.trainable.kind == "trainer" and config.get("seed") is None and seed is not None:
        config["seed"] = seed
    return config

