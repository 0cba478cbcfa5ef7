"""MLflow tracking of studies: one experiment and one parent run per study, one nested run per trial.

Beside the orchestrator, which uses it; nothing here imports the orchestrator.

Two trackers, both over :class:`mlflow.MlflowClient`
with explicit run ids (never the fluent API's global active run):

- :class:`StudyTracker` lives in the study's tracking process. It opens (or creates) the
  study's experiment and its parent run, starts and ends one nested run per
  trial, and keeps the parent run's summary up to date: the best trial, a
  CSV table of every trial and Optuna's plots as PNG.
- :class:`TrialTracker` writes into one trial's run: every numeric result
  entry at ``step = training_iteration`` (one batched call per iteration),
  checkpoints, files, a learning curve and the trained policy as an MLflow
  pyfunc model. It is built from a run id and a tracking URI, so it works in
  the trial's own process (``TrialTracker(**study_tracker.trial_tracker_args(run_id))``)
  as well as beside the study tracker (``study_tracker.open_trial(...)`` or
  ``study_tracker.trial(run_id)``, sharing the study tracker's client).

In a study the orchestrator runs the :class:`StudyTracker` in a tracking
process of its own (:class:`TrackingProcess`, :mod:`rltune.tracking._server`),
so its loop never waits on MLflow.

Store: ``tracking_uri`` if given, else ``$MLFLOW_TRACKING_URI``, else an
embedded SQLite store ``sqlite:///<results_dir>/mlflow.db`` with artifacts
under ``<results_dir>/mlartifacts/<study>/`` (no server needed);
``rltune ui`` (:func:`rltune.tracking._ui.run_ui`) browses it.

Layout in MLflow::

    experiment <study name>                 tags rltune.study, rltune.sampler, rltune.pruner
      run <study name> (parent)             tags rltune.role=study, rltune.best_trial, rltune.best_value, best.<param>
                                            metric best_value (step = trial number); artifacts trials.csv, plots/*.png
        run trial_00003 lr=0.001 ...        tags mlflow.parentRunId, rltune.trial, rltune.state, rltune.sampler, rltune.pruner
                                            params: the trial's config, dotted keys; metrics: results, '/' keys
                                            artifacts: checkpoints/<name>/, params.json, result.json, error.txt,
                                            plots/learning_curve.png, policy_model/ (pyfunc)

Invariants:

- Nothing here raises into training or into the study's loop. Every MLflow
  call is guarded: a failure is logged once per kind (a warning), counted,
  and described in ``unrecorded``; after a failure that looks like an
  unavailable store the tracker skips calls for a few seconds (growing up
  to a minute) instead of waiting on every call, and records what it
  skipped. A tracker that could not open its store tries again on its next
  call. Only a caller's programming error (an unknown trial state) raises.
- Resuming: the parent run is found again by its tags, a trial's run by its
  trial number, and both are set RUNNING again; params already logged are
  not logged again. A step is logged once per run: a trial restarted from
  a checkpoint does not log again the steps its run already has (MLflow
  would keep both values; the first stays, ``result.json`` has the latest).
- Reconciling (:meth:`StudyTracker.reconcile`): the trial directories hold
  the truth (``result.json``, ``checkpoint_*``, ``error.txt``) and Optuna
  the trials' states. Reconciling compares each trial's run with them and
  logs only what is missing: the steps the run lacks, the checkpoints on
  disk it lacks (and drops those the trial dropped, the best one kept),
  its end state, its files, learning curve and policy model. It is
  idempotent, so it repairs whatever a killed orchestrator left undone.
- Remote servers get short HTTP timeouts and few retries
  (``MLFLOW_HTTP_REQUEST_TIMEOUT`` = 10 s, ``MLFLOW_HTTP_REQUEST_MAX_RETRIES`` = 2,
  ``MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR`` = 1), set in the process before a
  client is created unless the user set them.

Modules: ``_store`` (URI, client, tags), ``_keys`` (flattening), ``_failures``
(what was not recorded), ``_study`` and ``_trial`` (the trackers),
``_retention`` (which checkpoints a run keeps, pure), ``_reconcile``,
``_staging`` (upload copies), ``_process`` and ``_server`` (the tracking
process), ``_plots``, ``_mlflow_model`` (the policy as a pyfunc model),
``_ui`` (``rltune ui``), ``_mlflow_compat`` (every non-public MLflow use).
"""

from rltune.tracking._keys import clean_key, flatten_metrics, flatten_params, policy_key, run_name
from rltune.tracking._process import TrackingProcess, TrialHandle
from rltune.tracking._staging import remove_staging
from rltune.tracking._store import artifact_root, is_remote, make_client, resolve_tracking_uri
from rltune.tracking._study import StudyTracker
from rltune.tracking._summary import trials_csv
from rltune.tracking._trial import TrialTracker

__all__ = [
    "StudyTracker", "TrackingProcess", "TrialHandle", "TrialTracker", "artifact_root", "clean_key", "flatten_metrics",
    "flatten_params", "is_remote", "make_client", "policy_key", "remove_staging", "resolve_tracking_uri", "run_name",
    "trials_csv",
]
