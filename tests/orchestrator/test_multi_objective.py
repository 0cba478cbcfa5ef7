"""Multi-objective studies: metric/mode lists, samplers, constraints, the Pareto front, and the Pareto pruning rule."""

from __future__ import annotations

import math

import pytest
import yaml

from rltune import tune
from rltune.errors import ConfigError, StudyFailedError
from rltune.orchestrator._constraints import parse_constraints
from rltune.orchestrator._pareto_pruning import dominated_by_front, dominates, front
from rltune.orchestrator._spec import make_plan
from rltune.orchestrator.cli import main

from .mo_trainables import objectives

MO = {"metric": ["reward", "cost"], "mode": ["max", "min"]}
MAX_MIN = ["maximize", "minimize"]


def _plan(**fields):
    return make_plan({"run": objectives, "config": {"a": 1}, **fields})


# -- the spec ---------------------------------------------------------------------------------
@pytest.mark.parametrize("search_alg", ["nsga2", "nsga3", "tpe", "gp", "random", "grid", "NSGA-II"])
def test_multi_objective_samplers_make_a_study_with_one_direction_per_metric(search_alg):
    plan = _plan(**MO, search_alg=search_alg)
    assert plan.multi_objective and plan.directions == MAX_MIN
    assert plan.make_sampler() is not None


def test_one_metric_stays_a_single_objective_study():
    plan = _plan(metric="reward", mode="min")
    assert not plan.multi_objective and plan.directions == ["minimize"] and plan.direction == "minimize"


@pytest.mark.parametrize("fields, expected", [
    ({**MO, "search_alg": "cmaes"}, "search_alg: cmaes cannot optimize several metrics"),
    ({"metric": ["reward", "cost"], "mode": ["max"]}, "mode: 1 mode(s) for 2 metric(s)"),
    ({"metric": ["reward", "reward"], "mode": ["max", "min"]}, "metric: names 'reward' twice"),
    ({"metric": "reward", "mode": ["max", "min"]}, "mode: 2 mode(s) for 1 metric(s)"),
    ({"metric": ["reward", 3]}, "metric: must be a result key"),
    ({**MO, "mode": ["max", "up"]}, "mode: Input should be 'max' or 'min'"),
    ({**MO, "scheduler": "asha"}, "scheduler: asha prunes on one metric"),
    ({"metric": "reward", "scheduler": "pareto"}, "scheduler: pareto prunes a multi-objective study"),
    ({**MO, "scheduler": {"type": "pareto", "k": 0}}, "scheduler.k: Input should be greater than or equal to 1"),
    ({**MO, "scheduler": {"type": "pareto", "kk": 2}}, "scheduler.kk: Extra inputs are not permitted"),
    ({"constraints": ["kl < 0.05"]}, "constraints.0: 'kl < 0.05' is not 'KEY <= NUMBER'"),
    ({"constraints": ["kl <= nan"]}, "constraints.0"),
    ({"constraints": ["kl <= 1", "kl <= 1"]}, "constraints.1: 'kl <= 1' is given twice"),
])
def test_bad_objectives_are_refused_by_name(fields, expected):
    with pytest.raises(ConfigError) as info:
        _plan(**fields)
    assert expected in str(info.value)


def test_constraints_parse_to_violations():
    (le, ge), problems = parse_constraints(["info/learner/default_policy/kl <= 0.05", "reward >= 10"])
    assert not problems and le.key == "info/learner/default_policy/kl"
    assert le.violation(0.03) < 0 < le.violation(0.07) and ge.violation(12) < 0 < ge.violation(8)


# -- the rule ---------------------------------------------------------------------------------
def test_dominance_and_front():
    assert dominates([2, 1], [1, 2], MAX_MIN) and not dominates([2, 1], [2, 1], MAX_MIN)  # a tie does not dominate
    assert not dominates([2, 2], [1, 1], MAX_MIN)  # better in one, worse in the other
    assert front([[3, 3], [1, 1], [2, 2], [1, 3]], MAX_MIN) == [[3, 3], [1, 1], [2, 2]]


