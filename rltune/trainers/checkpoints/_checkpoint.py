"""Checkpoint directories: written atomically, loaded without unpickling arbitrary objects.

Layout of a checkpoint directory::

    rltune_checkpoint.json   format version, algorithm, counters, config, RNG state (JSON)
    state.pt                 tensors only (weights, optimizer state, torch RNG, observation filter
                             statistics), loaded with weights_only=True
    <extra>.npz              optional numpy arrays (e.g. a replay buffer), loaded with allow_pickle=False

The metadata holds the sha256 of every other file (``checksums``) and of
itself (``metadata_sha256``), checked when each file is read (format
version 2; version 1 checkpoints, without them, still load), and with
``$RLTUNE_CHECKPOINT_KEY`` set an HMAC signature of the metadata
(``_checkpoint_signature.py``). The directory
is written under a temporary name and swapped into place
(:mod:`rltune._atomic_dir`), so a reader sees either the old checkpoint or
the complete new one, even after a crash.

This module reads and writes the files and the trainer's state; the
type checks of metadata entries are ``_checkpoint_fields.py`` and the
checks of what a saved config may name ``_checkpoint_config.py`` (their
public names are importable from here too).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import torch

from rltune._atomic_dir import fsync_dir, leftover_path, recover_leftovers, replace_dir
from rltune._disk import REASONS, disk_kind
from rltune._json import json_safe as _json_safe
from rltune.errors import CheckpointError, RLTuneError
from rltune.trainers.checkpoints._checkpoint_config import checked_config, saved_env_problem  # noqa: F401 (imported from here)
from rltune.trainers.checkpoints._checkpoint_fields import Fields, describe, field_error, first_line, is_kind  # noqa: F401
from rltune.trainers.checkpoints._checkpoint_signature import sign, verify
from rltune.trainers.policies._filters import RunningStats
from rltune.trainers.sampling._sample_batch import EpisodeMetrics

FORMAT_VERSION = 2  # 2: checksums; version 1 (without them) is still read
READ_VERSIONS = (1, 2)
METADATA_FILE = "rltune_checkpoint.json"
TENSORS_FILE = "state.pt"
CHECKSUMS = "checksums"  # metadata field: {file name: sha256} of every other file
METADATA_CHECKSUM = "metadata_sha256"  # metadata field: sha256 of the metadata without this field


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def metadata_checksum(metadata: dict[str, Any]) -> str:
    """sha256 of the metadata (without its own checksum field) in a canonical JSON form."""
    rest = {k: v for k, v in metadata.items() if k != METADATA_CHECKSUM}
    return hashlib.sha256(json.dumps(rest, sort_keys=True).encode()).hexdigest()


def _write_file(path: Path, write: Any) -> str:
    """Write ``path`` with ``write(f)``, fsync it and return its sha256."""
    with open(path, "wb") as f:
        write(f)
        f.flush()
        os.fsync(f.fileno())
    return _sha256(path)


def write_checkpoint(
    path: str | os.PathLike[str],
    metadata: dict[str, Any],
    tensors: dict[str, Any],
    arrays: dict[str, dict[str, np.ndarray]] | None = None,
) -> Path:
    """Write a checkpoint directory at ``path`` atomically (replacing one that exists); return its path.

    A failed write (disk full, no permission) is a :class:`CheckpointError`;
    the checkpoint that was under ``path`` is then untouched and no
    temporary directory is left.
    """
    target = Path(path).resolve()
    recover_leftovers(target.parent)
    if target.exists() and not (target / METADATA_FILE).exists():
        if not target.is_dir() or any(target.iterdir()):
            raise CheckpointError(
                f"cannot save a checkpoint to {str(target)!r}: it exists and is not an rltune checkpoint "
                "(its files would be lost); choose a new or empty directory"
            )
        target.rmdir()
    tmp = leftover_path(target, "tmp")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp.mkdir()
        # Serialized in memory first: torch.save's writer reports a failed write (a full disk) as an opaque
        # "unexpected pos" RuntimeError; a plain write raises the OSError with its errno.
        buffer = io.BytesIO()
        torch.save(tensors, buffer)
        checksums = {TENSORS_FILE: _write_file(tmp / TENSORS_FILE, lambda f: f.write(buffer.getbuffer()))}
        for name, columns in (arrays or {}).items():
            checksums[f"{name}.npz"] = _write_file(tmp / f"{name}.npz", lambda f, c=columns: np.savez(f, **c))
        # Through JSON first, so the checksum is of what a reader parses (int keys become strings).
        meta = json.loads(json.dumps(dict(metadata, format_version=FORMAT_VERSION, **{CHECKSUMS: checksums})))
        sign(meta)  # with $RLTUNE_CHECKPOINT_KEY set
        meta[METADATA_CHECKSUM] = metadata_checksum(meta)
        text = json.dumps(meta, indent=1, sort_keys=True).encode()
        _write_file(tmp / METADATA_FILE, lambda f: f.write(text))
        fsync_dir(tmp)
        replace_dir(tmp, target)
    except (OSError, RuntimeError) as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        kind = disk_kind(exc)
        problem = f"{REASONS[kind]} ({first_line(exc)})" if kind else first_line(exc)
        kept = "; the checkpoint already there is kept" if (target / METADATA_FILE).exists() else ""
        raise CheckpointError(f"cannot write checkpoint {str(target)!r}: {problem}{kept}") from exc
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def read_metadata(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The JSON metadata of a checkpoint; :class:`CheckpointError` if missing, partial, corrupt or changed.

    Leftovers of writers that crashed next to it are cleaned up first (a
    checkpoint that a crash left under a temporary name is put back).
    """
    directory = Path(path)
    recover_leftovers(directory.absolute().parent)
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
    version = metadata["format_version"]
    if isinstance(version, bool) or version not in READ_VERSIONS:
        raise CheckpointError(
            f"checkpoint {str(directory)!r} has format version {version!r}, "
            f"this rltune reads versions {', '.join(map(str, READ_VERSIONS))}"
        )
    if version >= 2:
        checksums = metadata.get(CHECKSUMS)
        if not (isinstance(checksums, dict) and all(isinstance(v, str) for v in checksums.values())):
            raise field_error(directory, CHECKSUMS, "is missing or not a dict of file names to sha256 digests")
        if metadata.get(METADATA_CHECKSUM) != metadata_checksum(metadata):
            raise CheckpointError(
                f"checkpoint {str(directory)!r}: {METADATA_FILE} does not match its checksum "
                f"(metadata field {METADATA_CHECKSUM!r}): the file was changed or corrupted"
            )
    verify(directory, metadata)  # with $RLTUNE_CHECKPOINT_KEY set: signed with it
    return metadata


