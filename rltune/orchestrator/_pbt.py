"""Population Based Training: the study's :class:`~._decision.Scheduler`, its population kept in the Optuna storage.

The population is the study's RUNNING trials (``num_samples`` trials, up to
``n_jobs`` / ``max_concurrent`` at once, on every worker of a shared
storage). When a member reaches a perturbation interval
(``perturbation_interval`` iterations since its last one), the runner asks
:meth:`PopulationBasedTraining.decide`:

- its score at this interval is recorded (user attr ``pbt_last``);
- in the bottom ``quantile_fraction`` of the members' last scores, it exploits
  a member of the top quantile that HAS a checkpoint (user attr
  ``checkpoint``, set when the trial process commits one): the answer is
  :class:`~._decision.ExploitTrial` with that checkpoint and a config explored
  from the source's (:func:`._pbt_settings.explore`); the trial process
  restores it and trains on with the new config, in the same process;
- otherwise it goes on and saves a checkpoint of this iteration: a source for
  the others whenever it ranks in the top quantile (a member is never
  exploited before it has one). Every member checkpoints, not only the top
  ones of the moment: members that run in step reach an interval together,
  and the first to get there is ranked among few recorded scores.

State in storage, never in this object, so ``--resume`` after kill -9 and
workers sharing a PostgreSQL storage see one population: per trial,
``pbt_last`` ({iteration, score}), ``pbt_config`` ({origin, values}: the
trial whose params give the config's other keys, and the mutated values in
force), ``pbt_lineage`` (one {iteration, source, checkpoint, changed} per exploit), ``pbt_initial`` (the
numeric mutated values it started with, for the population's plot).
With ``synch: true`` a member at an interval is held (its process waits
for its answer) until every running member has reached that interval; all
are then ranked on their scores there, the top ones checkpoint, and each
bottom one exploits its source's checkpoint of that interval (Ray Tune's
synchronous PBT: :func:`._on_result.release_held`).
A member that fails leaves the population (it is no longer RUNNING); the
others go on, and a new member takes its place (:func:`replacements`: one
more trial from the sampler, which exploits the top members at its first
interval like any member; at most ``num_samples`` replacements, so a config
that fails every time cannot loop; on a shared storage the worker that recorded the failure enqueues the
replacement: :func:`enqueue_replacement`). PB2 (``type: pb2``, ``hyperparam_bounds``) is the same
scheduler with the GP-bandit explore of :mod:`._pb2`, fed by every member's
``pb2_history``.
"""

from __future__ import annotations

import copy
import json
import math
import random
from pathlib import Path
from typing import Any

from rltune._trial_files import checkpoint_iteration, json_safe
from rltune.orchestrator._decision import Decision, ExploitTrial, HoldTrial, Proceed
from rltune.orchestrator._pb2 import denormalize, normalize, ucb_choice
from rltune.orchestrator._reporter import latest_checkpoint
from rltune.orchestrator._pbt_settings import PBTSettings, explore, mutated_values, nested_keys, numeric_in_force
from rltune.orchestrator._yaml_files import deep_merge

LAST = "pbt_last"
IN_FORCE = "pbt_config"
LINEAGE = "pbt_lineage"
INITIAL = "pbt_initial"  # the numeric mutated values a member started with (plots/pbt_hyperparams.png)
HISTORY = "pb2_history"  # PB2: the member's observations (iteration, values in force, score change)
REPLACES = "pbt_replaces"  # shared storage: the failed member a trial replaces
CHECKPOINT = "checkpoint"  # set by the runner when a trial commits a checkpoint


def make_scheduler(state: Any) -> PopulationBasedTraining | None:
    """The study's scheduler beside the pruner: PBT when its plan has PBT settings, else None."""
    settings = getattr(state.plan, "scheduler", None)
    return PopulationBasedTraining(state, settings) if isinstance(settings, PBTSettings) else None


