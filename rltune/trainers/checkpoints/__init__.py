"""Checkpoints: the directory format, what a saved config may import, signatures, the trainer's save and restore.

Modules here are private; public names are exported by :mod:`rltune.trainers`.
Exported here for the rest of rltune (rltune.tracking's MLflow model), one
policy's export to a directory and its import as an acting policy::

    export_policy, exported_policy_ids, exported_policy_info, load_exported_policy, load_exported_filter
    EXPORT_SPEC_FILE   the file that marks such a directory
"""

from rltune.trainers.checkpoints._policy_export import SPEC_FILE as EXPORT_SPEC_FILE
from rltune.trainers.checkpoints._policy_export import (
    ExportedPolicyInfo,
    export_policy,
    exported_policy_ids,
    exported_policy_info,
    load_exported_filter,
    load_exported_policy,
)

__all__ = [
    "EXPORT_SPEC_FILE",
    "ExportedPolicyInfo",
    "export_policy",
    "exported_policy_ids",
    "exported_policy_info",
    "load_exported_filter",
    "load_exported_policy",
]
