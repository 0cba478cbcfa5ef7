"""PBT's rules, pure: quantiles, explore (Ray's), and the scheduler's decisions over a population in Optuna's storage."""

import random
from types import SimpleNamespace

import optuna
import pytest

from rltune import tune
from rltune.errors import ConfigError
from rltune.orchestrator._decision import ExploitTrial, Proceed
from rltune.orchestrator._pbt import (IN_FORCE, LAST, LINEAGE, PopulationBasedTraining, ancestry_tags, config_in_force,
                                     quantiles)
from rltune.orchestrator._pbt_settings import PBTSettings, explore, mutate, parse_pbt
from rltune.orchestrator._spec import make_plan

from .trainables import counter

optuna.logging.set_verbosity(optuna.logging.WARNING)
MUTATIONS = {"lr": {"loguniform": [1e-5, 1e-2]}, "clip_param": [0.1, 0.2, 0.3], "lambda": {"uniform": [0.9, 1.0]}}


def test_quantiles_take_ceil_of_the_fraction_at_most_half_the_population():
    scores = {0: 1.0, 1: 5.0, 2: 3.0, 3: 4.0, 4: 2.0}
    assert quantiles(scores, 0.25) == ([0, 4], [3, 1])
    assert quantiles({0: 1.0}, 0.5) == ([], [])  # one member: nobody to exploit
    assert quantiles({0: 1.0, 1: 2.0}, 0.25) == ([0], [1])


def test_explore_perturbs_by_ray_factors_moves_lists_one_step_and_keeps_ranges():
    settings = PBTSettings(hyperparam_mutations=MUTATIONS, resample_probability=0.0)
    seen = set()
    for seed in range(40):
        new, changed = explore({"lr": 1e-3, "clip_param": 0.2, "lambda": 0.95, "env": "X"}, settings, random.Random(seed))
        assert new["lr"] == pytest.approx(1.2e-3) or new["lr"] == pytest.approx(0.8e-3)
        assert new["clip_param"] in (0.1, 0.3) and new["env"] == "X"
        assert 0.9 <= new["lambda"] <= 1.0  # 0.95 * 1.2 clipped to the entry's range
        assert changed == {"lr": new["lr"], "clip_param": new["clip_param"], "lambda": new["lambda"]}
        seen.add(new["clip_param"])
    assert seen == {0.1, 0.3}


def test_explore_resamples_with_resample_probability_and_values_outside_a_list():
    always = PBTSettings(hyperparam_mutations=MUTATIONS, resample_probability=1.0)
    for seed in range(20):
        value = mutate(1e-3, MUTATIONS["lr"], always, random.Random(seed))
        assert 1e-5 <= value <= 1e-2 and value not in (1.2e-3, 0.8e-3)
    never = PBTSettings(hyperparam_mutations=MUTATIONS, resample_probability=0.0)
    assert mutate(0.25, [0.1, 0.2, 0.3], never, random.Random(0)) in (0.1, 0.2, 0.3)
    assert isinstance(mutate(64, {"randint": [16, 257]}, never, random.Random(0)), int)


def test_custom_explore_fn_runs_after_explore_and_its_changes_are_recorded():
    settings = PBTSettings(hyperparam_mutations={"lr": [1e-3, 2e-3]}, custom_explore_fn=lambda c: {**c, "gamma": 0.9})
    new, changed = explore({"lr": 1e-3, "gamma": 0.99}, settings, random.Random(0))
    assert new["gamma"] == 0.9 and changed["gamma"] == 0.9 and "lr" in changed


@pytest.mark.parametrize("scheduler, fragment", [
    ({"type": "pbt", "hyperparam_mutations": {"lr": "x"}}, "scheduler.hyperparam_mutations.lr: must be a search entry"),
    ({"type": "pbt"}, "give at least one hyperparameter to mutate"),
    ({"type": "pbt", "synch": "sometimes", "hyperparam_mutations": {"lr": [1]}}, "scheduler.synch: Input should be a valid boolean"),
    ({"type": "pbt", "quantile_fraction": 0.7, "hyperparam_mutations": {"lr": [1]}}, "scheduler.quantile_fraction"),
    ({"type": "pbt", "hyperparam_mutations": {"lr": {"loguniform": [0, 1]}}}, "needs [low, high]"),
])
def test_bad_pbt_settings_are_one_clear_problem(scheduler, fragment):
    assert any(fragment in p for p in parse_pbt(scheduler, {})[2])


