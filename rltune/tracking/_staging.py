"""Copies of what is uploaded later (``.<name>.mlflow-<tag>-<random>`` beside it), and their removal."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

STAGING = ".mlflow-"  # in the names of the copies waiting for upload: ``.<name>.mlflow-<tag>-<random>``


def snapshot(directory: Path, tag: str = "") -> Path:
    """A copy of a directory next to it, hard-linked where possible (a checkpoint's files never change).

    Named ``.<name>.mlflow-<tag>-<random>``: :func:`remove_staging` finds the copies a killed process left.
    """
    target = Path(tempfile.mkdtemp(prefix=f".{directory.name}{STAGING}{tag + '-' if tag else ''}",
                                   dir=directory.parent))

    def link_or_copy(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    shutil.copytree(directory, target, copy_function=link_or_copy, dirs_exist_ok=True)
    return target


def snapshot_files(files: list[Path], tag: str = "", directory: Path | None = None) -> tuple[Path, list[Path]]:
    """Copies of files (which may grow, like result.json) in a new staging directory, and that directory.

    ``directory``: where the staging directory goes (``.files.mlflow-<tag>-<random>``; default: the temp dir).
    """
    if directory is None:
        staging = Path(tempfile.mkdtemp(prefix="rltune_files_"))
    else:
        staging = Path(tempfile.mkdtemp(prefix=f".files{STAGING}{tag + '-' if tag else ''}", dir=directory))
    copies = []
    for i, path in enumerate(files):
        (staging / str(i)).mkdir()
        copies.append(Path(shutil.copy2(path, staging / str(i) / path.name)))
    return staging, copies


def remove(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def remove_staging(study_dir: str | os.PathLike[str], *, tag: str | None = None, keep_tag: str | None = None) -> int:
    """Remove the upload copies in a study's trial directories; how many.

    ``tag``: only those of one tracking session (after its close); ``keep_tag``:
    all but those of the running session (at its start: what killed ones left).
    """
    removed = 0
    for path in Path(study_dir).glob(f"trial_*/.*{STAGING}*"):
        name = path.name
        if tag is not None and f"{STAGING}{tag}-" not in name:
            continue
        if keep_tag is not None and f"{STAGING}{keep_tag}-" in name:
            continue
        if path.is_dir():
            remove(path)
            removed += 1
    return removed