def _verified_file(path: str | os.PathLike[str], name: str, metadata: dict[str, Any]) -> Path | None:
    """Checkpoint file ``name`` after checking it against the metadata's checksum; None if the checkpoint has none."""
    file = Path(path) / name
    checksums = metadata.get(CHECKSUMS) if metadata["format_version"] >= 2 else None
    if checksums is not None and name not in checksums:
        if file.exists():
            raise CheckpointError(f"checkpoint {str(path)!r}: {name} is not one of its files (no checksum in {METADATA_FILE})")
        return None
    if not file.exists():
        if checksums is not None:
            raise CheckpointError(f"checkpoint {str(path)!r} is partial: {name} is missing")
        return None
    if checksums is not None:
        try:
            actual = _sha256(file)
        except OSError as exc:
            raise CheckpointError(f"checkpoint {str(path)!r}: {name} cannot be read ({exc})") from None
        if actual != checksums[name]:
            raise CheckpointError(
                f"checkpoint {str(path)!r}: {name} is corrupt (its sha256 does not match the checksum in {METADATA_FILE})"
            )
    return file


def read_tensors(path: str | os.PathLike[str], metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    """The tensors of a checkpoint, checksum verified, loaded with ``weights_only=True`` (no arbitrary unpickling).

    ``metadata``: the checkpoint's, if already read (else it is read here).
    """
    tensor_file = _verified_file(path, TENSORS_FILE, read_metadata(path) if metadata is None else metadata)
    if tensor_file is None:
        raise CheckpointError(f"checkpoint {str(path)!r} is partial: {TENSORS_FILE} is missing")
    try:
        tensors = torch.load(tensor_file, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise CheckpointError(f"checkpoint {str(path)!r}: {TENSORS_FILE} is corrupt or unsafe ({first_line(exc)})") from None
    if not isinstance(tensors, dict):
        raise CheckpointError(
            f"checkpoint {str(path)!r}: {TENSORS_FILE} holds {describe(tensors)}, not a dict of the trainer's tensors"
        )
    return tensors


def read_arrays(
    path: str | os.PathLike[str], name: str, metadata: dict[str, Any] | None = None
) -> dict[str, np.ndarray] | None:
    """The numpy arrays saved under ``name`` (checksum verified), or None if the checkpoint has none."""
    array_file = _verified_file(path, f"{name}.npz", read_metadata(path) if metadata is None else metadata)
    if array_file is None:
        return None
    try:
        with np.load(array_file, allow_pickle=False) as data:
            return {k: data[k] for k in data.files}
    except Exception as exc:
        raise CheckpointError(f"checkpoint {str(path)!r}: {name}.npz is corrupt ({first_line(exc)})") from None


def json_safe(value: Any) -> Any:
    """A JSON-serialisable form of a config value (:func:`rltune._json.json_safe`); what has none is marked."""
    return _json_safe(value, opaque=lambda v: {"__unserializable__": repr(v)})


# -- what a trainer restores ----------------------------------------------------------------
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
    metadata: dict[str, Any] | None = None  # the checkpoint's, as read (its checksums verify the arrays files)
    observation_filters: dict[str, RunningStats] = field(default_factory=dict)  # master statistics by policy id
    agent_timesteps_total: int | None = None  # None: a checkpoint from before it was saved (then = timesteps_total)


def read_trainer_state(path: str | os.PathLike[str], algorithm: str) -> TrainerState:
    """Read and type-check a checkpoint that ``algorithm`` wrote; :class:`CheckpointError` naming the first wrong entry.

    What only the trainer can check (weights that fit its models, RNG
    states for its generators, arrays files) is left to it; ``arrays`` is empty.
    """
    metadata = read_metadata(path)
    meta = Fields(path, metadata)
    written_by = meta.get("algorithm", str)
    if written_by.upper() != algorithm.upper():
        raise CheckpointError(f"checkpoint {str(path)!r} was written by {written_by}, not {algorithm}")
    tensors = Fields(path, read_tensors(path, metadata), f"{TENSORS_FILE} entry")
    return TrainerState(
        iteration=meta.count("iteration"),
        timesteps_total=meta.count("timesteps_total"),
        episodes_total=meta.count("episodes_total", 0),
        agent_timesteps_total=meta.count("agent_timesteps_total") if "agent_timesteps_total" in metadata else None,
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
        metadata=metadata,
        observation_filters=_observation_filters(tensors),
    )


def filter_tensors(stats: dict[str, RunningStats]) -> dict[str, dict[str, torch.Tensor]]:
    """Observation filter statistics by policy id as the tensors a checkpoint holds (``count``, ``mean``, ``m2``)."""
    return {pid: {k: torch.from_numpy(v) for k, v in s.to_arrays().items()} for pid, s in stats.items()}


def read_observation_filters(path: str | os.PathLike[str], tensors: dict[str, Any]) -> dict[str, RunningStats]:
    """The observation filter statistics by policy id in a checkpoint's tensors (empty: saved with NoFilter)."""
    return _observation_filters(Fields(path, tensors, f"{TENSORS_FILE} entry"))


def _observation_filters(tensors: Fields) -> dict[str, RunningStats]:
    saved = tensors.get("observation_filters", dict, {})
    stats = {}
    for pid, entry in saved.items():
        try:
            if not (isinstance(entry, dict) and {"count", "mean", "m2"} <= set(entry)):
                raise ValueError(f"is {describe(entry)}, not {{count, mean, m2}} tensors")
            stats[pid] = RunningStats.from_arrays(*(entry[k].numpy() for k in ("count", "mean", "m2")))
        except (ValueError, TypeError, AttributeError) as exc:
            raise tensors.error(f"observation_filters.{pid}", str(exc)) from None
    return stats


def _episode_window(meta: Fields) -> list[EpisodeMetrics]:
    window = []
    for i, entry in enumerate(meta.get("episode_window", list, [])):
        if not (
            isinstance(entry, list)
            and len(entry) in (2, 3, 4)
            and is_kind(entry[0], (int, float))
            and is_kind(entry[1], (int,))
            and (len(entry) == 2 or isinstance(entry[2], dict))
            and (len(entry) < 4 or _agent_rewards_ok(entry[3]))
        ):
            raise meta.error(
                "episode_window", f"entry {i} is not [reward, length, custom_metrics, agent_rewards]: {describe(entry)}"
            )
        custom = entry[2] if len(entry) >= 3 else {}
        agent_rewards = [(a, p, float(r)) for a, p, r in entry[3]] if len(entry) == 4 else []
        window.append(EpisodeMetrics(float(entry[0]), entry[1], custom_metrics=custom, agent_rewards=agent_rewards))
    return window


def _agent_rewards_ok(value: Any) -> bool:
    """[[agent_id, policy_id, reward], ...] as a multi-agent episode's entry saves it."""
    return isinstance(value, list) and all(
        isinstance(item, list) and len(item) == 3 and isinstance(item[1], str) and is_kind(item[2], (int, float))
        for item in value
    )


def _env_tasks(meta: Fields) -> dict[tuple[int, int], Any]:
    tasks = {}
    for i, entry in enumerate(meta.get("env_tasks", list, [])):
        if not (isinstance(entry, list) and len(entry) == 3 and all(is_kind(x, (int,)) and x >= 0 for x in entry[:2])):
            raise meta.error("env_tasks", f"entry {i} is not [worker_index, vector_index, task]: {describe(entry)}")
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
