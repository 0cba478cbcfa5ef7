"""The callback hook API: where and in which order hooks run, the forms of ``config["callbacks"]``,
and the error a raising hook gives."""

from __future__ import annotations

import inspect
import os
import re

import pytest

from rltune.callbacks import DefaultCallbacks
from rltune.errors import CallbackError, ConfigError
from rltune.trainers import PPO
from trainer_params import iteration_config

from .envs import MODULE, ImportedMetric, TaskEnv, TaskMetrics, find_callbacks

HOOKS = (
    "on_trainer_init",
    "on_environment_created",
    "on_episode_start",
    "on_episode_step",
    "on_episode_end",
    "on_sample_end",
    "on_train_result",
    "on_checkpoint_saved",
    "on_checkpoint_loaded",
    "on_worker_recreated",
)
TINY = {
    "rollout_fragment_length": 6,
    "model": {"fcnet_hiddens": [8]},
    "env_config": {"episode_len": 4, "task": 1},
}


def tiny(trainer_cls, steps: int = 12, **config) -> dict:
    """TINY for ``trainer_cls``, sampling ``steps`` env steps per iteration, with ``config`` on top."""
    return {**TINY, **iteration_config(trainer_cls, steps), **config}


class Recorder(DefaultCallbacks):
    """Records every hook call, in order, in ``self.calls`` (per callbacks instance)."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def on_trainer_init(self, *, trainer, **kwargs):
        self.calls.append(("trainer_init", trainer.iteration))

    def on_environment_created(self, *, env, env_context, worker=None, **kwargs):
        self.calls.append(("env_created", env_context.worker_index, env_context.vector_index, worker.worker_index))

    def on_episode_start(self, *, episode, env, env_index, worker=None, **kwargs):
        self.calls.append(("start", env_index, episode.episode_id, episode.length))

    def on_episode_step(self, *, episode, env, env_index, worker=None, **kwargs):
        self.calls.append(("step", env_index, episode.episode_id, episode.length))

    def on_episode_end(self, *, episode, env, env_index, worker=None, **kwargs):
        self.calls.append(("end", env_index, episode.episode_id, episode.length))

    def on_sample_end(self, *, samples, worker=None, **kwargs):
        self.calls.append(("sample_end", samples.env_steps, worker.worker_index))

    def on_train_result(self, *, trainer, result, **kwargs):
        self.calls.append(("train_result", result["training_iteration"]))
        result["added_by_callback"] = {"iteration": trainer.iteration}

    def on_checkpoint_saved(self, *, trainer, path, **kwargs):
        self.calls.append(("checkpoint_saved", path))

    def on_checkpoint_loaded(self, *, trainer, **kwargs):
        self.calls.append(("checkpoint_loaded", trainer.iteration))


def test_every_hook_takes_keyword_arguments_only_plus_kwargs():
    for hook in HOOKS:
        params = list(inspect.signature(getattr(DefaultCallbacks, hook)).parameters.values())[1:]
        kinds = {p.kind for p in params}
        assert kinds == {inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.VAR_KEYWORD}, hook
    with pytest.raises(TypeError):
        DefaultCallbacks().on_train_result(None, {})


# --- the lifecycle, in one process ------------------------------------------------------------


@pytest.fixture(scope="module")
def recorded(trainer_cls, tmp_path_factory):
    """A local trainer (2 envs) trained 2 iterations, saved and restored; the calls its callbacks saw."""
    tmp = tmp_path_factory.mktemp("lifecycle")
    config = tiny(trainer_cls, num_envs_per_worker=2, callbacks=Recorder)
    with trainer_cls(config=config, env=TaskEnv, results_dir=tmp) as trainer:
        results = [trainer.train() for _ in range(2)]
        path = trainer.save(tmp / "checkpoint")
        trainer.restore(path)
        trainer_calls = list(trainer.callbacks.calls)
        worker_calls = trainer.foreach_worker(lambda w: list(w.callbacks.calls))[0]
        trainer_instance_is_worker_instance = trainer.callbacks is trainer.workers.local_worker.callbacks
    with trainer_cls.from_checkpoint(path, results_dir=tmp) as restored:
        restored_calls = list(restored.callbacks.calls)
    return {
        "results": results,
        "path": path,
        "trainer": trainer_calls,
        "worker": worker_calls,
        "restored": restored_calls,
        "shared": trainer_instance_is_worker_instance,
    }


def test_trainer_process_hooks_in_lifecycle_order(recorded):
    assert recorded["trainer"] == [
        ("trainer_init", 0),
        ("train_result", 1),
        ("train_result", 2),
        ("checkpoint_saved", recorded["path"]),
        ("checkpoint_loaded", 2),
    ]


def test_on_train_result_may_add_keys_to_the_result(recorded):
    assert [r["added_by_callback"] for r in recorded["results"]] == [{"iteration": 1}, {"iteration": 2}]


def test_on_checkpoint_loaded_fires_in_from_checkpoint(recorded):
    assert recorded["restored"] == [("trainer_init", 0), ("checkpoint_loaded", 2)]


def test_workers_have_their_own_callbacks_instance(recorded):
    assert not recorded["shared"]


def test_environment_created_before_any_episode(recorded):
    calls = recorded["worker"]
    assert calls[:2] == [("env_created", 0, 0, 0), ("env_created", 0, 1, 0)]
    assert not [c for c in calls[2:] if c[0] == "env_created"]


def test_episode_hooks_start_step_end_per_episode_and_sample_end_per_fragment(recorded):
    calls = recorded["worker"][2:]
    assert [c for c in calls if c[0] == "sample_end"] == [("sample_end", 12, 0)] * 2
    # Fragments of 6 steps, episodes of 4: hooks of episodes that span two fragments interleave; per env:
    for env_index in (0, 1):
        mine = [c for c in calls if c[0] in ("start", "step", "end") and c[1] == env_index]
        kinds = [c[0] for c in mine]
        assert kinds == ["start"] + (["step"] * 4 + ["end", "start"]) * 3  # 12 steps: 3 episodes, a 4th started
        ids = [c[2] for c in mine]
        episodes = [ids[0:6], ids[6:12], ids[12:18]]
        assert all(len(set(e)) == 1 for e in episodes) and len({e[0] for e in episodes} | {ids[18]}) == 4
        assert [c[3] for c in mine[:6]] == [0, 1, 2, 3, 4, 4]  # length as each hook sees it
    # on_sample_end comes after the episode hooks of its fragment.
    first_sample_end = calls.index(("sample_end", 12, 0))
    assert sum(1 for c in calls[:first_sample_end] if c[0] == "step") == 12


# --- the forms of config["callbacks"] -------------------------------------------------------------


class FirstInOrder(DefaultCallbacks):
    def on_train_result(self, *, trainer, result, **kwargs):
        result.setdefault("order", []).append("FirstInOrder")


@pytest.mark.parametrize(
    "spec, order",
    [
        (ImportedMetric, ["ImportedMetric"]),
        (f"{MODULE}:ImportedMetric", ["ImportedMetric"]),
        (f"{MODULE}.ImportedMetric", ["ImportedMetric"]),
        ([FirstInOrder, f"{MODULE}:ImportedMetric"], ["FirstInOrder", "ImportedMetric"]),
        ([f"{MODULE}:ImportedMetric", FirstInOrder], ["ImportedMetric", "FirstInOrder"]),
    ],
)
def test_callbacks_as_class_import_string_or_list_run_in_order(trainer_cls, spec, order, tmp_path):
    with trainer_cls(config=tiny(trainer_cls, callbacks=spec), env=TaskEnv, results_dir=tmp_path) as trainer:
        result = trainer.train()
    assert result["order"] == order
    assert result["custom_metrics"]["imported_max"] == 100  # worker 0's episode hook ran


@pytest.mark.parametrize(
    "spec, expected",
    [
        ("no_such_module:Thing", ["callbacks", "cannot import", "no_such_module"]),
        (f"{MODULE}:NoSuchClass", ["callbacks", "cannot import", "NoSuchClass"]),
        ([TaskMetrics, "builtins:dict"], ["callbacks[1]", "not a DefaultCallbacks subclass"]),
        (42, ["callbacks", "not a DefaultCallbacks subclass"]),
    ],
)
def test_invalid_callbacks_are_a_config_error_naming_them(trainer_cls, spec, expected):
    with pytest.raises(ConfigError) as info:
        trainer_cls(config={"env": "CartPole-v1", "callbacks": spec})
    for text in expected:
        assert text in str(info.value)


# --- a raising hook ----------------------------------------------------------------------------


def raising_callbacks(hook: str) -> type:
    def raise_(self, **kwargs):
        raise ValueError(f"bad {hook}")

    return type(f"Raising_{hook}", (DefaultCallbacks,), {hook: raise_})


@pytest.mark.parametrize(
    "hook, where",
    [
        ("on_trainer_init", "trainer process"),
        ("on_environment_created", "worker 0, env 0"),
        ("on_episode_start", "worker 0, env 0, episode "),
        ("on_episode_step", "worker 0, env 0, episode "),
        ("on_episode_end", "worker 0, env 0, episode "),
        ("on_sample_end", "worker 0"),
        ("on_train_result", "trainer process"),
        ("on_checkpoint_saved", "trainer process"),
    ],
)
def test_a_raising_hook_is_a_callback_error_naming_hook_and_place(trainer_cls, hook, where, tmp_path):
    callbacks = raising_callbacks(hook)
    with pytest.raises(CallbackError) as info:
        with trainer_cls(config=tiny(trainer_cls, callbacks=callbacks), env=TaskEnv, results_dir=tmp_path) as trainer:
            trainer.train()
            trainer.save(tmp_path / "checkpoint")
    message = str(info.value)
    assert f"{callbacks.__name__}.{hook}" in message
    assert where in message
    assert f"ValueError: bad {hook}" in message


class ExplodingInWorker(DefaultCallbacks):
    """Raises in on_episode_end, naming the episode id itself (to compare with the error's)."""

    def on_episode_end(self, *, episode, **kwargs):
        raise ValueError(f"exploded in episode {episode.episode_id} of worker {episode.worker_index}")


def test_a_hook_raising_in_a_rollout_worker_is_a_callback_error_naming_hook_worker_and_episode(tmp_path):
    # PPO only (worker processes cost seconds): the error path is the rollout workers', which DQN samples through
    # too; its remote hooks run in the `remote` fixture below.
    config = tiny(PPO, num_workers=1, num_envs_per_worker=1, callbacks=ExplodingInWorker)
    with PPO(config=config, env=TaskEnv, results_dir=tmp_path) as trainer:
        with pytest.raises(CallbackError) as info:
            trainer.train()
        worker_pid = trainer.workers.remote_workers[0].pid
    assert type(info.value) is CallbackError  # not a WorkerError wrapping a traceback
    message = str(info.value)
    assert "ExplodingInWorker.on_episode_end" in message
    assert "worker 1, env 0" in message
    episode_id = re.search(r"episode (\d+)", message).group(1)
    assert f"ValueError: exploded in episode {episode_id} of worker 1" in message
    assert worker_pid != os.getpid()


# --- 2 rollout workers x 3 envs: per-worker instances, classes from this module and elsewhere -------


class PerWorker(DefaultCallbacks):
    """Defined in the test module: where its instance lives and where its hooks run."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.envs_created: list[tuple[int, int]] = []
        self.fragments: list[int] = []

    def on_environment_created(self, *, env, env_context, worker=None, **kwargs):
        self.envs_created.append((env_context.worker_index, env_context.vector_index))

    def on_episode_end(self, *, episode, env, env_index, worker=None, **kwargs):
        episode.custom_metrics["per_worker"] = 1000 + episode.worker_index
        episode.hist_data["hook_pid"] = [os.getpid()]
        episode.hist_data["instance_pid"] = [self.pid]
        episode.hist_data["env_pid"] = [episode.last_info()["pid"]]
        episode.hist_data["worker_arg"] = [worker.worker_index]

    def on_sample_end(self, *, samples, worker=None, **kwargs):
        self.fragments.append(samples.env_steps)

    def on_train_result(self, *, trainer, result, **kwargs):
        result.setdefault("order", []).append("PerWorker")


@pytest.fixture(scope="module")
def remote(trainer_cls, tmp_path_factory):
    """2 rollout workers x 3 envs, callbacks from this module, from a function and by import string; 2 iterations."""

    class DefinedInAFunction(DefaultCallbacks):  # not importable: shipped to the workers by value
        def on_episode_end(self, *, episode, **kwargs):
            episode.custom_metrics["local_class"] = 7 + episode.worker_index

    config = tiny(
        trainer_cls,
        48,
        num_workers=2,
        num_envs_per_worker=3,
        rollout_fragment_length=8,
        callbacks=[PerWorker, DefinedInAFunction, f"{MODULE}:ImportedMetric"],
    )
    with trainer_cls(config=config, env=TaskEnv, results_dir=tmp_path_factory.mktemp("remote")) as trainer:
        results = [trainer.train() for _ in range(2)]
        per_worker = trainer.foreach_worker(
            lambda w: (w.worker_index, os.getpid(), find_callbacks(w.callbacks, PerWorker).__dict__)
        )
        yield {
            "results": results,
            "per_worker": per_worker,
            "worker_pids": [w.pid for w in trainer.workers.remote_workers],
            "trainer_instance": find_callbacks(trainer.callbacks, PerWorker).__dict__,
        }


def test_callbacks_defined_anywhere_run_in_the_worker_processes(remote):
    for result in remote["results"]:
        metrics = result["custom_metrics"]
        assert (metrics["per_worker_min"], metrics["per_worker_max"]) == (1001, 1002)  # this module
        assert (metrics["local_class_min"], metrics["local_class_max"]) == (8, 9)  # a function's local class
        assert (metrics["imported_min"], metrics["imported_max"]) == (101, 102)  # an import string


def test_list_of_callbacks_runs_in_order_in_the_trainer(remote):
    assert [r["order"] for r in remote["results"]] == [["PerWorker", "ImportedMetric"]] * 2


def test_episode_hooks_run_in_the_process_owning_the_env(remote):
    hist = remote["results"][-1]["hist_stats"]
    assert len(hist["hook_pid"]) == 12
    assert hist["hook_pid"] == hist["env_pid"] == hist["instance_pid"]
    assert set(hist["hook_pid"]) == set(remote["worker_pids"])
    pid_of = dict(zip((1, 2), remote["worker_pids"]))
    assert [pid_of[w] for w in hist["worker_arg"]] == hist["hook_pid"]  # the worker argument is the env's worker


def test_each_worker_has_its_own_callbacks_instance(remote):
    trainer_pid = os.getpid()
    (local_index, local_pid, local), *workers = remote["per_worker"]
    assert (local_index, local_pid, local["envs_created"]) == (0, trainer_pid, [])  # no envs in the trainer
    for (index, pid, state), expected_pid in zip(workers, remote["worker_pids"]):
        assert pid == expected_pid == state["pid"]
        assert state["envs_created"] == [(index, 0), (index, 1), (index, 2)]
        assert state["fragments"] == [24, 24]  # 2 iterations of one round: 3 envs x 8 steps
    assert remote["trainer_instance"]["pid"] == trainer_pid
    assert remote["trainer_instance"]["envs_created"] == []
