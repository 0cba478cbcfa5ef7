"""Synchronous PBT (``synch: true``): a member waits at each interval for the others, then exploits that interval's
checkpoint of a top member."""

from pathlib import Path

from rltune import tune
from rltune.orchestrator._pbt import LINEAGE

from .test_pbt_study import CONFIG as STUDY_CONFIG
from .test_pbt_study import _results

CONFIG = {**STUDY_CONFIG, "callbacks": "orchestrator.pbt_callbacks:UnevenRankedMembers"}


def test_members_wait_for_each_other_at_every_interval_and_exploit_that_interval_s_checkpoint(tmp_path):
    # member_rank: trial 0 on top, 1 and 2 at 0; one member at each end (3 x 0.34, at most half): 1 exploits 0
    pbt = tune.PopulationBasedTraining(perturbation_interval=2, quantile_fraction=0.34, resample_probability=0.0,
                                       hyperparam_mutations={"lr": [1e-3, 2e-3, 5e-3]}, synch=True)
    analysis = tune.run("PPO", config=CONFIG, stop={"training_iteration": 6}, num_samples=3, max_concurrent=3,
                        metric="member_rank", mode="max", scheduler=pbt, seed=0, results_dir=str(tmp_path),
                        name="synch", tracking=False, verbose=0)
    trials = analysis.study.trials
    assert [t.state.name for t in trials] == ["COMPLETE"] * 3
    walls = {t.number: {r["training_iteration"]: r["wall"] for r in _results(t.user_attrs["trial_dir"])}
             for t in trials}
    for interval in (2, 4):  # the slow trial 2 reaches each interval last; nobody trains on before it does
        reached = max(w[interval] for w in walls.values())
        assert min(w[interval + 1] for w in walls.values()) > reached, (interval, walls)
    lineage = trials[1].user_attrs[LINEAGE]
    assert [step["iteration"] for step in lineage] == [2, 4]
    for step in lineage:  # the source's checkpoint of that very interval, saved while trial 1 waited
        assert step["source"] == 0 and Path(step["checkpoint"]).name == f"checkpoint_{step['iteration']:06d}"
    assert not trials[0].user_attrs.get(LINEAGE) and not trials[2].user_attrs.get(LINEAGE)


def test_synch_is_taken_from_study_files_and_ray_s_names():
    from rltune.orchestrator._pbt_settings import parse_pbt
    from rltune.orchestrator._ray_schedulers import PB2

    settings, _, problems = parse_pbt({"type": "pbt", "synch": True, "hyperparam_mutations": {"lr": [1e-3]}}, {})
    assert not problems and settings.synch
    assert PB2(synch=True, hyperparam_bounds={"lr": [1e-4, 1e-2]}).fields["synch"] is True
