"""Optuna's private names are used in one adapter module only; its retry info comes from Optuna's public API."""

import re
from pathlib import Path

import optuna
from private_names import private_uses

import rltune
from rltune.orchestrator._optuna_compat import retry_of

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
