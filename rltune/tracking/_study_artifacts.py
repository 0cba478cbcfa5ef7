"""Files logged in a study's MLflow parent run after the study's tracking process ended (the final evaluation's table)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

from rltune.tracking._store import TAG_ROLE, TAG_STUDY, make_client, resolve_tracking_uri


def log_study_artifacts(tracking_uri: str | None, study_name: str, results_dir: str | os.PathLike[str],
                        paths: Sequence[Path], artifact_path: str = "final_evaluation") -> str | None:
    """Log ``paths`` under ``artifact_path`` in study ``study_name``'s parent run; its run id (None: no such run)."""
    client = make_client(resolve_tracking_uri(tracking_uri, results_dir))
    experiment = client.get_experiment_by_name(study_name)
    if experiment is None:
        return None
    runs = client.search_runs([experiment.experiment_id], filter_string=f"tags.`{TAG_ROLE}` = 'study'", max_results=100)
    parent = next((r for r in runs if r.data.tags.get(TAG_STUDY) == study_name), None)
    if parent is None:
        return None
    for path in paths:
        client.log_artifact(parent.info.run_id, str(path), artifact_path)
    return parent.info.run_id
