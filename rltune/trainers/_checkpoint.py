"""Checkpoint directories: written atomically, loaded without unpickling arbitrary objects.

Layout of a checkpoint directory::

    rltune_checkpoint.json   format version, algorithm, counters, config, RNG state (JSON)
    state.pt                 tensors only (weights, optimizer state, torch RNG), loaded with weights_only=True
    <extra>.npz              optional numpy arrays (e.g. a replay buffer), loaded with allow_pickle=False

The directory is written under a temporary name and renamed into place, so
a reader sees either the old checkpoint or the complete new one.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import torch

from rltune.errors import CheckpointError, RLTuneError
from rltune.trainers._sample_batch import EpisodeMetrics

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
        tensors = torch.load(tensor_file, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise CheckpointError(f"checkpoint {str(path)!r}: {TENSORS_FILE} is corrupt or unsafe ({first_line(exc)})") from None
    if not isinstance(tensors, dict):
        raise CheckpointError(
            f"checkpoint {str(path)!r}: {TENSORS_FILE} holds {_describe(tensors)}, not a dict of the trainer's tensors"
        )
    return tensors


def read_arrays(path: str | os.PathLike[str], name: str) -> dict[str, np.ndarray] | None:
    """The numpy arrays saved under ``name``, or None if the checkpoint has none."""
    array_file = Path(path) / f"{name}.npz"
    if not array_file.exists():
        return None
    try:
        with np.load(array_file, allow_pickle=False) as data:
            return {k: data[k] for k in data.files}
    except Exception as exc:
        raise CheckpointError(f"checkpoint {str(path)!r}: {name}.npz is corrupt ({first_line(exc)})") from None


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


# -- what a trainer restores ----------------------------------------------------------------
_REQUIRED = object()


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (torch's run to many), for a one-line error."""
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def _describe(value: Any) -> str:
    text = repr(value)
    return f"{_a(type(value).__name__)}: {text if len(text) <= 60 else text[:57] + '...'}"


def _a(noun: str) -> str:
    return f"{'an' if noun[0] in 'aeiou' else 'a'} {noun}"


def _is(value: Any, kinds: tuple[type, ...]) -> bool:
    # JSON true/false load as bools, which are ints to isinstance: never accept one as a count.
    if isinstance(value, bool) and bool not in kinds:
        return False
    return isinstance(value, kinds)


def field_error(path: str | os.PathLike[str], name: str, problem: str, where: str = "metadata field") -> CheckpointError:
    """``checkpoint '<path>': metadata field '<name>' <problem>``."""
    return CheckpointError(f"checkpoint {str(path)!r}: {where} {name!r} {problem}")


class Fields:
    """Type-checked entries of a checkpoint's metadata (or tensors) dict; a wrong entry is a CheckpointError naming it."""

    def __init__(self, path: str | os.PathLike[str], values: dict[str, Any], where: str = "metadata field") -> None:
        self.path = path
        self.values = values
        self.where = where

    def error(self, name: str, problem: str) -> CheckpointError:
        """The error for entry ``name``: 'checkpoint ...: metadata field ``name`` ``problem``'."""
        return field_error(self.path, name, problem, self.where)

    def get(self, name: str, kind: type | tuple[type, ...], default: Any = _REQUIRED) -> Any:
        """Entry ``name``, which must be a ``kind`` (a bool is no int); ``default`` when absent, if given."""
        if name not in self.values:
            if default is _REQUIRED:
                raise self.error(name, "is missing")
            return default
        kinds = kind if isinstance(kind, tuple) else (kind,)
        value = self.values[name]
        if not _is(value, kinds):
            expected = " or ".join(_a("None" if k is type(None) else k.__name__) for k in kinds)
            raise self.error(name, f"must be {expected}, but is {_describe(value)}")
        return value

    def count(self, name: str, default: Any = _REQUIRED) -> int:
        """Entry ``name``, which must be an int >= 0."""
        value = self.get(name, int, default)
        if value < 0:
            raise self.error(name, f"must be >= 0, but is {value}")
        return value


@dataclass
class TrainerState:
    """What :meth:`Trainer.restore` loads, every entry checked; also a trainer's own state, to undo a failed restore."""

    iteration: int
    timesteps_total: int
    episodes_total: int
    time_total_s: float
    episode_window: list[EpisodeMetrics]
    last_evaluation: dict[str, Any] | None
    weights: dict[str, dict[str, Any]]  # model state dicts by policy id
    policy_rngs: dict[str, Any]  # numpy bit generator states by policy id
    numpy_rng: dict[str, Any] | None
    torch_rng: torch.Tensor | None
    algorithm_values: dict[str, Any]
    algorithm_tensors: dict[str, Any]
    callbacks_state: dict[str, Any]
    arrays: dict[str, dict[str, np.ndarray] | None] = field(default_factory=dict)
    env_tasks: dict[tuple[int, int], Any] = field(default_factory=dict)