def test_a_mutation_key_missing_from_the_config_is_drawn_from_its_mutation():
    plan = make_plan({"run": "PPO", "config": {"env": "CartPole-v1"}, "scheduler": {
        "type": "pbt", "hyperparam_mutations": {"lr": {"loguniform": [1e-4, 1e-2]}, "clip_param": [0.1, 0.3]}}})
    assert sorted(p.name for p in plan.space.sampled) == ["clip_param", "lr"]
    assert plan.pruner_name == "none" and isinstance(plan.scheduler, PBTSettings)


def test_a_function_trainable_with_pbt_is_refused():
    with pytest.raises(ConfigError, match="PBT runs trainer trainables"):
        make_plan({"run": counter, "scheduler": {
            "type": "pbt", "hyperparam_mutations": {"x": [1, 2]}}})


# -- the scheduler over a population in storage -------------------------------------------------
def population(n, mode="max", scheduler=None):
    """A PBT scheduler over ``n`` RUNNING trials of an in-memory study (members: trial, number, iteration, config)."""
    scheduler = scheduler or {"type": "pbt", "perturbation_interval": 2, "quantile_fraction": 0.25,
                              "hyperparam_mutations": {"lr": {"loguniform": [1e-4, 1e-2]}}}
    plan = make_plan({"run": "PPO", "config": {"env": "CartPole-v1", "lr": {"loguniform": [1e-4, 1e-2]}},
                      "mode": mode, "scheduler": scheduler})
    study = optuna.create_study(direction=plan.direction)
    members = []
    for _ in range(n):
        trial = study.ask({"lr": optuna.distributions.FloatDistribution(1e-4, 1e-2, log=True)})
        members.append(SimpleNamespace(trial=trial, number=trial.number, iteration=0,
                                       config={"env": "CartPole-v1", "lr": trial.params["lr"]}))
    state = SimpleNamespace(plan=plan, spec=plan.spec, study=study, configs={m.number: m.config for m in members})
    return PopulationBasedTraining(state, plan.scheduler), members, study


_population = population


def _at(scheduler, member, iteration, value):
    member.iteration = iteration
    return scheduler.decide(member, {}, value, Proceed())


def test_members_in_step_exploit_at_their_next_interval():
    """Members that reach each interval together (warm starts, equal speed): the first judged ranks among few
    scores, yet it checkpoints, so the bottom member exploits at the next interval."""
    scheduler, members, study = _population(4)
    for m, score in zip(members, (1.0, 5.0, 6.0, 7.0)):
        assert _at(scheduler, m, 2, score) == Proceed(checkpoint=True)  # no member has a committed checkpoint yet
        m.trial.set_user_attr("checkpoint", f"/t/trial_{m.number:05d}/checkpoint_000002")
    for m, score in zip(members[1:], (5.0, 6.0, 7.0)):
        assert _at(scheduler, m, 4, score) == Proceed(checkpoint=True)
    decision = _at(scheduler, members[0], 4, 1.0)
    assert isinstance(decision, ExploitTrial) and decision.source in (2, 3)


def test_between_intervals_the_decision_is_the_pruners_and_nothing_is_recorded():
    scheduler, (a, b), _ = _population(2)
    assert _at(scheduler, a, 1, 5.0) == Proceed()
    assert LAST not in a.trial.user_attrs


def test_the_bottom_member_exploits_a_top_member_only_once_that_has_a_checkpoint():
    scheduler, members, study = _population(4)
    for m, score in zip(members[1:], (5.0, 6.0, 7.0)):
        _at(scheduler, m, 2, score)
    assert _at(scheduler, members[3], 4, 8.0) == Proceed(checkpoint=True)  # the top member saves one at its interval
    assert _at(scheduler, members[2], 4, 6.5) == Proceed(checkpoint=True)  # so does every member that goes on
    assert _at(scheduler, members[0], 2, 1.0) == Proceed(checkpoint=True)  # the top one's is not committed yet
    members[3].trial.set_user_attr("checkpoint", "/t/trial_00003/checkpoint_000002")
    decision = _at(scheduler, members[0], 4, 1.0)
    assert isinstance(decision, ExploitTrial) and decision.source == 3
    assert decision.checkpoint == "/t/trial_00003/checkpoint_000002"
    assert decision.config["env"] == "CartPole-v1" and decision.config["lr"] == decision.changed["lr"]
    attrs = study.trials[0].user_attrs
    assert attrs[LINEAGE] == [{"iteration": 4, "source": 3, "checkpoint": "/t/trial_00003/checkpoint_000002",
                               "changed": decision.changed}]
    assert attrs[IN_FORCE] == {"origin": 3, "values": {"lr": decision.config["lr"]}}
    assert attrs[LAST] == {"iteration": 4, "score": 1.0}


