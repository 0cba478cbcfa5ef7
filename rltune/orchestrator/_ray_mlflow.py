"""Ray Tune's MLflow names: ``MLflowLoggerCallback`` (in ``callbacks=``) and ``setup_mlflow`` (in a function trainable).

Both point the study at an MLflow tracking store and experiment: their
``tracking_uri`` becomes the study's ``tracking_uri`` and their
``experiment_name`` the study's ``name`` (rltune records a study as the MLflow
experiment of that name: one parent run, one nested run per trial). A
function trainable's ``config["mlflow"]`` (what Ray's ``setup_mlflow(config)``
reads) is read the same way when the study is planned. Options rltune
cannot honour are refused by name.
"""

from __future__ import annotations

from typing import Any, Mapping

from rltune.errors import ConfigError
from rltune.orchestrator._ray_part import RayName, StudyPart

_SECRET = "set MLFLOW_TRACKING_TOKEN in the environment instead (a token is never passed as an argument)"
_REFUSED = {
    "registry_uri": "rltune registers no models in an MLflow registry",
    "tracking_token": _SECRET,
    "tags": "rltune tags its runs itself (rltune.study, rltune.trial, ...); set tags in MLflow afterwards",
    "experiment_id": "name the experiment with experiment_name (the study's name)",
    "artifact_location": "the study's experiment keeps its artifacts where its tracking store puts them",
    "run_name": "each trial's run is named after its trial",
    "create_experiment_if_not_exists": None,  # honoured: the study's experiment is always created
    "rank_zero_only": None,  # honoured: a trial is one process
}


def _study_fields(owner: str, tracking_uri: Any, experiment_name: Any) -> StudyPart:
    fields: dict[str, Any] = {}
    for argument, value, field in (("tracking_uri", tracking_uri, "tracking_uri"),
                                   ("experiment_name", experiment_name, "name")):
        if value is None:
            continue
        if not isinstance(value, str) or not value:
            raise ConfigError(f"{argument}={value!r}: must be a non-empty string", where=owner)
        fields[field] = value
    return StudyPart(owner, fields)


class MLflowLoggerCallback(RayName):
    """Ray Tune's MLflow callback: ``tracking_uri`` and ``experiment_name`` become the study's.

    ``save_artifact``: rltune records every checkpoint as an artifact of the
    trial's run in either case (True asks for what it does; False cannot turn
    it off).
    """

    def __init__(self, tracking_uri: str | None = None, *, registry_uri: str | None = None,
                 experiment_name: str | None = None, tags: dict[str, Any] | None = None,
                 tracking_token: str | None = None, save_artifact: bool = False) -> None:
        for argument, value in (("registry_uri", registry_uri), ("tags", tags), ("tracking_token", tracking_token)):
            if value is not None:
                raise self._refuse(argument, "***" if argument == "tracking_token" else value, _REFUSED[argument])
        if not isinstance(save_artifact, bool):
            raise self._refuse("save_artifact", save_artifact, "must be True or False")
        self.tracking_uri = tracking_uri
        self.experiment_name = experiment_name
        self.save_artifact = save_artifact
        self._part = _study_fields("MLflowLoggerCallback", tracking_uri, experiment_name)

    def study_part(self) -> StudyPart:
        """``tracking_uri`` and ``name``."""
        return self._part


def config_part(config: Any) -> StudyPart | None:
    """The study fields a function trainable's ``config["mlflow"]`` sets (what Ray's ``setup_mlflow`` reads)."""
    given = config.get("mlflow") if isinstance(config, Mapping) else None
    if given is None:
        return None
    if not isinstance(given, Mapping):
        raise ConfigError(f"must be a dict of setup_mlflow's options, but got {given!r}", where="config.mlflow")
    options = dict(given)
    _check_options(options, "config.mlflow")
    return _study_fields("config.mlflow", options.get("tracking_uri"), options.get("experiment_name"))


def _check_options(options: dict[str, Any], owner: str) -> None:
    for argument, value in options.items():
        if argument in ("tracking_uri", "experiment_name") or value is None:
            continue
        if argument not in _REFUSED:
            raise ConfigError(f"{argument}: not an option of setup_mlflow", where=owner)
        why = _REFUSED[argument]
        if why is not None:
            raise ConfigError(f"{argument}={'***' if argument == 'tracking_token' else repr(value)}: {why}",
                              where=owner)


def setup_mlflow(config: Mapping[str, Any] | None = None, **options: Any) -> Any:
    """Ray's ``setup_mlflow`` inside a function trainable; the study already records the trial in MLflow.

    The study's tracking URI and experiment come from ``config["mlflow"]``
    (read when the study was planned) or ``tune.run(tracking_uri=...,
    name=...)``; given here, ``tracking_uri`` / ``experiment_name`` must be
    the study's (a ConfigError says which differs). Other options are
    honoured or refused by name. Returns the ``mlflow`` module, as Ray does;
    the trial run's metrics are the results the trial reports.
    """
    _check_options({k: v for k, v in options.items() if k not in ("tracking_uri", "experiment_name")}, "setup_mlflow")
    _check_study(options)
    import mlflow

    return mlflow


def _check_study(options: dict[str, Any]) -> None:
    """In a trial: ``tracking_uri`` / ``experiment_name`` given must be those of its study (its study.json)."""
    import json

    from rltune.orchestrator import _reporter

    reporter = _reporter._current
    study_file = reporter.trial_dir.parent / "study.json" if reporter is not None else None
    if study_file is None or not study_file.is_file():
        return
    study = json.loads(study_file.read_text())
    for argument, key in (("experiment_name", "name"), ("tracking_uri", "tracking_uri")):
        value = options.get(argument)
        if value is not None and value != study.get(key):
            raise ConfigError(f"{argument}={value!r}: the study records this trial with {key} {study.get(key)!r}; "
                              f"give it to the study (config['mlflow'], or tune.run {key}=...)", where="setup_mlflow")