@pytest.mark.parametrize("own, others, k, pruned", [
    ([1, 5], [[3, 1], [2, 2], [4, 4]], 2, True),  # dominated by two members of the front
    ([1, 5], [[3, 1], [0, 0]], 2, False),  # dominated by one member only ([0, 0] does not dominate it)
    ([1, 5], [[3, 1], [0, 0]], 1, True),
    ([4, 0.5], [[3, 1], [2, 2]], 1, False),  # on the front itself
    ([3, 1], [[3, 1], [3, 1]], 1, False),  # ties are never pruned
    ([1, 5], [[3, 1], [2.5, 1], [2, 1]], 2, False),  # three dominate it, but the front is [3, 1] alone
])
def test_pruned_when_k_members_of_the_front_dominate(own, others, k, pruned):
    assert dominated_by_front(own, others, MAX_MIN, k) is pruned


# -- studies ----------------------------------------------------------------------------------
def _run(tmp_path, name, config, **fields):
    return tune.run(objectives, config=config, results_dir=str(tmp_path), name=name, verbose=0, tracking=False,
                    search_alg="grid", **{**MO, **fields})


def test_front_is_best_trials_and_best_configs_holds_each(tmp_path, capsys):
    # cost = a * step: more reward costs more, so every a is on the front but the dominated b = 9 point
    analysis = _run(tmp_path, "front", {"a": tune.grid_search([1, 2, 3]), "b": tune.grid_search([None, 9])})
    study = analysis.study
    assert [d.name for d in study.directions] == ["MAXIMIZE", "MINIMIZE"]
    values = {t.number: t.value for t in analysis.trials}
    front_numbers = sorted(t.number for t in study.best_trials)
    assert sorted(t.number for t in analysis.best_trials) == front_numbers
    assert {tuple(values[n]) for n in front_numbers} == {(3.0, 3.0), (6.0, 6.0), (9.0, 9.0)}
    assert analysis.best_trial.value == [9.0, 9.0]  # the front's first: best in the first metric
    files = sorted((analysis.study_dir / "best_configs").glob("*.yaml"))
    assert [f.name for f in files] == [f"trial_{n:05d}.yaml" for n in front_numbers]
    configs = [yaml.safe_load(f.read_text())["config"] for f in files]
    assert sorted(c["a"] for c in configs) == [1, 2, 3] and all(c.get("b") is None for c in configs)
    assert analysis.best_configs == [t.config for t in analysis.best_trials]
    assert yaml.safe_load((analysis.study_dir / "best_config.yaml").read_text())["config"]["a"] == 3
    assert main(["show", "front", "--results-dir", str(tmp_path)]) == 0
    shown = capsys.readouterr().out
    assert "(max reward, min cost)" in shown and "Pareto front (3 trial(s)" in shown
    assert all(f"trial {n}: reward = " in shown for n in front_numbers)
    assert main(["studies", "--results-dir", str(tmp_path)]) == 0
    assert "front of 3" in capsys.readouterr().out


def test_a_metric_not_finite_at_the_end_fails_the_trial_naming_it(tmp_path):
    with pytest.raises(StudyFailedError) as info:
        _run(tmp_path, "nan", {"a": 1, "steps": 2, "nan_at": 2})
    (trial,) = info.value.analysis.trials
    assert trial.state == "FAIL" and "metric 'reward' is nan in the last result" in trial.error


def test_constraints_keep_the_front_feasible_and_fail_a_missing_key(tmp_path):
    config = {"a": tune.grid_search([1, 2]), "kl": tune.grid_search([0.01, 0.5])}
    analysis = _run(tmp_path, "kl", config, constraints=["kl <= 0.05"])
    feasible = {t.number for t in analysis.trials if t.config["kl"] == 0.01}
    assert {t.number for t in analysis.best_trials} == feasible == {t.number for t in analysis.study.best_trials}
    for frozen in analysis.study.trials:
        (violation,) = frozen.constraints.values()
        assert math.isclose(violation, analysis.trials[frozen.number].config["kl"] - 0.05)
    with pytest.raises(StudyFailedError) as info:
        _run(tmp_path, "missing", {"a": 1}, constraints=["entropy >= 0.1"])
    missing = info.value.analysis
    assert missing.trials[0].state == "FAIL" and "constraint 'entropy >= 0.1': 'entropy' is missing" in missing.trials[0].error


