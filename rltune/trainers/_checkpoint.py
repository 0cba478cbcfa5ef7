"""Checkpoint directories: written atomically, loaded without unpickling arbitrary objects.

Layout of a checkpoint directory::

    rltune_checkpoint.json   format version, algorithm, counters, config, RNG state (JSON)
    state.pt                 tensors only (weights, optimizer state, torch RNG), loaded with weights_only=True
    <extra>.npz              optional numpy arrays (e.g. a replay buffer), loaded with allow_pickle=False

The directory is written under a temporary name and renamed into place, so
a reader sees either the old checkpoint or the complete new one.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rltune.errors import CheckpointError

FORMAT_VERSION = 1
METADATA_FILE = "rltune_checkpoint.json"
TENSORS_FILE = "state.pt"


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_checkpoint(
    path: str | os.PathLike[str],
    metadata: dict[str, Any],
    tensors: dict[str, Any],
    arrays: dict[str, dict[str, np.ndarray]] | None = None,
) -> Path:
    """Write a checkpoint directory at ``path`` atomically (replacing one that exists); return its path."""
    target = Path(path).resolve()
    if target.exists() and not (target / METADATA_FILE).exists():
        if not target.is_dir() or any(target.iterdir()):
            raise CheckpointError(
                f"cannot save a checkpoint to {str(target)!r}: it exists and is not an rltune checkpoint "
                "(its files would be lost); choose a new or empty directory"
            )
        target.rmdir()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{target.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        meta = dict(metadata, format_version=FORMAT_VERSION)
        with open(tmp / METADATA_FILE, "w") as f:
            json.dump(meta, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        with open(tmp / TENSORS_FILE, "wb") as f:
            torch.save(tensors, f)
            f.flush()
            os.fsync(f.fileno())
        for name, columns in (arrays or {}).items():
            with open(tmp / f"{name}.npz", "wb") as f:
                np.savez(f, **columns)
                f.flush()
                os.fsync(f.fileno())
        _fsync_dir(tmp)
        if target.exists():
            old = target.parent / f".{target.name}.old-{uuid.uuid4().hex[:8]}"
            os.rename(target, old)
            os.rename(tmp, target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, target)
        _fsync_dir(target.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def read_metadata(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The JSON metadata of a checkpoint; :class:`CheckpointError` if missing, partial or corrupt."""
    directory = Path(path)
    if not directory.exists():
        raise CheckpointError(f"checkpoint {str(directory)!r} does not exist")
    if not directory.is_dir():
        raise CheckpointError(f"checkpoint {str(directory)!r} is not a directory (rltune checkpoints are directories)")
    meta_file = directory / METADATA_FILE
    if not meta_file.exists():
        raise CheckpointError(f"{str(directory)!r} is not an rltune checkpoint: {METADATA_FILE} is missing")
    try:
        with open(meta_file) as f:
            metadata = json.load(f)
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"checkpoint {str(directory)!r}: {METADATA_FILE} is corrupt ({exc})") from None
    if not isinstance(metadata, dict) or "format_version" not in metadata:
        raise CheckpointError(f"checkpoint {str(directory)!r}: {METADATA_FILE} has no format_version")
    if metadata["format_version"] != FORMAT_VERSION:
        raise CheckpointError(
            f"checkpoint {str(directory)!r} has format version {metadata['format_version']}, "
            f"this rltune reads version {FORMAT_VERSION}"
        )
    return metadata


def read_tensors(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The tensors of a checkpoint, loaded with ``weights_only=True`` (no arbitrary unpickling)."""
    tensor_file = Path(path) / TENSORS_FILE
    if not tensor_file.exists():
        raise CheckpointError(f"checkpoint {str(path)!r} is partial: {TENSORS_FILE} is missing")
    try:
        return torch.load(tensor_file, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise CheckpointError(f"checkpoint {str(path)!r}: {TENSORS_FILE} is corrupt or unsafe ({exc})") from None


def read_arrays(path: str | os.PathLike[str], name: str) -> dict[str, np.ndarray] | None:
    """The numpy arrays saved under ``name``, or None if the checkpoint has none."""
    array_file = Path(path) / f"{name}.npz"
    if not array_file.exists():
        return None
    try:
        with np.load(array_file, allow_pickle=False) as data:
            return {k: data[k] for k in data.files}
    except Exception as exc:
        raise CheckpointError(f"checkpoint {str(path)!r}: {name}.npz is corrupt ({exc})") from None


def json_safe(value: Any) -> Any:
    """A JSON-serialisable form of a config value: classes and functions as 'module:qualname'."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    module = getattr(value, "__module__", None)
    qualname = getattr(value, "__qualname__", None)
    if module and qualname and "<" not in qualname and module != "__main__":
        return f"{module}:{qualname}"
    return {"__unserializable__": repr(value)}
