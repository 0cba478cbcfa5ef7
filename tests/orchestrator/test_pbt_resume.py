"""PBT after kill -9 of the orchestrator: ``--resume`` continues each member with the config in force.

The population's state is in the study's storage (``pbt_config``,
``pbt_lineage``): a trial that exploited another before the kill resumes with
its explored hyperparameters, not its params' (in result.json and in what the
learner applies).
"""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import optuna
import pytest

from rltune.orchestrator._pbt import IN_FORCE, LINEAGE

STUDY = """\
name: pbt
run: PPO
metric: member_rank
mode: max
num_samples: 2
max_concurrent: 2
checkpoint_freq: 1
search_alg: random
seed: 0
stop: {training_iteration: 10}
scheduler:
  type: pbt
  perturbation_interval: 2
  quantile_fraction: 0.5
  resample_probability: 0.0
  hyperparam_mutations:
    lr: {loguniform: [1.0e-4, 1.0e-2]}
config:
  env: CartPole-v1
  num_workers: 0
  train_batch_size: 64
  rollout_fragment_length: 64
  sgd_minibatch_size: 32
  num_sgd_iter: 1
  model: {fcnet_hiddens: [16]}
  callbacks: tests.orchestrator.pbt_callbacks:KillOrchestratorAfterExploit
"""


def _tune(path: Path, *args: str) -> subprocess.CompletedProcess:
    repo = Path(__file__).resolve().parents[2]
    return subprocess.run([sys.executable, "-m", "rltune.orchestrator.cli", "tune", str(path), "--results-dir",
                           str(path.parent / "results"), "--quiet", *args], capture_output=True, text=True,
                          timeout=400, cwd=repo, env={**__import__("os").environ, "RLTUNE_TRACKING": "0",
                                                         "RLTUNE_WARM_START": "wait"})  # members start together


def test_kill_9_mid_schedule_then_resume_continues_with_the_explored_config(tmp_path):
    path = tmp_path / "pbt.yaml"
    path.write_text(textwrap.dedent(STUDY))
    first = _tune(path)
    assert first.returncode != 0 and (tmp_path / "results" / "pbt" / "killed").exists(), first.stderr[-2000:]
    resumed = _tune(path, "--resume")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    study = optuna.load_study(study_name="pbt", storage=optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(tmp_path / "results" / "pbt" / "study.journal"))))
    assert [t.state.name for t in study.trials] == ["COMPLETE", "COMPLETE"]
    exploiting = [t for t in study.trials if t.user_attrs.get(LINEAGE)]
    assert exploiting
    for t in exploiting:
        results = [json.loads(line) for line in Path(t.user_attrs["trial_dir"], "result.json").read_text().splitlines()]
        assert results[-1]["training_iteration"] == 10
        in_force = t.user_attrs[IN_FORCE]["values"]["lr"]
        assert results[-1]["config"]["lr"] == pytest.approx(in_force)
        for r in results:
            assert r["info"]["learner"]["default_policy"]["cur_lr"] == pytest.approx(r["config"]["lr"])