def test_single_objective_prefers_the_feasible_best(tmp_path):
    analysis = tune.run(objectives, config={"a": tune.grid_search([1, 5]), "kl": tune.sample_from(lambda spec: 0.0)},
                        metric="reward", results_dir=str(tmp_path), name="single", verbose=0, tracking=False,
                        constraints=["cost <= 10"])
    assert analysis.best_config["a"] == 1  # a = 5 has more reward but cost 15 > 10
    assert analysis.study.best_trial.number == analysis.best_trial.number


def test_pareto_pruning_prunes_a_dominated_trial_not_a_front_member(tmp_path):
    # one trial at a time: the two good trials (a=3, b=1) run first; then a dominated one and a tie with them
    config = {"a": tune.grid_search([3, 3, 1, 3]), "b": tune.grid_search([1]), "steps": 4}
    analysis = _run(tmp_path, "prune", config, scheduler={"type": "pareto", "k": 2, "warmup_steps": 1})
    states = [t.state for t in analysis.trials]
    assert states == ["COMPLETE", "COMPLETE", "PRUNED", "COMPLETE"]
    pruned = analysis.trials[2]
    assert pruned.training_iteration == 2  # warmup: not at step 1; dominated by both at step 2
    stored = analysis.study.trials[2].user_attrs
    assert stored["objectives@1"] == [1.0, 1.0] and "objectives@3" not in stored


def test_pareto_pruning_needs_k_dominating_members_and_waits_for_warmup(tmp_path):
    config = {"a": tune.grid_search([3, 1]), "b": tune.grid_search([1]), "steps": 3}
    k2 = _run(tmp_path, "k2", config, scheduler={"type": "pareto", "k": 2})
    assert [t.state for t in k2.trials] == ["COMPLETE", "COMPLETE"]  # only one trial dominates the second
    warm = _run(tmp_path, "warm", config, scheduler={"type": "pareto", "k": 1, "warmup_steps": 3})
    assert [t.state for t in warm.trials] == ["COMPLETE", "COMPLETE"]
    k1 = _run(tmp_path, "k1", config, scheduler={"type": "pareto", "k": 1})
    assert [t.state for t in k1.trials] == ["COMPLETE", "PRUNED"] and k1.trials[1].training_iteration == 1


# -- the runner's parts: values per step, a re-run's replacing them, the end told to Optuna ----
def _mo_state(tmp_path, **fields):
    import optuna

    from rltune.orchestrator._events import Observers
    from rltune.orchestrator._study_setup import study_dir_of
    from rltune.orchestrator._study_state import StudyState
    from rltune.orchestrator._trial_end import TrialEnding
    from rltune.orchestrator._trial_setup import TrialSetup

    plan = make_plan({"run": objectives, "config": {"a": 1}, **MO, "results_dir": str(tmp_path), "name": "parts",
                      "tracking": False, "n_trials": 2, **fields})
    state = StudyState(plan, Observers(), "run-id", study_dir_of(str(tmp_path), plan.name))
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    state.study = optuna.create_study(directions=plan.directions)
    setup = TrialSetup(state, TrialEnding(state), resumable=[], retries=[], started_total=0, start_time=0.0)
    return state, setup


def test_step_values_are_kept_per_step_and_a_rerun_replaces_them(tmp_path):
    import json
    import time

    from rltune.orchestrator._intermediate import backfill, report

    state, setup = _mo_state(tmp_path)
    setup.start_time = time.monotonic()
    a = setup.next_trial()
    (a.trial_dir / "result.json").write_text("\n".join(
        json.dumps({"training_iteration": i, "reward": float(i), "cost": 10.0 - i}) for i in (1, 2, 3)) + "\n")
    a.checkpoint_iteration = 2
    backfill(a, MO["metric"])
    assert a.reported == {1: (1.0, 9.0), 2: (2.0, 8.0)} and a.last_result["training_iteration"] == 2
    report(a, 2, (5.0, 1.0))  # the step run again after a restore
    attrs = state.study.trials[0].user_attrs
    assert attrs["objectives@1"] == [1.0, 9.0] and attrs["objectives@2"] == [5.0, 1.0]
    assert state.study.trials[0].intermediate_values == {}  # Optuna takes none in a multi-objective study


