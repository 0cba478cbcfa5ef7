"""Rollout workers take typed request messages, run by type: no method-name strings, no parsing of rltune's own
error text (issue 25)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import rltune.trainers
from rltune._ipc import Continue
from rltune.env import register_env
from rltune.errors import WorkerError
from rltune.trainers import PPO
from rltune.trainers.sampling._worker_messages import GetPolicySpaces, IsMultiAgent

from .test_worker_restarts import DiesWhileStarting

TRAINERS = Path(rltune.trainers.__file__).resolve().parent
TINY = {"num_workers": 1, "num_envs_per_worker": 1, "rollout_fragment_length": 10, "train_batch_size": 10,
        "sgd_minibatch_size": 10, "num_sgd_iter": 1, "model": {"fcnet_hiddens": [8]}}


@pytest.mark.timeout(120)
def test_a_message_a_worker_does_not_take_is_an_error_naming_its_type_and_the_worker_goes_on():
    trainer = PPO(config=TINY, env="CartPole-v1")
    try:
        (worker,) = trainer.workers.remote_workers
        with pytest.raises(WorkerError, match=r"rollout worker 1 got a message it does not take: rltune\._ipc\.Continue"):
            worker.call(Continue())  # a message of the trial channel, not a worker request
        assert worker.call(IsMultiAgent()) is False
        assert set(worker.call(GetPolicySpaces())) == {"default_policy"}
        trainer.train()
    finally:
        trainer.stop()


def _string_addressed_calls(source: str) -> list[int]:
    """Lines where a worker is addressed by a method-name string: ``.call("x")``, ``_call_remote("x")``,
    ``Call("x")``, ``getattr(worker, name)``."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
        first = node.args[0]
        if name in ("call", "send", "_call_remote", "call_remote", "Call") and isinstance(first, ast.Constant) \
                and isinstance(first.value, str):
            lines.append(node.lineno)
        elif name == "getattr" and isinstance(first, ast.Name) and first.id == "worker" and len(node.args) > 1 \
                and not isinstance(node.args[1], ast.Constant):  # getattr(worker, "worker_index", 0) reads a field
            lines.append(node.lineno)
    return lines


def test_no_worker_call_is_addressed_by_a_method_name_string():
    hits = [f"{path.relative_to(TRAINERS.parent)}:{line}" for path in sorted(TRAINERS.rglob("*.py"))
            for line in _string_addressed_calls(path.read_text())]
    assert not hits, "worker calls by method-name string (send a message of rltune.trainers.sampling._worker_messages):\n" + \
        "\n".join(hits)
    assert _string_addressed_calls('w.call("sample")\nws._call_remote("set_weights", 1)\ngetattr(worker, fn)()\n') \
        == [1, 2, 3]


@pytest.mark.timeout(120)
def test_a_worker_that_dies_while_starting_is_named_whole_in_the_error(tmp_path):
    # The message was cut at the first " (set" (rltune parsed its own error text): here inside the env's name.
    (tmp_path / "deaths").write_text("5")
    name = "dies (set up) env"
    register_env(name, lambda config: DiesWhileStarting(config))
    config = {**TINY, "recreate_failed_workers": True, "max_num_worker_restarts": 0, "env_config": {"dir": str(tmp_path)}}
    with pytest.raises(WorkerError) as info:
        PPO(config=config, env=name)
    message = str(info.value)
    assert f"of env {name!r} died" in message and "while starting; gave up after 0 restarts" in message, message