def test_mode_min_exploits_the_lowest_values():
    scheduler, members, _ = _population(2, mode="min")
    members[0].trial.set_user_attr("checkpoint", "/c0")
    _at(scheduler, members[0], 2, 1.0)
    decision = _at(scheduler, members[1], 2, 9.0)
    assert isinstance(decision, ExploitTrial) and decision.source == 0


def test_a_failed_member_leaves_the_population_and_the_others_go_on():
    scheduler, members, study = _population(3)
    members[2].trial.set_user_attr("checkpoint", "/c2")
    _at(scheduler, members[2], 2, 9.0)
    _at(scheduler, members[1], 2, 5.0)
    study.tell(members[2].trial, state=optuna.trial.TrialState.FAIL)  # the best member errored
    assert _at(scheduler, members[0], 2, 1.0) == Proceed(checkpoint=True)  # nobody with a checkpoint is left above


def test_the_population_is_read_from_storage_by_a_new_scheduler_as_after_a_resume_or_on_another_worker():
    scheduler, members, study = _population(2)
    members[1].trial.set_user_attr("checkpoint", "/c1")
    _at(scheduler, members[1], 2, 9.0)
    fresh = PopulationBasedTraining(scheduler.state, scheduler.settings)  # no memory of the first one
    decision = _at(fresh, members[0], 2, 1.0)
    assert isinstance(decision, ExploitTrial) and decision.source == 1
    resumed = study.trials[0]
    assert config_in_force(scheduler.state.plan, study, resumed)["lr"] == decision.config["lr"]


def test_tune_population_based_training_is_the_study_scheduler():
    pbt = tune.PopulationBasedTraining(metric="score", mode="min", perturbation_interval=3,
                                       hyperparam_mutations={"lr": tune.loguniform(1e-4, 1e-2)})
    part = pbt.study_part()
    assert part.fields["scheduler"]["type"] == "pbt" and part.metric == "score" and part.mode == "min"
    with pytest.raises(ConfigError, match="synch='yes': must be True or False"):
        tune.PopulationBasedTraining(synch="yes", hyperparam_mutations={"lr": [1]})
    with pytest.raises(ConfigError, match="time_attr"):
        tune.PopulationBasedTraining(time_attr="time_total_s", hyperparam_mutations={"lr": [1]})


def test_each_result_carries_the_numeric_values_in_force_and_an_exploit_tags_its_ancestry():
    scheduler, (a, _), _ = _population(2)
    result = {"config": {"env": "CartPole-v1", "lr": 0.002}}
    scheduler.annotate(a, result)
    assert result["hyperparams"] == {"lr": 0.002}  # one MLflow metric per hyperparameter: the schedule
    tags = ancestry_tags([{"iteration": 4, "source": 3, "checkpoint": "/c", "changed": {"lr": 0.002}}])
    assert tags["rltune.pbt.exploited"] == "trial 3 at iteration 4" and '"source": 3' in tags["rltune.pbt.lineage"]
    assert ancestry_tags(None) == {}


def test_a_trial_that_exploited_restarts_from_its_last_committed_checkpoint_not_a_later_numbered_one(tmp_path):
    from rltune.orchestrator._pbt import restart_checkpoint

    scheduler, (a, _), _ = _population(2)
    for n in (2, 4):  # checkpoint_000004: its own weights before it exploited a trial at iteration 2
        (tmp_path / f"checkpoint_{n:06d}").mkdir()
    (tmp_path / "checkpoint_000003").mkdir()  # saved after the exploit (restored iteration 2, trained one more)
    a.trial_dir = tmp_path
    assert restart_checkpoint(a)[0] == 4  # no exploit: the latest
    a.trial.set_user_attr(LINEAGE, [{"iteration": 4, "source": 1, "checkpoint": "/c", "changed": {}}])
    a.trial.set_user_attr("checkpoint", str(tmp_path / "checkpoint_000003"))
    assert restart_checkpoint(a) == (3, str(tmp_path / "checkpoint_000003"))
