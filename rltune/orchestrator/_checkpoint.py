"""Ray Tune 2.x's ``Checkpoint``: a directory of files (or a dict), handed to ``train.report`` and back.

A function trainable reports ``train.report(metrics, checkpoint=Checkpoint.from_directory(d))``;
the trial copies ``d`` into the trial directory as ``checkpoint_<iteration>``
(atomically, :meth:`rltune.orchestrator._reporter.Reporter.report_checkpoint`),
and ``train.get_checkpoint()`` hands it back on a resume or a retry. A
checkpoint made with :meth:`Checkpoint.from_dict` is written as data:
``dict_checkpoint.json`` when every value is JSON, else ``dict_checkpoint.pt``
(``torch.save``, read back with ``weights_only=True``: tensors, numbers,
strings and containers, no code). Opening a checkpoint never imports the
user's code.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator

from rltune.errors import CheckpointError, ConfigError

DICT_JSON = "dict_checkpoint.json"
DICT_TORCH = "dict_checkpoint.pt"


class Checkpoint:
    """A checkpoint: a local directory (``path``; ``os.fspath(checkpoint)`` too), or a dict not yet written
    (:meth:`from_dict`)."""

    def __init__(self, path: str | os.PathLike[str] | None = None, *, _data: dict[str, Any] | None = None) -> None:
        """A checkpoint of the directory ``path``; use :meth:`from_directory` or :meth:`from_dict`."""
        self.path = None if path is None else str(path)
        self._data = _data

    @classmethod
    def from_directory(cls, path: str | os.PathLike[str]) -> "Checkpoint":
        """The checkpoint of the files in ``path`` (a directory; it is copied when reported)."""
        if not isinstance(path, (str, os.PathLike)):
            raise ConfigError(f"must be a directory path, but got {type(path).__name__}",
                              where="Checkpoint.from_directory path")
        if not Path(path).is_dir():
            raise CheckpointError(f"Checkpoint.from_directory: {str(path)!r} is not a directory")
        return cls(os.path.abspath(path))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Checkpoint":
        """A checkpoint of ``data`` (Ray 2.0-2.6's dict checkpoints): JSON values, numbers, tensors, containers."""
        if not isinstance(data, dict):
            raise ConfigError(f"must be a dict, but got {type(data).__name__}", where="Checkpoint.from_dict data")
        return cls(_data=dict(data))

    def to_dict(self) -> dict[str, Any]:
        """The dict of a :meth:`from_dict` checkpoint (read back from its directory once reported)."""
        if self._data is not None:
            return dict(self._data)
        directory = Path(self.__fspath__())
        if (directory / DICT_JSON).is_file():
            return json.loads((directory / DICT_JSON).read_text())
        if (directory / DICT_TORCH).is_file():
            import torch

            try:
                return torch.load(directory / DICT_TORCH, weights_only=True)
            except Exception as exc:  # noqa: BLE001 - a corrupt or foreign file: name it
                raise CheckpointError(f"cannot read {str(directory / DICT_TORCH)!r}: {exc}") from None
        raise CheckpointError(f"checkpoint {self.path!r} holds no dict ({DICT_JSON} or {DICT_TORCH}); it is a "
                              "directory checkpoint: read its files with as_directory()")

    def to_directory(self, path: str | os.PathLike[str] | None = None) -> str:
        """Copy the checkpoint's files into ``path`` (default: a new temporary directory); returns it."""
        target = Path(path) if path is not None else Path(tempfile.mkdtemp(prefix="rltune_checkpoint_"))
        target.mkdir(parents=True, exist_ok=True)
        if self._data is not None:
            _write_dict(self._data, target)
        elif Path(self.__fspath__()).resolve() != target.resolve():
            shutil.copytree(self.__fspath__(), target, dirs_exist_ok=True)
        return str(target)

    @contextlib.contextmanager
    def as_directory(self) -> Iterator[str]:
        """The checkpoint as a directory to read: its own (a directory checkpoint) or a temporary one."""
        if self._data is None and self.path is not None:
            yield self.path
            return
        tmp = self.to_directory()
        try:
            yield tmp
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def __fspath__(self) -> str:
        """The checkpoint's directory, so that ``trainer.restore(result.checkpoint)`` and ``open`` take it.

        A :meth:`from_dict` checkpoint not yet reported has none (a CheckpointError).
        """
        if self.path is None:
            raise CheckpointError("this Checkpoint.from_dict(...) has no directory yet: use to_directory()")
        return self.path

    def __repr__(self) -> str:
        return f"Checkpoint(path={self.path!r})" if self._data is None else f"Checkpoint(dict of {len(self._data)} keys)"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Checkpoint) and self.path == other.path and self._data is None and other._data is None

    def __hash__(self) -> int:
        return hash(self.path)


def _write_dict(data: dict[str, Any], directory: Path) -> None:
    """``data`` as ``dict_checkpoint.json`` if it is plain JSON (it reads back equal), else as a torch file."""
    if _plain_json(data):
        (directory / DICT_JSON).write_text(json.dumps(data))
        return
    import torch

    torch.save(data, directory / DICT_TORCH)


def _plain_json(value: Any) -> bool:
    """Whether ``value`` survives a JSON round trip unchanged (str keys, no tuples, finite numbers)."""
    if value is None or isinstance(value, (bool, str, int)):
        return True
    if isinstance(value, float):
        return value == value and value not in (float("inf"), float("-inf"))
    if isinstance(value, list):
        return all(_plain_json(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain_json(v) for k, v in value.items())
    return False