def read_trainer_state(path: str | os.PathLike[str], algorithm: str) -> TrainerState:
    """Read and type-check a checkpoint that ``algorithm`` wrote; :class:`CheckpointError` naming the first wrong entry.

    What only the trainer can check (weights that fit its models, RNG
    states for its generators, arrays files) is left to it; ``arrays`` is empty.
    """
    meta = Fields(path, read_metadata(path))
    written_by = meta.get("algorithm", str)
    if written_by.upper() != algorithm.upper():
        raise CheckpointError(f"checkpoint {str(path)!r} was written by {written_by}, not {algorithm}")
    tensors = Fields(path, read_tensors(path), f"{TENSORS_FILE} entry")
    return TrainerState(
        iteration=meta.count("iteration"),
        timesteps_total=meta.count("timesteps_total"),
        episodes_total=meta.count("episodes_total", 0),
        time_total_s=float(meta.get("time_total_s", (int, float), 0.0)),
        episode_window=_episode_window(meta),
        last_evaluation=meta.get("last_evaluation", (dict, type(None)), None),
        weights=tensors.get("policies", dict),
        policy_rngs=meta.get("policy_rngs", dict, {}),
        numpy_rng=meta.get("numpy_rng", dict, None),
        torch_rng=_torch_rng_state(tensors),
        algorithm_values=meta.get("algorithm_state", dict, {}),
        algorithm_tensors=tensors.get("algorithm", dict, {}),
        callbacks_state=meta.get("callbacks_state", dict, {}),
        env_tasks=_env_tasks(meta),
    )


def _episode_window(meta: Fields) -> list[EpisodeMetrics]:
    window = []
    for i, entry in enumerate(meta.get("episode_window", list, [])):
        if not (
            isinstance(entry, list)
            and len(entry) in (2, 3)
            and _is(entry[0], (int, float))
            and _is(entry[1], (int,))
            and (len(entry) == 2 or isinstance(entry[2], dict))
        ):
            raise meta.error("episode_window", f"entry {i} is not [reward, length, custom_metrics]: {_describe(entry)}")
        custom = entry[2] if len(entry) == 3 else {}
        window.append(EpisodeMetrics(float(entry[0]), entry[1], custom_metrics=custom))
    return window


def _env_tasks(meta: Fields) -> dict[tuple[int, int], Any]:
    tasks = {}
    for i, entry in enumerate(meta.get("env_tasks", list, [])):
        if not (isinstance(entry, list) and len(entry) == 3 and all(_is(x, (int,)) and x >= 0 for x in entry[:2])):
            raise meta.error("env_tasks", f"entry {i} is not [worker_index, vector_index, task]: {_describe(entry)}")
        tasks[(entry[0], entry[1])] = entry[2]
    return tasks


def _torch_rng_state(tensors: Fields) -> torch.Tensor | None:
    state = tensors.get("torch_rng", torch.Tensor, None)
    if state is not None:
        try:
            torch.Generator().set_state(state)  # a throwaway generator: the global one stays as it is
        except Exception:
            raise tensors.error("torch_rng", "is not a valid torch CPU RNG state") from None
    return state


def valid_rng_state(state: Any, bit_generator: np.random.BitGenerator) -> bool:
    """Whether ``state`` can be set on a bit generator of ``bit_generator``'s type (tried on a new one)."""
    try:
        type(bit_generator)().state = state
    except Exception:  # TypeError, ValueError, KeyError or OverflowError, by what is malformed
        return False
    return True


@contextlib.contextmanager
def loading(path: str | os.PathLike[str] | None, part: str) -> Iterator[None]:
    """Turn an error raised while loading ``part`` of checkpoint ``path`` into a CheckpointError naming both.

    With ``path`` None (a trainer putting back its own state) errors pass unchanged.
    """
    try:
        yield
    except RLTuneError:
        raise
    except Exception as exc:
        if path is None:
            raise
        raise CheckpointError(
            f"checkpoint {str(path)!r}: {part} could not be loaded ({type(exc).__name__}: {first_line(exc)})"
        ) from exc