def replacements(state: Any) -> int:
    """How many trials beyond the plan's a PBT study starts: one per failed member not retried, at most the population."""
    if not isinstance(getattr(state.plan, "scheduler", None), PBTSettings) or state.study is None:
        return 0
    from optuna.trial import TrialState

    from rltune.orchestrator._retry import superseded

    trials = state.study.get_trials(deepcopy=False)
    retried = superseded(trials)
    failed = sum(1 for t in trials if t.state == TrialState.FAIL and t.number not in retried)
    return min(failed, state.plan.total_trials)


def enqueue_replacement(state: Any, failed: int) -> None:
    """Shared storage: a WAITING trial (user attr ``pbt_replaces``) in place of failed member ``failed``.

    Called by the worker whose ``tell(FAIL)`` of it succeeded: Optuna moves a
    trial to a finished state once (another worker's tell raises), so one
    worker alone enqueues each failed member's replacement. Any worker takes
    it up like a trial of the budget. At most the population is replaced
    (counted in storage; failures at the same instant on several workers may
    pass that bound by one each).
    """
    if not isinstance(getattr(state.plan, "scheduler", None), PBTSettings) or state.study is None:
        return
    trials = state.study.get_trials(deepcopy=False)
    if sum(1 for t in trials if REPLACES in t.user_attrs) >= state.plan.total_trials:
        return
    state.study.enqueue_trial({}, user_attrs={REPLACES: failed})


def restart_checkpoint(a: Any) -> tuple[int, str] | None:
    """The checkpoint a trial (re)starts from: its latest, or after an exploit the latest it committed.

    A trial that exploited another went on from the other's iteration: its
    directory may still hold checkpoints numbered later, of the weights it
    had before; its ``checkpoint`` user attr names the one it committed last.
    """
    found = latest_checkpoint(a.trial_dir)
    attrs = a.trial.user_attrs
    path = attrs.get(CHECKPOINT)
    if found is None or not attrs.get(LINEAGE) or not isinstance(path, str):
        return found
    committed = Path(path)
    if committed.parent != Path(a.trial_dir) or not committed.is_dir():
        return found
    iteration = checkpoint_iteration(path)
    return (iteration, path) if iteration is not None else found


