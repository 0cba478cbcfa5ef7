"""PBT across workers on PostgreSQL: two ``rltune tune`` processes, one population, exploits across them.

The population's state is in the shared storage (``pbt_last``, the members'
``checkpoint``, ``pbt_config``): a member run by one worker exploits a member
run by the other, and a member that fails is replaced once, by the worker that
recorded its failure. Needs ``$RLTUNE_TEST_POSTGRES_URL`` (see test_shared_storage.py).
"""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from rltune.orchestrator._pbt import LINEAGE, REPLACES
from .test_shared_storage import finish, load, new_database, pg_url, worker  # noqa: F401 - fixtures

pytestmark = pytest.mark.postgres

STUDY = """\
name: shared
run: PPO
metric: member_rank
mode: max
num_samples: 2
search_alg: random
seed: 0
heartbeat_interval_s: 1
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
  callbacks: tests.orchestrator.pbt_callbacks:SlowFailingMember
"""


def test_two_workers_share_one_population_exploit_each_others_members_and_replace_a_failed_one(tmp_path, pg_url):
    """Trial 1 errors at its third iteration: the worker that records its failure enqueues one replacement."""
    path = tmp_path / "shared.yaml"
    path.write_text(textwrap.dedent(STUDY))
    env = {"PYTHONPATH": f"{tmp_path}{os.pathsep}{Path(__file__).resolve().parents[2]}"}  # the callbacks' module
    results = finish([worker(path, pg_url, tmp_path / "results", extra_env=env) for _ in range(2)])
    assert all(code == 0 for code, _, _ in results), results
    trials = load(pg_url).get_trials(deepcopy=False)
    assert [t.state.name for t in trials] == ["COMPLETE", "FAIL", "COMPLETE"]  # one replacement, run to its stop
    assert trials[2].user_attrs.get(REPLACES) == 1
    owners = {t.number: json.dumps(t.user_attrs.get("owner"), sort_keys=True) for t in trials}
    assert len(set(owners.values())) == 2  # one member on each worker
    steps = [(t.number, s) for t in trials for s in t.user_attrs.get(LINEAGE) or []]
    assert steps, "no member exploited the other"
    for number, step in steps:
        assert owners[step["source"]] != owners[number]  # the other worker's member, read from the storage
        assert Path(step["checkpoint"]).parent == Path(trials[step["source"]].user_attrs["trial_dir"])
