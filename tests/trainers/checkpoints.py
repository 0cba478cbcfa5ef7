"""Helpers for tests that edit checkpoint files on purpose."""

from __future__ import annotations

import json
from pathlib import Path

from rltune.trainers.checkpoints import _checkpoint as ckpt


def reseal(path: Path) -> None:
    """Recompute a checkpoint's checksums after an edit: a consistent checkpoint that is wrong inside."""
    meta_file = path / "rltune_checkpoint.json"
    metadata = json.loads(meta_file.read_text())
    if "checksums" in metadata:
        metadata["checksums"] = {name: ckpt._sha256(path / name) for name in metadata["checksums"] if (path / name).exists()}
        metadata["metadata_sha256"] = ckpt.metadata_checksum(metadata)
    meta_file.write_text(json.dumps(metadata))
