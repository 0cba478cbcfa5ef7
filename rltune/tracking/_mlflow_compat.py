"""Every use of MLflow outside its public API, in one place, each with why.

The rest of :mod:`rltune.tracking` uses ``mlflow.MlflowClient``,
``mlflow.entities``, ``mlflow.exceptions``, ``mlflow.pyfunc``,
``mlflow.models`` and ``mlflow.types`` only. A test greps for private
MLflow names elsewhere (tests/tracking/test_mlflow_compat.py), another
reads the code for attribute-style ones, such as a private class attribute
of a ``PythonModel`` subclass (tests/test_private_attributes.py).
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

# MLflow's limits (mlflow 2.12 to 3.x; tests check them against mlflow.utils.validation). Keys are
# shortened with these where mlflow is not imported (the orchestrator side of the tracking process).
MAX_ENTITY_KEY_LENGTH = 250
MAX_TAG_VAL_LENGTH = 8000


class Limits(NamedTuple):
    param_value: int
    tag_value: int
    key: int
    metrics_per_batch: int
    params_tags_per_batch: int
    entities_per_batch: int


@functools.lru_cache(maxsize=1)
def limits() -> Limits:
    """MLflow's limits as the installed mlflow states them (called where mlflow is imported anyway).

    Why private: ``mlflow.utils.validation`` is the only place MLflow states
    its value and batch limits; a value over them is refused by the store,
    so they are read from there, with today's values as the fallback.
    """
    defaults = Limits(6000, MAX_TAG_VAL_LENGTH, MAX_ENTITY_KEY_LENGTH, 1000, 100, 1000)
    try:
        from mlflow.utils import validation as v
    except ImportError:  # pragma: no cover
        return defaults
    return Limits(*(getattr(v, name, default) for name, default in zip(
        ("MAX_PARAM_VAL_LENGTH", "MAX_TAG_VAL_LENGTH", "MAX_ENTITY_KEY_LENGTH", "MAX_METRICS_PER_BATCH",
         "MAX_PARAMS_TAGS_PER_BATCH", "MAX_ENTITIES_PER_BATCH"), defaults)))


def artifact_repository(artifact_uri: str, tracking_uri: str) -> Any:
    """The artifact repository of a run's ``artifact_uri``, to delete artifacts from it.

    Why private: ``MlflowClient`` can log and list artifacts but not delete
    them; checkpoint retention (``keep_checkpoints_num``) deletes the dropped
    ones through the repository, which only the artifact repository
    registry (``mlflow.store.artifact``) builds.
    """
    from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository

    return get_artifact_repository(artifact_uri, tracking_uri=tracking_uri)


@functools.lru_cache(maxsize=1)
def python_model_base() -> type:
    """``mlflow.pyfunc.PythonModel`` without MLflow's type-hint validation of ``predict``: the base of rltune's model.

    Why private: MLflow wraps the ``predict`` of every ``PythonModel``
    subclass, when the class is created, to validate inputs against
    ``predict``'s type hints, and warns ("Add type hints to the ``predict``
    method") when there are none. rltune's model declares a tensor signature
    instead, which MLflow checks; type hints of numpy arrays would not
    describe its shapes. The only switch is the class attribute
    ``_skip_type_hint_validation`` that ``PythonModel.__init_subclass__``
    reads (MLflow's own ChatModel classes set it). It must be set before a
    subclass is created, hence a base class and not a decorator; it is built
    on first use so that importing this module does not import MLflow.
    """
    import mlflow.pyfunc

    class UnhintedPythonModel(mlflow.pyfunc.PythonModel):
        """A ``PythonModel`` whose subclasses' ``predict`` MLflow neither wraps nor warns about."""

        _skip_type_hint_validation = True

    return UnhintedPythonModel
