"""Checkpoints: exact round trips, counters that continue, clear errors, atomic directories."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from rltune.errors import CheckpointError
from rltune.trainers import PPO, Trainer

from .envs import ContextEnv

CONFIG = {
    "num_envs_per_worker": 2,
    "rollout_fragment_length": 10,
    "train_batch_size": 40,
    "sgd_minibatch_size": 20,
    "num_sgd_iter": 2,
    "model": {"fcnet_hiddens": [16]},
    "seed": 3,
    "lr": 1e-3,
}


def assert_same_weights(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)


def weights_differ(a: dict, b: dict) -> bool:
    return any(not np.array_equal(a[k], b[k]) for k in a)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A PPO trained for 2 iterations, its checkpoint, and what it held when saved."""
    trainer = PPO(config=CONFIG, env=ContextEnv)
    for _ in range(2):
        trainer.train()
    path = trainer.save(tmp_path_factory.mktemp("ckpt") / "checkpoint")
    saved = {
        "weights": trainer.get_policy().get_weights(),
        "iteration": trainer.iteration,
        "timesteps_total": trainer.timesteps_total,
    }
    yield trainer, path, saved
    trainer.stop()


def test_save_returns_a_directory_with_the_documented_files(trained):
    _, path, _ = trained
    path = Path(path)
    assert path.is_dir()
    assert {"rltune_checkpoint.json", "state.pt"} <= set(os.listdir(path))
    metadata = json.loads((path / "rltune_checkpoint.json").read_text())
    assert metadata["algorithm"] == "PPO"
    assert metadata["iteration"] == 2 and metadata["timesteps_total"] == 80


def test_restore_gives_identical_weights_and_continues_the_counters(trained):
    _, path, saved = trained
    with PPO(config=CONFIG, env=ContextEnv) as fresh:
        assert weights_differ(fresh.get_policy().get_weights(), saved["weights"])  # so the restore has work to do
        fresh.restore(path)
        assert_same_weights(fresh.get_policy().get_weights(), saved["weights"])
        assert (fresh.iteration, fresh.timesteps_total) == (2, 80)
        result = fresh.train()
        assert result["training_iteration"] == 3
        assert result["timesteps_total"] == 120
        assert weights_differ(fresh.get_policy().get_weights(), saved["weights"])


def test_restore_into_a_trainer_with_remote_workers(trained):
    _, path, saved = trained
    with PPO(config={**CONFIG, "num_workers": 1}, env=ContextEnv) as other:
        other.restore(path)
        assert_same_weights(other.get_policy().get_weights(), saved["weights"])
        # Every rollout worker got the restored weights.
        for weights in other.foreach_worker(lambda w: w.get_policy().get_weights()):
            assert_same_weights(weights, saved["weights"])
        result = other.train()
        assert result["training_iteration"] == 3
        assert result["timesteps_total"] == 80 + 40
        for weights in other.foreach_worker(lambda w: w.get_policy().get_weights()):
            assert_same_weights(weights, other.get_policy().get_weights())


def test_from_checkpoint_rebuilds_the_algorithm_with_overrides(trained):
    _, path, saved = trained
    restored = Trainer.from_checkpoint(path, {"lr": 5e-4})
    try:
        assert isinstance(restored, PPO)
        assert restored.config["lr"] == 5e-4
        assert restored.config["model"]["fcnet_hiddens"] == [16]
        assert restored.config["train_batch_size"] == 40
        assert_same_weights(restored.get_policy().get_weights(), saved["weights"])
        assert restored.train()["training_iteration"] == 3
    finally:
        restored.stop()


