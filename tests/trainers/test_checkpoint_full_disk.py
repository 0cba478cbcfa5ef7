"""A checkpoint saved on a full disk: a CheckpointError naming the path and "no space left on device" (not
torch's "unexpected pos"), the checkpoint already there kept whole and loadable, no temporary directory left.

The disk is a real tmpfs filled with a ballast file (tests/mounts.py).
"""

from __future__ import annotations

import re

import pytest

from mounts import fill, mount_problem, tmpfs
from rltune.errors import CheckpointError
from rltune.trainers import PPO

pytestmark = pytest.mark.skipif(mount_problem() is not None, reason=str(mount_problem()))

TINY = {"env": "CartPole-v1", "num_workers": 0, "train_batch_size": 64, "rollout_fragment_length": 64,
        "sgd_minibatch_size": 32, "num_sgd_iter": 1, "model": {"fcnet_hiddens": [16]}, "seed": 0}


def test_a_checkpoint_on_a_full_disk_is_refused_by_name_and_the_previous_one_is_kept(tmp_path):
    trainer = PPO(config=TINY)
    try:
        with tmpfs(tmp_path / "disk", "1m") as disk:
            trainer.train()
            saved = trainer.save(disk / "checkpoint")
            weights = trainer.get_policy().get_weights()
            fill(disk)
            trainer.train()
            for target, kept in ((disk / "checkpoint", True), (disk / "another", False)):  # over the last one; new
                with pytest.raises(CheckpointError, match=re.escape(
                        f"cannot write checkpoint '{target}': no space left on device")) as raised:
                    trainer.save(target)
                assert "unexpected pos" not in str(raised.value)
                assert ("the checkpoint already there is kept" in str(raised.value)) == kept
            assert sorted(p.name for p in disk.iterdir()) == ["ballast", "checkpoint"]  # no temporary directory
            trainer.restore(saved)  # whole: its checksums hold
            assert trainer.iteration == 1
            restored = trainer.get_policy().get_weights()
            assert all((restored[k] == weights[k]).all() for k in weights)
    finally:
        trainer.stop()
