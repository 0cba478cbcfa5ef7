"""seeds_per_trial: a configuration judged on several seeds, the aggregate reaching the pruner at every step."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from rltune import tune
from rltune.orchestrator.cli import main
from rltune.orchestrator._seed_stats import aggregate, aggregate_result, bootstrap_ci, derive_seed

from .trainables import seeded

# x = 1 is lucky on seeds 0 and 1 (the seeds of trials 0 and 1): +6, on those seeds only. x = 2 is better on any seed.
LUCKY = {"x": tune.grid_search([1, 2]), "lucky_x": 1, "lucky": 6.0, "lucky_seeds": [0, 1], "steps": 3}


def _results(trial_dir: str | Path) -> list[dict]:
    return [json.loads(line) for line in (Path(trial_dir) / "result.json").read_text().splitlines()]


def test_aggregates_and_their_interval():
    assert aggregate([1, 2, 6], "mean") == 3
    assert aggregate([1, 2, 6], "median") == 2
    assert aggregate([1, 2, 3, 4, 5, 6, 7, 100], "iqm") == pytest.approx(4.5)  # the middle half: 3, 4, 5, 6
    assert aggregate([1, 2, 6], "min", "max") == 1 and aggregate([1, 2, 6], "min", "min") == 6  # the worst seed
    assert aggregate([1.0, float("nan"), None, 3.0], "mean") == 2  # values not reached are left out
    assert math.isnan(aggregate([None, float("nan")], "mean"))
    low, high = bootstrap_ci([1.0, 2.0, 3.0, 10.0], "mean")
    assert 1.0 <= low < aggregate([1.0, 2.0, 3.0, 10.0]) < high <= 10.0
    assert all(math.isnan(v) for v in bootstrap_ci([1.0], "mean"))


def test_an_aggregate_result_aggregates_every_number_and_keeps_each_seed():
    merged = aggregate_result([{"score": 1.0, "n": 10, "info": {"kl": 0.1}, "tag": "a"}, None,
                               {"score": 3.0, "n": 10, "info": {"kl": 0.3}, "tag": "b"}], [1.0, None, 3.0],
                              how="mean", mode="max")
    assert merged["score"] == 2.0 and merged["n"] == 10 and merged["info"]["kl"] == pytest.approx(0.2)
    assert merged["tag"] == "a" and merged["seeds"] == [1.0, None, 3.0] and merged["seeds_reached"] == 2


def test_derived_seeds_keep_the_trial_seed_first_and_differ():
    seeds = [derive_seed(7, i) for i in range(5)]
    assert seeds[0] == 7 and len(set(seeds)) == 5 and all(0 <= s < 2**31 for s in seeds)
    assert derive_seed(7, 1) == derive_seed(7, 1) and derive_seed(7, 0, "final") not in seeds


def test_a_function_trainable_gets_its_trial_seed_in_its_config(tmp_path):
    analysis = tune.run(seeded, config={"x": tune.grid_search([1, 2])}, metric="score", seed=40,
                        results_dir=str(tmp_path), name="plain", verbose=0)
    for trial in analysis.trials:
        assert trial.config["seed"] == 40 + trial.number
        assert (Path(trial.trial_dir) / "seeds.txt").read_text().split() == [str(40 + trial.number)]


def test_one_seed_picks_the_lucky_configuration(tmp_path):
    analysis = tune.run(seeded, config=LUCKY, metric="score", results_dir=str(tmp_path), name="one", verbose=0)
    assert analysis.best_config["x"] == 1  # 3 + 6 on its one seed, against 2 * 3


@pytest.mark.parametrize("seed_mode", ["parallel", "race"])
def test_three_seeds_pick_the_configuration_that_holds_on_other_seeds(tmp_path, seed_mode):
    analysis = tune.run(seeded, config=LUCKY, metric="score", seeds_per_trial=3, seed_mode=seed_mode,
                        results_dir=str(tmp_path), name=seed_mode, verbose=0)
    assert analysis.best_config["x"] == 2
    by_x = {t.user_attrs["config"]["x"]: t for t in analysis.study.trials}
    lucky = by_x[1]
    seeds = lucky.user_attrs["seeds"]
    assert seeds[0] == lucky.number and len(set(seeds)) == 3
    trial_dir = Path(lucky.user_attrs["trial_dir"])
    for i, seed in enumerate(seeds):  # each seed in its own directory, with its own config["seed"]
        assert (trial_dir / f"seed_{i}" / "seeds.txt").read_text().split() == [str(seed)]
    # the pruner saw the aggregate at every step: the mean over the three seeds, (t + 6 + t + t) / 3
    assert lucky.intermediate_values == {1: 3.0, 2: 4.0, 3: 5.0}
    assert lucky.value == 5.0 and by_x[2].value == 6.0
    last = _results(trial_dir)[-1]
    assert last["seeds"] == [9.0, 3.0, 3.0] and last["seeds_reached"] == 3 and last["seed_aggregate"] == "mean"
    assert last["seed_ci_low"] < 5.0 < last["seed_ci_high"]
    ci = lucky.user_attrs["seed_ci"]  # recorded per trial in Optuna, shown by rltune show
    assert ci["aggregate"] == "mean" and ci["value"] == 5.0 and ci["seeds"] == [9.0, 3.0, 3.0]
    assert (ci["low"], ci["high"]) == (last["seed_ci_low"], last["seed_ci_high"])
    assert by_x[2].user_attrs["seed_ci"]["low"] == by_x[2].user_attrs["seed_ci"]["high"] == 6.0  # all equal


@pytest.mark.parametrize("scheduler", [{"type": "median", "n_startup_trials": 1, "n_warmup_steps": 0},
                                       {"type": "asha", "min_resource": 2, "reduction_factor": 2}])
def test_a_race_prunes_on_the_running_aggregate_of_every_seed_and_starts_no_further_seed(tmp_path, scheduler):
    # x = 0 falls behind at once: pruned on its first seed. x = 1 is lucky (+7) on its first seed only: ahead of
    # x = 2 (2t) all along it, then its running aggregate over two seeds, t + 3.5, falls behind x = 2's at step
    # 4 (7.5 < 8): pruned in the middle of its second seed, no third seed
    config = {"x": tune.grid_search([2, 1, 0]), "lucky_x": 1, "lucky": 7.0, "lucky_seeds": [1], "steps": 6}
    analysis = tune.run(seeded, config=config, metric="score", seeds_per_trial=3, seed_mode="race",
                        scheduler=scheduler, results_dir=str(tmp_path), name="race", verbose=0)
    by_x = {t.config["x"]: t for t in analysis.trials}
    assert [by_x[x].state for x in (2, 1, 0)] == ["COMPLETE", "PRUNED", "PRUNED"]
    ran = _results(by_x[2].trial_dir)  # seeds one after another: steps 1..6 three times, the aggregate so far
    assert [r["training_iteration"] for r in ran] == list(range(1, 7)) * 3
    assert [r["seeds_reached"] for r in ran] == [1] * 6 + [2] * 6 + [3] * 6
    bad_dir = Path(by_x[0].trial_dir)
    assert (bad_dir / "seed_0").is_dir() and not (bad_dir / "seed_1").exists()
    lucky_dir = Path(by_x[1].trial_dir)
    assert [r["training_iteration"] for r in _results(lucky_dir / "seed_0")] == [1, 2, 3, 4, 5, 6]
    assert [r["training_iteration"] for r in _results(lucky_dir / "seed_1")] == [1, 2, 3, 4]  # not run to 6
    assert not (lucky_dir / "seed_2").exists()


def test_a_race_starts_no_further_seed_of_a_configuration_behind_the_best_ones_interval(tmp_path):
    # x = 2.5 stays above the median of x = 1 and x = 3 (2t) all along its first seed, but ends it at 5, below
    # x = 3's interval over its seeds ([6, 6]): it is clearly worse than the best, its second seed never starts
    analysis = tune.run(seeded, config={"x": tune.grid_search([1, 3, 2.5]), "steps": 5}, metric="score",
                        stop={"training_iteration": 2}, seeds_per_trial=3, seed_mode="race",
                        scheduler={"type": "median", "n_startup_trials": 1, "n_warmup_steps": 0},
                        results_dir=str(tmp_path), name="behind", verbose=0)
    by_x = {t.config["x"]: t for t in analysis.trials}
    assert [by_x[x].state for x in (1, 3, 2.5)] == ["COMPLETE", "COMPLETE", "PRUNED"]
    behind = Path(by_x[2.5].trial_dir)
    assert [r["training_iteration"] for r in _results(behind / "seed_0")] == [1, 2]
    assert not (behind / "seed_1").exists()
    assert analysis.best_config["x"] == 3


def test_ppo_on_cartpole_with_two_seeds_in_parallel(tmp_path):
    from rltune.orchestrator._spec import make_plan

    config = {"env": "CartPole-v1", "num_workers": 0, "train_batch_size": 128, "rollout_fragment_length": 64,
              "sgd_minibatch_size": 64, "num_sgd_iter": 1, "model": {"fcnet_hiddens": [8]}, "lr": 1e-3}
    plan = make_plan({"run": "PPO", "config": config, "seeds_per_trial": 2})
    assert plan.cpus_per_trial(config) == 2  # the CPU budget counts both seed processes
    assert make_plan({"run": "PPO", "config": config, "seeds_per_trial": 2, "seed_mode": "race"}).cpus_per_trial(config) == 1
    analysis = tune.run("PPO", config=config, stop={"training_iteration": 2}, seeds_per_trial=2,
                        checkpoint_at_end=True, results_dir=str(tmp_path), name="ppo", verbose=0)
    trial = analysis.trials[0]
    assert trial.state == "COMPLETE"
    seeds = analysis.study.trials[0].user_attrs["seeds"]
    per_seed = [_results(Path(trial.trial_dir) / f"seed_{i}") for i in range(2)]
    assert [len(r) for r in per_seed] == [2, 2]
    rewards = [r[-1]["episode_reward_mean"] for r in per_seed]
    assert rewards[0] != rewards[1]  # two seeds, two runs
    last = _results(trial.trial_dir)[-1]
    assert last["seeds"] == pytest.approx(rewards) and last["episode_reward_mean"] == pytest.approx(sum(rewards) / 2)
    assert last["timesteps_total"] == per_seed[0][-1]["timesteps_total"]
    checkpoint = Path(analysis.best_checkpoint)  # the group checkpoint holds each seed's
    assert {p.name for p in checkpoint.iterdir()} >= {"seed_0", "seed_1", "group.json"}
    params = [json.loads(p.read_text()) for p in sorted(Path(trial.trial_dir).glob("seed_*/params.json"))]
    assert [p["seed"] for p in params] == [p["config"]["seed"] for p in params] == seeds


def test_show_has_the_interval_of_each_seed_group(tmp_path, capsys):
    tune.run(seeded, config=LUCKY, metric="score", seeds_per_trial=3, results_dir=str(tmp_path), name="shown",
             verbose=0)
    capsys.readouterr()
    assert main(["show", "shown", "--results-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "seeds: 95% CI" in out and re.search(r"\[\d(\.\d+)?, \d(\.\d+)?\]", out), out


def test_final_evaluation_retrains_the_top_k_on_fresh_seeds_and_picks_on_those(tmp_path, capsys):
    kwargs = dict(config=LUCKY, metric="score", final_evaluation={"top_k": 2, "seeds": 3}, results_dir=str(tmp_path),
                  name="final", verbose=0)
    analysis = tune.run(seeded, **kwargs)
    # the search (one seed) ranks the lucky x = 1 first; on fresh seeds it scores 3 and x = 2 scores 6
    table = json.loads((tmp_path / "final" / "final_evaluation.json").read_text())
    assert [(r["search_value"], r["fresh_value"]) for r in table["rows"]] == [(6.0, 6.0), (9.0, 3.0)]
    assert [r["search_rank"] for r in table["rows"]] == [2, 1] and table["seeds"] == 3
    assert analysis.best_config["x"] == 2
    best = (tmp_path / "final" / "best_config.yaml").read_text()
    assert best.startswith("# Chosen by the final evaluation: 6 on 3 fresh seeds") and "x: 2" in best
    from rltune.orchestrator._listing import load_study

    search, _ = load_study(tmp_path / "final")
    final, _ = load_study(tmp_path / "final-final")
    used = {t.user_attrs["seed"] for t in search.trials}
    fresh = [s for t in final.trials for s in t.user_attrs["seeds"]]
    assert len(final.trials) == 2 and len(set(fresh)) == 6 and not set(fresh) & used
    capsys.readouterr()
    assert main(["show", "final", "--results-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "final evaluation on 3 fresh seeds" in out and "6 -> 6" in out and "9 -> 3" in out and "<- best" in out
    # resumed: the final evaluation is done, nothing is trained again, the choice is the same
    seeds_files = sorted((tmp_path / "final-final").glob("trial_*/seed_*/seeds.txt"))
    before = [p.read_text() for p in seeds_files]
    again = tune.run(seeded, resume=True, **kwargs)
    assert again.best_config["x"] == 2 and [p.read_text() for p in seeds_files] == before


@pytest.mark.parametrize("mode", ["parallel", "race"])
def test_a_failed_seed_fails_the_attempt_and_the_retry_continues_every_seed_from_the_group_checkpoint(tmp_path, mode):
    from .trainables import misbehaving

    analysis = tune.run(misbehaving, config={"mode": "flaky", "steps": 4}, metric="score", seeds_per_trial=2,
                        seed_mode=mode, checkpoint_freq=1, max_failures=3, results_dir=str(tmp_path), name=mode,
                        verbose=0)
    trial = analysis.trials[0]
    assert trial.state == "COMPLETE" and trial.value == 4.0
    error = (Path(trial.trial_dir) / "error.txt").read_text()
    assert re.search(r"seed [01] \(seed \d+\) failed:", error) and "flaky failure" in error  # (in parallel: either)
    for i in range(2):  # each seed failed once at step 2 and went on from its checkpoint of step 2
        assert [r["training_iteration"] for r in _results(Path(trial.trial_dir) / f"seed_{i}")] == [1, 2, 3, 4]
    assert analysis.study.trials[0].intermediate_values == {1: 1.0, 2: 2.0, 3: 3.0, 4: 4.0}