def test_saving_twice_to_the_same_dir_replaces_it_atomically(trained, tmp_path):
    trainer, _, _ = trained
    target = tmp_path / "ckpt"
    first = trainer.save(target)
    trainer.train()
    second = trainer.save(target)
    assert Path(first) == Path(second) == target.resolve()
    metadata = json.loads((target / "rltune_checkpoint.json").read_text())
    assert metadata["iteration"] == trainer.iteration
    # No temporary or old directories are left next to the checkpoint.
    assert sorted(os.listdir(tmp_path)) == ["ckpt"]
    with PPO(config=CONFIG, env=ContextEnv) as fresh:
        fresh.restore(target)
        assert_same_weights(fresh.get_policy().get_weights(), trainer.get_policy().get_weights())


def test_save_without_a_dir_writes_a_numbered_checkpoint_in_the_results_dir(tmp_path):
    with PPO(config=CONFIG, env=ContextEnv, results_dir=tmp_path) as trainer:
        trainer.train()
        path = Path(trainer.save())
    assert path.name == "checkpoint_000001"
    assert tmp_path in path.parents
    assert (path / "rltune_checkpoint.json").exists()


def test_a_save_that_fails_midway_keeps_the_old_checkpoint(trained, tmp_path, monkeypatch):
    trainer, _, _ = trained
    target = tmp_path / "ckpt"
    trainer.save(target)
    before = {name: (target / name).read_bytes() for name in os.listdir(target)}

    def failing_save(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", failing_save)
    with pytest.raises(OSError, match="disk full"):
        trainer.save(target)
    monkeypatch.undo()
    assert sorted(os.listdir(tmp_path)) == ["ckpt"]  # no partial or temporary directory left
    assert {name: (target / name).read_bytes() for name in os.listdir(target)} == before


def test_from_checkpoint_asks_for_config_values_it_could_not_save(tmp_path):
    def creator(ctx):  # a local function: cannot be saved as an import string
        return ContextEnv(ctx)

    with PPO(config=CONFIG, env=creator) as trainer:
        trainer.train()
        path = trainer.save(tmp_path / "ckpt")
        weights = trainer.get_policy().get_weights()
    with pytest.raises(CheckpointError) as info:
        Trainer.from_checkpoint(path)
    assert "'env'" in str(info.value) and "config_overrides" in str(info.value)
    restored = Trainer.from_checkpoint(path, {"env": creator})
    try:
        assert_same_weights(restored.get_policy().get_weights(), weights)
        assert restored.iteration == 1
    finally:
        restored.stop()


def test_save_into_a_dir_holding_other_files_does_not_delete_them(trained, tmp_path):
    """save(dir) on a directory that is not a checkpoint must not silently wipe the user's files."""
    trainer, _, _ = trained
    target = tmp_path / "my_results"
    target.mkdir()
    (target / "notes.txt").write_text("mine")
    try:
        trainer.save(target)
    except CheckpointError:
        pass  # refusing is fine too
    assert (target / "notes.txt").exists(), "save() deleted a file it did not write"


# --- what cannot be restored -------------------------------------------------------------


def _copy_checkpoint(src: str, dst: Path) -> Path:
    dst.mkdir()
    for name in os.listdir(src):
        (dst / name).write_bytes((Path(src) / name).read_bytes())
    return dst


@pytest.fixture()
def fresh():
    trainer = PPO(config=CONFIG, env=ContextEnv)
    yield trainer
    trainer.stop()


def test_missing_checkpoint_dir(fresh, tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        fresh.restore(tmp_path / "nope")
    with pytest.raises(CheckpointError, match="does not exist"):
        Trainer.from_checkpoint(tmp_path / "nope")


def test_dir_that_is_not_a_checkpoint(fresh, tmp_path):
    with pytest.raises(CheckpointError, match="rltune_checkpoint.json"):
        fresh.restore(tmp_path)


def test_truncated_state_file(trained, fresh, tmp_path):
    path = _copy_checkpoint(trained[1], tmp_path / "ckpt")
    data = (path / "state.pt").read_bytes()
    (path / "state.pt").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError) as info:
        fresh.restore(path)
    assert "state.pt" in str(info.value) and "corrupt" in str(info.value)


def test_missing_state_file(trained, fresh, tmp_path):
    path = _copy_checkpoint(trained[1], tmp_path / "ckpt")
    (path / "state.pt").unlink()
    with pytest.raises(CheckpointError, match="state.pt"):
        fresh.restore(path)


@pytest.mark.parametrize("garbage", ["{not json", "", "[1, 2, 3]", '{"algorithm": "PPO"}'])
def test_garbage_metadata(trained, fresh, tmp_path, garbage):
    path = _copy_checkpoint(trained[1], tmp_path / "ckpt")
    (path / "rltune_checkpoint.json").write_text(garbage)
    with pytest.raises(CheckpointError) as info:
        fresh.restore(path)
    assert "rltune_checkpoint.json" in str(info.value)
    with pytest.raises(CheckpointError):
        Trainer.from_checkpoint(path)


def test_checkpoint_of_another_algorithm(fresh, tmp_path):
    class OtherAlgo(PPO):
        name = "OtherAlgo"

    other = OtherAlgo(config=CONFIG, env=ContextEnv)
    try:
        path = other.save(tmp_path / "other")
    finally:
        other.stop()
    with pytest.raises(CheckpointError) as info:
        fresh.restore(path)
    assert "OtherAlgo" in str(info.value) and "PPO" in str(info.value)


def test_dqn_checkpoint_into_ppo(fresh, tmp_path):
    from rltune.trainers import DQN

    dqn = DQN(config={"model": {"fcnet_hiddens": [16]}}, env=ContextEnv)
    try:
        path = dqn.save(tmp_path / "dqn")
    finally:
        dqn.stop()
    with pytest.raises(CheckpointError) as info:
        fresh.restore(path)
    assert "DQN" in str(info.value) and "PPO" in str(info.value)
    # Trainer.from_checkpoint picks the algorithm the checkpoint names.
    restored = Trainer.from_checkpoint(path)
    try:
        assert isinstance(restored, DQN)
    finally:
        restored.stop()


def test_checkpoint_of_an_incompatible_model(trained, tmp_path):
    _, path, _ = trained
    with PPO(config={**CONFIG, "model": {"fcnet_hiddens": [32, 32]}}, env=ContextEnv) as bigger:
        with pytest.raises(CheckpointError) as info:
            bigger.restore(path)
    message = str(info.value)
    assert str(path) in message and "does not fit" in message


def test_failed_restore_leaves_the_trainer_unchanged(trained):
    """A CheckpointError from restore() must not leave a half-loaded model behind."""
    _, path, _ = trained
    with PPO(config={**CONFIG, "model": {"fcnet_hiddens": [32]}}, env=ContextEnv) as other:
        other.train()
        before = other.get_policy().get_weights()
        with pytest.raises(CheckpointError):
            other.restore(path)
        after = other.get_policy().get_weights()
        assert other.iteration == 1
        changed = sorted(k for k in before if not np.array_equal(before[k], after[k]))
        assert changed == [], f"a failed restore overwrote {changed}"


def test_after_restore_training_still_moves_the_weights_through_the_flat_tensor(tmp_path):
    from rltune.trainers import DQN

    for cls, config in ((PPO, {"train_batch_size": 64, "sgd_minibatch_size": 32, "num_sgd_iter": 2, "seed": 0}),
                        (DQN, {"learning_starts": 32, "rollout_fragment_length": 32, "train_batch_size": 16,
                               "min_sample_timesteps_per_iteration": 64, "seed": 0})):
        with cls(config=config, env="CartPole-v1") as trainer:
            trainer.train()
            path = trainer.save(tmp_path / cls.__name__)
        with cls(config=config, env="CartPole-v1") as restored:
            restored.restore(path)
            before = restored.get_policy().get_weights()
            restored.train()
            model = restored.get_policy().model
            flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
            torch.testing.assert_close(restored.flat_params.param.detach(), flat)
            after = restored.get_policy().get_weights()
            assert any(not np.array_equal(before[k], after[k]) for k in before), cls.__name__
