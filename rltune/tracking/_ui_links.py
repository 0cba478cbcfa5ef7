"""Where the MLflow UI shows a study: links that open on its runs with every trial listed, and the experiment's marks.

What MLflow's UI reads, and what rltune sets (MLflow 3.17; docs/mlflow-ui.md
shows the pages):

- MLflow 3's UI has two faces, "GenAI" and "Model training", switched at
  its top left; the browser remembers the choice, GenAI at first, and the
  URL's ``workflowType`` overrides it. On GenAI, an experiment opens on an
  (empty) traces overview. The experiment's ``mlflow.experimentKind`` tag
  is MLflow's own way to say an experiment is model training; 3.17's UI
  goes by the switch instead (behind a feature flag that is on), but keeps
  the code that reads the tag, so the tag is set too
  (:func:`mark_study_experiment`).
- The runs table nests the trials under the study's run, collapsed, when
  runs are sorted by creation time; sorted by another key (the run name
  here), it lists every run.

So the links carry ``workflowType=machine_learning`` and the run-name order.
The MLflow Assistant panel (a chat on the right, open on the first visit to
a local server) has no server switch: its x closes it, for good in that
browser.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode, urlsplit, urlunsplit

from rltune.tracking._store import EXPERIMENT_KIND, TAG_PRUNER, TAG_SAMPLER, TAG_STUDY, is_remote, make_client

WORKFLOW = ("workflowType", "machine_learning")
RUNS_QUERY = (WORKFLOW, ("orderByKey", "tags.`mlflow.runName`"), ("orderByAsc", "true"))
NOTE_TAG = "mlflow.note.content"  # the experiment's description, shown above its runs
NOTE_PREFIX = "rltune study "
MAX_LINKS = 10


def study_note(study: str, sampler: str, pruner: str) -> str:
    """The experiment's description (its first line shows above the runs): what the runs are, where to look."""
    return (f"{NOTE_PREFIX}{study!r} ({sampler}, {pruner}): a run per trial, all listed when sorted by Run Name; "
            f"the run {study!r} holds the best trial (tags best.*), trials.csv and the study's plots (Artifacts).")


def experiment_url(base_url: str, experiment_id: str, *, charts: bool = False) -> str:
    """The experiment's runs, every trial listed, in the UI at ``base_url`` (``charts``: its chart view)."""
    query = RUNS_QUERY + ((("compareRunsMode", "CHART"),) if charts else ())
    return f"{base_url.rstrip('/')}/#/experiments/{experiment_id}/runs?{urlencode(query)}"


def run_url(base_url: str, experiment_id: str, run_id: str, tab: str = "model-metrics") -> str:
    """A run's page: ``tab`` is ``overview``, ``model-metrics`` (charts of its metrics) or ``artifacts``."""
    return f"{base_url.rstrip('/')}/#/experiments/{experiment_id}/runs/{run_id}/{tab}?{urlencode([WORKFLOW])}"


def mark_study_experiment(client: Any, experiment: Any) -> None:
    """Set the experiment kind tag where it is missing, and bring an rltune description up to date."""
    tags = experiment.tags
    if EXPERIMENT_KIND[0] not in tags:
        client.set_experiment_tag(experiment.experiment_id, *EXPERIMENT_KIND)
    note = tags.get(NOTE_TAG, "")
    if TAG_STUDY in tags and note.startswith(NOTE_PREFIX):  # a note the user wrote stays
        current = study_note(tags[TAG_STUDY], tags.get(TAG_SAMPLER, "?"), tags.get(TAG_PRUNER, "?"))
        if note != current:
            client.set_experiment_tag(experiment.experiment_id, NOTE_TAG, current)


def study_links(tracking_uri: str, base_url: str) -> tuple[list[tuple[str, str]], int]:
    """The studies in the store, most recently updated first: ``(name, experiment_url)`` for at most
    :data:`MAX_LINKS` of them, and how many there are in all. Each study's experiment is marked
    (:func:`mark_study_experiment`) on the way."""
    from mlflow.entities import ViewType

    client = make_client(tracking_uri)
    studies, token = [], None
    while True:
        page = client.search_experiments(view_type=ViewType.ACTIVE_ONLY, max_results=1000, page_token=token,
                                         order_by=["last_update_time DESC"])
        studies += [e for e in page if TAG_STUDY in e.tags]
        token = page.token
        if not token:
            break
    for experiment in studies:
        mark_study_experiment(client, experiment)
    return [(e.name, experiment_url(base_url, e.experiment_id)) for e in studies[:MAX_LINKS]], len(studies)


def browser_url(tracking_uri: str) -> str | None:
    """The address a browser opens for a tracking server (without user and password), None for other stores."""
    if not is_remote(tracking_uri) or not tracking_uri.startswith(("http://", "https://")):
        return None
    parts = urlsplit(tracking_uri)
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    if parts.port:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))