def test_the_end_gives_optuna_the_values_and_the_constraints(tmp_path):
    import time

    from rltune.orchestrator._decision import Outcome
    from rltune.orchestrator._trial_end import TrialEnding

    state, setup = _mo_state(tmp_path, constraints=["kl <= 0.05", "reward >= 2"])
    setup.start_time = time.monotonic()
    a = setup.next_trial()
    state.active.append(a)
    a.outcome, a.reason = Outcome.COMPLETE, "done"
    a.last_result = {"training_iteration": 3, "reward": 3.0, "cost": 4.0, "kl": 0.07}
    TrialEnding(state).done(a)
    (frozen,) = state.study.trials
    assert frozen.state.name == "COMPLETE" and frozen.values == [3.0, 4.0]
    assert frozen.constraints == {"kl <= 0.05": pytest.approx(0.02), "reward >= 2": pytest.approx(-1.0)}
    assert state.study.best_trials == []  # infeasible: KL over its bound


def test_resume_checks_the_directions_of_every_metric(tmp_path):
    config = {"a": tune.grid_search([1, 2]), "steps": 2}
    first = _run(tmp_path, "again", config)
    again = _run(tmp_path, "again", config, resume=True)
    assert [t.number for t in again.best_trials] == [t.number for t in first.best_trials] and len(again.trials) == 2
    with pytest.raises(ConfigError, match=r"maximizes/minimizes differently \(MAXIMIZE, MINIMIZE\) than mode"):
        _run(tmp_path, "again", config, resume=True, mode=["max", "max"])


# -- Ray Tune 2.x's Tuner --------------------------------------------------------------------
def _tuner_front(tmp_path, name: str, tune_config):
    from rltune import train

    tuner = tune.Tuner(objectives, param_space={"a": tune.grid_search([1, 2, 3]), "b": tune.grid_search([None, 9])},
                       tune_config=tune_config, run_config=train.RunConfig(name=name, storage_path=str(tmp_path),
                                                                           verbose=0))
    return tuner.fit()


@pytest.mark.parametrize("how", ["tune_config", "optuna_search"])
def test_a_tuner_takes_several_metrics_and_its_results_give_the_front(tmp_path, how):
    if how == "tune_config":
        config = tune.TuneConfig(metric=["reward", "cost"], mode=["max", "min"])
    else:  # Ray Tune's way: the searcher holds the metrics
        config = tune.TuneConfig(search_alg=tune.OptunaSearch(metric=["reward", "cost"], mode=["max", "min"]))
    results = _tuner_front(tmp_path, how, config)
    assert [d.name for d in results.analysis.study.directions] == ["MAXIMIZE", "MINIMIZE"]
    front = results.best_results
    assert sorted(r.config["a"] for r in front) == [1, 2, 3] and all(r.config["b"] is None for r in front)
    with pytest.raises(ConfigError, match="several metrics.*best_results"):
        results.get_best_result()
    assert results.get_best_result(metric="cost").metrics["cost"] == 3.0  # ranked by the study's mode of cost: min
    assert results.get_best_result(metric="reward", mode="max").config["a"] == 3


def test_a_tuner_s_single_metric_best_results_is_its_best(tmp_path):
    results = _tuner_front(tmp_path, "one", tune.TuneConfig(metric="reward", mode="min"))
    assert [r.config["a"] for r in results.best_results] == [1]


@pytest.mark.parametrize("make, expected", [
    (lambda: tune.TuneConfig(metric=["reward", 3]), "metric: must be a result key"),
    (lambda: tune.TuneConfig(metric=["reward"], mode=["max", "up"]), "mode: Input should be 'max' or 'min'"),
])
def test_a_tune_config_s_bad_metrics_are_refused_by_name(make, expected):
    with pytest.raises(ConfigError, match=expected):
        make()


def test_a_scheduler_refuses_several_metrics_naming_where_they_go():
    with pytest.raises(ConfigError, match=r"OptunaSearch\(metric=\[...\]\)"):
        tune.ASHAScheduler(metric=["reward", "cost"], mode="max")
