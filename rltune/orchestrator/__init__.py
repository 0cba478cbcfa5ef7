"""The orchestrator: studies and trials of rltune trainers or functions, stopping, checkpoints and the ``rltune`` CLI.

The public API is :mod:`rltune.tune` (``from rltune import tune``) and the
``rltune`` command. Modules::

    cli             the ``rltune`` command (train, tune, studies, show, rollout, ui); ``main(argv) -> exit status``
    _cli_rollout    ``rltune rollout``: deterministic episodes of a checkpoint
    _cli_studies    ``rltune studies``, ``rltune show``, ``rltune ui``: a results directory's studies read back
    _run_study      run a plan to its Analysis with its display (what tune.run and ``rltune tune`` call)
    _spec           study files and tune.run fields: validation (every problem, by path and line), the plan
    _search_space   grid_search, choice, uniform, loguniform, randint, quniform: parsing, Optuna suggest, configs
    _ray_domains    Ray Tune's qloguniform, lograndint, qrandint, randn (their Optuna side) and sample_from
    _sample_from    tune.sample_from values computed per trial from the drawn config
    _ray_translate  translate_search: Ray Tune's searchers, schedulers and MLflow callback as study fields
    _ray_part       what one Ray Tune object sets in a study (StudyPart) and its argument checks
    _ray_schedulers FIFOScheduler, ASHAScheduler, HyperBandScheduler, MedianStoppingRule as Optuna pruners;
                    PopulationBasedTraining as rltune's PBT
    _ray_searchers  BasicVariantGenerator, OptunaSearch, HyperOptSearch, BayesOptSearch, ConcurrencyLimiter
    _ray_points     points_to_evaluate checked against the search space, as Optuna parameters
    _points_first   the sampler wrapper that runs points_to_evaluate first
    _grace_pruner   MedianStoppingRule's grace period in seconds (a MedianPruner that waits)
    _ray_mlflow     MLflowLoggerCallback and setup_mlflow: the study's tracking URI and experiment
    _runner         a study's loop: Optuna ask/report/tell, CPU budget, failures, Ctrl-C; events to observers
    _study_setup    open, create or join a study: lock, storage, space checks, grid and budget enqueued, resumable trials
    _trial_setup    the next trial (resumed, retried, grid, new): its config, seed, directory, results backfilled
    _retry          failed trials retried on resume (failure_kind no_space, or all), each configuration counted once
    _trial_host     trial processes: launch, messages, kill, reap, crashes and timeouts
    _ownership      owners of RUNNING trials, their liveness, heartbeats, stale trials of lost workers
    _decision       pure: a result -> Proceed / StopTrial / ExploitTrial (stop criteria, pruner, Ctrl-C, the
                    Scheduler seam); a trial's end state
    _on_result      the runner's answer to a result: report to Optuna, decide, ask the scheduler, send
    _pbt            Population Based Training: the Scheduler, its population in the Optuna storage
    _pbt_settings   scheduler: {type: pbt, ...} validated; PBT's explore step (pure)
    _events         the loop's events (Observer, called through Observers) and the MLflow tracking observer
    _optuna_compat  every private Optuna name rltune uses, each with why (the rest is public API)
    _trial_process  one trial in its own process (subprocess + socket), trainers run as function trainables
    _reporter       the Reporter of function trainables: results, atomic checkpoints, TrialStopped
    _analysis       what tune.run returns (Analysis, TrialRecord) and best_config.yaml
    _tuner          Ray Tune 2.x's Tuner: a study planned and run as tune.run's; restore / can_restore (tuner.json)
    _tuner_config   TuneConfig, RunConfig, CheckpointConfig, FailureConfig: validated, made study fields
    _result_grid    what Tuner.fit returns: ResultGrid and Result, read from the Analysis
    _tune_callbacks Ray Tune's Callback hooks, told the loop's events (RunConfig(callbacks=...))
    _session        train.report(metrics, checkpoint=...), get_checkpoint, get_context inside a trial
    _checkpoint     Ray's Checkpoint: a directory (copied into the trial's) or a dict written as data
    _trainable_wrappers  tune.with_parameters and tune.with_resources
    _display        the rich live view and plain progress lines
    _listing        reading studies back for ``rltune studies`` / ``rltune show``
    _trial          one trial of ``rltune train``: trial directory, results, stop criteria, checkpoints
    _stop           Ray Tune style stop criteria (stop when any result key reaches its value)
    _train_file     ``rltune train -f FILE.yaml``: reading and validating a train file
    _yaml_files     reading train and study YAML files: one mapping, errors with file and line
    _mlflow_model   where policy models logged before rltune.tracking import their class from

MLflow tracking (and ``rltune ui``) is :mod:`rltune.tracking`, beside this package: the loop uses it.

Importing this package is cheap: Optuna, the trainers (and torch) load when a command runs.
"""
