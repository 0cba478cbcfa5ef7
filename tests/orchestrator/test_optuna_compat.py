"""Optuna's private names are used in one adapter module only, and do what rltune needs on every storage it opens."""

import re
import uuid
import warnings
from pathlib import Path

import optuna
import pytest
from postgres_server import postgres_url
from private_names import private_uses

import rltune
from rltune.orchestrator._optuna_compat import replace_intermediate_value, retry_of
from rltune.orchestrator._storage import open_storage

ADAPTER = "rltune/orchestrator/_optuna_compat.py"
# an optuna module or attribute with a leading underscore, a private attribute of an Optuna object
# (by the names rltune gives them), and the private names rltune needed before the adapter
PRIVATE = re.compile(
    r"\boptuna(\.\w+)*\._\w"
    r"|\b(study|trial|frozen|storage|retry|resumed)\._[a-z]\w*"
    r"|\._(trial_id|study_id|thread_local|pop_waiting_trial_id|cached_all_trials|backend)\b"
    r"|\bsystem_attrs\b|\b_CachedStorage\b"
)


def test_no_private_optuna_name_outside_the_adapter():
    hits = private_uses(PRIVATE, ADAPTER)
    assert not hits, "private Optuna names outside " + ADAPTER + ":\n" + "\n".join(hits)


def test_the_adapter_is_what_the_grep_catches():
    text = (Path(rltune.__file__).resolve().parent / "orchestrator" / "_optuna_compat.py").read_text()
    assert PRIVATE.search(text)  # the pattern finds the private uses where they are allowed


def test_retry_info_of_a_trial():
    retry = optuna.trial.create_trial(state=optuna.trial.TrialState.WAITING,
                                      system_attrs={"failed_trial": 0, "retry_history": [0, 4]})
    assert retry_of(retry) == (0, [0, 4])  # the first failed trial is number 0: still a retry
    assert retry_of(optuna.trial.create_trial(state=optuna.trial.TrialState.WAITING)) == (None, [])


@pytest.fixture(params=["journal", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def storage_url(request, tmp_path):
    """The storages rltune opens (its journal, an RDB through its reconnecting class) as the URLs that name them."""
    if request.param == "journal":
        return None
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'optuna.db'}"
    return postgres_url()


def test_a_reported_step_is_replaced_in_storage_and_for_the_pruner(storage_url, tmp_path):
    name = f"replace_{uuid.uuid4().hex[:8]}"
    study = optuna.create_study(study_name=name, storage=open_storage(storage_url, tmp_path),
                                pruner=optuna.pruners.ThresholdPruner(upper=20.0))
    try:
        trial = study.ask()
        trial.report(13.0, step=3)
        assert not trial.should_prune()
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # not Optuna's "already reported" warning: the value is replaced
            replace_intermediate_value(trial, 3, 23.0)
            replace_intermediate_value(trial, 4, 24.0)  # a step not reported yet is set as well
        assert trial.should_prune()  # the pruner sees the new value (the trial's own copy)
        reader = optuna.load_study(study_name=name, storage=open_storage(storage_url, tmp_path))
        assert reader.trials[0].intermediate_values == {3: 23.0, 4: 24.0}  # stored
    finally:
        optuna.delete_study(study_name=name, storage=open_storage(storage_url, tmp_path))
