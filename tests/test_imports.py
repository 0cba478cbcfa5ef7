"""Import strings saved before rltune.trainers was split into sub-packages still name the same objects."""

from __future__ import annotations

from rltune._imports import current_import_string, import_object
from rltune.trainers import DQNPolicy, PPOPolicy


def test_an_import_string_of_a_moved_module_names_the_same_object():
    # A checkpoint saved by an earlier rltune names its policy classes by their module then.
    assert import_object("rltune.trainers._ppo:PPOPolicy", "policy_class") is PPOPolicy
    assert import_object("rltune.trainers._dqn.DQNPolicy", "policy_class") is DQNPolicy


def test_a_saved_class_name_is_compared_under_its_current_module():
    assert current_import_string("rltune.trainers._ppo:PPOPolicy") == f"{PPOPolicy.__module__}:PPOPolicy"
    assert current_import_string("my_pkg.policies:Mine") == "my_pkg.policies:Mine"