def quantiles(scores: dict[int, float], fraction: float) -> tuple[list[int], list[int]]:
    """The trial numbers in the bottom and top ``fraction`` of ``scores`` (higher is better), Ray's sizes.

    ``ceil(n * fraction)`` each, at most half of the population; ties are broken by trial number.
    """
    ranked = sorted(scores, key=lambda n: (scores[n], n))
    size = math.ceil(len(ranked) * fraction)
    size = min(size, len(ranked) // 2)
    if size == 0:
        return [], []
    return ranked[:size], ranked[-size:]


def config_in_force(plan: Any, study: Any, frozen: Any, config: dict[str, Any] | None = None) -> dict[str, Any]:
    """The config a stored trial trains with now: its params' (or ``config``), or its PBT origin's with the values set.

    Used for a source trial of another worker and for a resumed trial.
    """
    from rltune.orchestrator._trial_setup import decode_trial_config

    in_force = frozen.user_attrs.get(IN_FORCE)
    if not isinstance(in_force, dict):
        return config if config is not None else decode_trial_config(plan, frozen)
    origin = in_force.get("origin")
    base = frozen
    if origin not in (None, frozen.number):
        base = next((t for t in study.get_trials(deepcopy=False) if t.number == origin), frozen)
    return deep_merge(decode_trial_config(plan, base), in_force.get("values") or {})


class PopulationBasedTraining:
    """PBT over the study's running trials (see the module docstring); asked by the runner after the pruner."""

    def __init__(self, state: Any, settings: PBTSettings) -> None:
        self.state = state
        self.settings = settings
        self._last: dict[int, int] = {}  # trial -> iteration of its last perturbation (read from storage once)

    def decide(self, trial: Any, result: dict[str, Any], value: float, decision: Proceed) -> Decision:
        """At a perturbation interval: record the score, then exploit (bottom quantile) or checkpoint."""
        iteration = trial.iteration
        last = self._last_perturbation(trial)
        if iteration < self.settings.burn_in_period or iteration - last < self.settings.perturbation_interval:
            return decision
        score = value if self.state.spec.mode == "max" else -value
        self._last[trial.number] = iteration
        if self.settings.type == "pb2":  # the GP's observation: this interval's change of the score
            self._observe(trial, iteration, score)
        if LAST not in getattr(trial.trial, "user_attrs", {LAST: None}):  # its first interval: its starting values
            trial.trial.set_user_attr(INITIAL, numeric_in_force(trial.config, self.settings.hyperparam_mutations))
        trial.trial.set_user_attr(LAST, {"iteration": iteration, "score": score})
        if self.settings.synch:  # ranked once every running member has reached this interval (release)
            return HoldTrial(iteration)
        return self._answer(trial, iteration, score)

    def release(self, trial: Any) -> Decision | None:
        """Synchronous PBT: a held member's answer once every running member has reached its interval, else None.

        A bottom member also waits for its source's checkpoint of this
        interval (the source, on top, is answered first and saves it).
        """
        from optuna.trial import TrialState

        iteration = trial.held_at
        running = self.state.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
        behind = [t.number for t in running if t.number != trial.number and _interval(t) < iteration]
        if behind:
            return None
        own = trial.trial.user_attrs.get(LAST) if hasattr(trial.trial, "user_attrs") else None
        score = float(own["score"]) if isinstance(own, dict) else -math.inf
        return self._answer(trial, iteration, score, synch=True)

    def _answer(self, trial: Any, iteration: int, score: float, *, synch: bool = False) -> Decision | None:
        """Exploit a top member (bottom quantile), or go on and checkpoint this iteration."""
        members = self._members(trial.number, score)
        lower, upper = quantiles({n: m[0] for n, m in members.items()}, self.settings.quantile_fraction)
        if trial.number not in lower:  # it checkpoints this iteration: a source for others while it ranks on top
            return Proceed(checkpoint=True)
        sources = [n for n in upper if n != trial.number and (synch or members[n][1] is not None)]
        if not sources:  # no top member has a checkpoint yet: never exploit one without
            return Proceed(checkpoint=True)
        rng = random.Random(f"{self._seed()}:{trial.number}:{iteration}")
        source = rng.choice(sorted(sources))
        saved = checkpoint_iteration(members[source][1])
        if synch and (saved is None or saved < iteration):
            return None  # the source saves this interval's checkpoint first
        frozen = members[source][2]
        base = self.state.configs.get(source) or config_in_force(self.state.plan, self.state.study, frozen)
        config, changed = self._pb2_explore(base, rng, iteration) if self.settings.type == "pb2" else \
            explore(base, self.settings, rng)
        self._record(trial, source, frozen, config, changed, iteration, members[source][1])
        note = (f"exploits trial {source} (score {members[source][0]:g} vs {score:g}) at iteration {iteration}: "
                + ", ".join(f"{k}={_short(v)}" for k, v in changed.items()))
        return ExploitTrial(source, members[source][1], config, changed, note)

    def annotate(self, trial: Any, result: dict[str, Any]) -> None:
        """``result["hyperparams"]``: the numeric mutated values in force (a metric each in MLflow: the schedule)."""
        config = result.get("config") if isinstance(result.get("config"), dict) else trial.config
        values = numeric_in_force(config, self.settings.hyperparam_mutations)
        if values:
            result["hyperparams"] = values

    def _observe(self, trial: Any, iteration: int, score: float) -> None:
        """PB2: append (iteration, values in force, score change since the member's last interval) to its history."""
        previous = trial.trial.user_attrs.get(LAST)
        if not isinstance(previous, dict) or not isinstance(previous.get("score"), (int, float)):
            return
        history = list(trial.trial.user_attrs.get(HISTORY) or [])
        values = {k: trial.config.get(k) for k in self.settings.hyperparam_bounds}
        history.append({"iteration": iteration, "values": json_safe(values), "delta": score - previous["score"]})
        trial.trial.set_user_attr(HISTORY, history[-64:])

    def _pb2_explore(self, base: dict[str, Any], rng: random.Random, iteration: int) -> tuple[dict[str, Any], dict[str, Any]]:
        """PB2: the values the GP bandit picks from every member's history (see :mod:`._pb2`)."""
        bounds = {k: (float(b[0]), float(b[1])) for k, b in self.settings.hyperparam_bounds.items()}
        steps = [h for t in self.state.study.get_trials(deepcopy=False) for h in t.user_attrs.get(HISTORY) or []
                 if isinstance(h, dict) and isinstance(h.get("values"), dict)]
        horizon = max([iteration, *(int(h.get("iteration") or 0) for h in steps)]) or 1
        observations = [(int(h.get("iteration") or 0) / horizon, normalize(h["values"], bounds),
                         float(h.get("delta") if isinstance(h.get("delta"), (int, float)) else math.nan)) for h in steps]
        values = denormalize(ucb_choice(observations, iteration / horizon, len(bounds), rng), bounds)
        config = copy.deepcopy(base)
        changed = {}
        for key, value in values.items():
            config[key] = int(round(value)) if isinstance(base.get(key), int) and not isinstance(base.get(key), bool) else value
            changed[key] = config[key]
        if self.settings.custom_explore_fn is not None:
            config = self.settings.custom_explore_fn(config) or config
        return config, changed

    def _last_perturbation(self, trial: Any) -> int:
        if trial.number not in self._last:  # a resumed trial: its last interval from storage
            self._last[trial.number] = max(_interval(trial.trial), 0) if hasattr(trial.trial, "user_attrs") else 0
        return self._last[trial.number]

    def _members(self, own: int, own_score: float) -> dict[int, tuple[float, str | None, Any]]:
        """The running members with a recorded score: number -> (score, latest checkpoint, frozen trial)."""
        from optuna.trial import TrialState

        members: dict[int, tuple[float, str | None, Any]] = {}
        for frozen in self.state.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            last = frozen.user_attrs.get(LAST)
            if isinstance(last, dict) and isinstance(last.get("score"), (int, float)):
                members[frozen.number] = (float(last["score"]), frozen.user_attrs.get(CHECKPOINT), frozen)
        if own in members:
            members[own] = (own_score, members[own][1], members[own][2])
        else:
            members[own] = (own_score, None, None)
        return members

    def _record(self, trial: Any, source: int, frozen: Any, config: dict[str, Any], changed: dict[str, Any],
                iteration: int, checkpoint: str) -> None:
        """The exploiting trial's config in force and lineage, in storage."""
        in_force = frozen.user_attrs.get(IN_FORCE) if frozen is not None else None
        origin = in_force.get("origin", source) if isinstance(in_force, dict) else source
        values = json_safe(mutated_values(config, self.settings.hyperparam_mutations))
        if self.settings.custom_explore_fn is not None:
            values = deep_merge(values, json_safe(nested_keys(changed)))
        trial.trial.set_user_attr(IN_FORCE, {"origin": origin, "values": values})
        lineage = list(trial.trial.user_attrs.get(LINEAGE) or [])
        lineage.append({"iteration": iteration, "source": source, "checkpoint": checkpoint, "changed": json_safe(changed)})
        trial.trial.set_user_attr(LINEAGE, lineage)

    def _seed(self) -> int:
        return self.settings.seed if self.settings.seed is not None else (self.state.spec.seed or 0)


def ancestry_tags(lineage: Any) -> dict[str, str]:
    """A PBT trial's MLflow tags: the trials it exploited, at which iteration, and the values it took."""
    steps = [s for s in lineage or [] if isinstance(s, dict)]
    if not steps:
        return {}
    return {"rltune.pbt.exploited": ", ".join(f"trial {s.get('source')} at iteration {s.get('iteration')}" for s in steps),
            "rltune.pbt.lineage": json.dumps(steps, sort_keys=True)}


def _interval(frozen: Any) -> int:
    """The iteration of a stored member's last interval (-1: none yet)."""
    last = frozen.user_attrs.get(LAST)
    return int(last["iteration"]) if isinstance(last, dict) and isinstance(last.get("iteration"), int) else -1


def _short(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else repr(value)
