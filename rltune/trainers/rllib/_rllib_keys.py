"""RLlib's config names as data: new and old spellings of rltune's keys, keys that change nothing here, keys rltune lacks.

Gathered from RLlib's ``AlgorithmConfig``, ``PPOConfig``, ``DQNConfig`` and
``MODEL_DEFAULTS`` (the classic config dicts of Ray 0.8-2.x and the new API
stack of Ray 2.10+) and from RLlib's tuned examples for PPO and DQN. Read by
:mod:`rltune.trainers.rllib._rllib_names`, which applies them; docs/porting-from-rllib.md
lists them for users.
"""

from __future__ import annotations

# RLlib name -> rltune key (a dotted path into the config), where the trainer has that key.
ALIASES: dict[str, str] = {
    # the new API stack's names (Ray 2.10+)
    "num_env_runners": "num_workers",
    "num_envs_per_env_runner": "num_envs_per_worker",
    "num_epochs": "num_sgd_iter",
    "minibatch_size": "sgd_minibatch_size",
    "shuffle_batch_per_epoch": "shuffle_sequences",
    "train_batch_size_per_learner": "train_batch_size",  # one learner here: its batch is the whole batch
    "mini_batch_size_per_learner": "sgd_minibatch_size",
    "recreate_failed_env_runners": "recreate_failed_workers",
    "restart_failed_env_runners": "recreate_failed_workers",
    "max_num_env_runner_restarts": "max_num_worker_restarts",
    "num_steps_sampled_before_learning_starts": "learning_starts",
    "num_cpus_per_env_runner": "num_cpus_per_worker",
    "num_cpus_for_main_process": "num_cpus_for_driver",
    "num_gpus_per_learner": "num_gpus",  # one learner, in the trainer process
    "policies": "multiagent.policies",
    "policy_mapping_fn": "multiagent.policy_mapping_fn",
    "policies_to_train": "multiagent.policies_to_train",
    "observation_fn": "multiagent.observation_fn",
    # the config builder's names of Ray 2.0-2.9
    "num_rollout_workers": "num_workers",
    "num_cpus_for_local_worker": "num_cpus_for_driver",
    "num_gpus_per_learner_worker": "num_gpus",
    # older classic names
    "sample_batch_size": "rollout_fragment_length",
    "metrics_smoothing_episodes": "metrics_num_episodes_for_smoothing",
    "evaluation_num_episodes": "evaluation_duration",
    "timesteps_per_iteration": "min_sample_timesteps_per_iteration",
    "min_sample_timesteps_per_reporting": "min_sample_timesteps_per_iteration",
    "grad_norm_clipping": "grad_clip",
    "buffer_size": "replay_buffer_config.capacity",
    "vf_share_layers": "model.vf_share_layers",  # PPO's top-level key before Ray 1.0
}
# Inside a block: block -> {RLlib name: rltune key in that block}.
BLOCK_ALIASES: dict[str, dict[str, str]] = {
    "multiagent": {"policy_graphs": "policies"},  # Ray 0.6-0.7
    "replay_buffer_config": {"learning_starts": "^learning_starts"},  # early Ray 2.x kept it in the buffer's config; ^: top level
}

API_STACK = (
    "RLlib's API-stack switches change nothing here: rltune has one stack (torch models, its own samplers and "
    "learners); switching the new stack on only brings its defaults for keys the config leaves unset (PPO: "
    "rollout_fragment_length auto)"
)
TENSORFLOW = "TensorFlow settings change nothing here: rltune runs on PyTorch"
EVALUATION_PLACE = "rltune evaluates in the trainer process, after a training iteration, on envs of its own"
# Keys accepted and dropped: key -> (the values that change nothing, or None for any value; the note logged).
NO_EFFECT: dict[str, tuple[tuple | None, str]] = {
    **{key: (None, API_STACK) for key in (
        "enable_connectors", "_enable_rl_module_api", "_enable_learner_api", "_enable_new_api_stack",
        "enable_rl_module_and_learner", "enable_env_runner_and_connector_v2", "_disable_execution_plan_api",
        "simple_optimizer", "_disable_initialize_loss_from_dummy_batch", "_tf_policy_handles_more_than_one_loss",
        "validate_env_runners_after_construction", "env_runner_cls", "worker_cls",
    )},
    **{key: (None, TENSORFLOW) for key in (
        "eager", "eager_tracing", "eager_max_retraces", "tf_session_args", "local_tf_session_args", "enable_tf1_exec_eagerly",
    )},
    **{key: (None, EVALUATION_PLACE) for key in (
        "evaluation_num_env_runners", "evaluation_num_workers", "evaluation_parallel_to_training", "enable_async_evaluation",
        "always_attach_evaluation_results", "evaluation_force_reset_envs_before_iteration",
    )},
    "_fake_gpus": (None, "with it, num_gpus > 0 runs the learner on the CPU when there is no CUDA device"),
    "num_gpus_per_env_runner": (None, "rollout workers act on the learner's device here (num_gpus)"),
    "num_gpus_per_worker": (None, "rollout workers act on the learner's device here (num_gpus)"),
    "log_sys_usage": (None, "rltune does not record system usage"),
    "create_env_on_driver": (None, "the trainer process samples itself only with num_workers: 0"),
    "create_env_on_local_worker": (None, "the trainer process samples itself only with num_workers: 0"),
    "render_env": ((False,), "rltune renders no env yet (render_env: true, videos of episodes, comes with the "
                   "algorithms issue's video recording)"),
    "create_local_env_runner": (None, "the trainer process samples itself only with num_workers: 0"),
    "num_learners": ((0, 1), "one learner, in the trainer process"),
    "num_learner_workers": ((0, 1), "one learner, in the trainer process"),
    "count_steps_by": (("env_steps",), "rltune counts env steps"),
    "grad_clip_by": (("global_norm",), "grad_clip clips the global norm"),
    "evaluation_duration_unit": (("episodes",), "evaluation_duration counts episodes"),
    "normalize_actions": ((False,), "rltune sends the env the actions as sampled (clip_actions clips them to the bounds)"),
    "torch_skip_nan_gradients": ((True,), "rltune always skips a learner step whose loss or gradient norm is not finite "
                                 "(num_nonfinite_updates counts them)"),
}
BLOCK_NO_EFFECT: dict[str, dict[str, tuple[tuple | None, str]]] = {
    "model": {
        "uses_new_env_runners": (None, API_STACK),
        "_use_default_native_models": (None, API_STACK),
        "always_check_shapes": (None, API_STACK),
        "free_log_std": ((True,), "PPO's Gaussian has a free (state-independent) log std here"),
    },
    "multiagent": {"count_steps_by": (("env_steps",), "rltune counts env steps")},
}

# RLlib keys rltune lacks: the nearest rltune feature -> the keys ("" when there is none).
_UNSUPPORTED_BY_HINT: dict[str, tuple[str, ...]] = {
    "": (
        "sample_async", "remote_worker_envs", "remote_env_batch_wait_ms", "sample_collector", "compress_observations",
        "preprocessor_pref", "no_done_at_end", "record_env", "monitor", "fake_sampler",
        "episode_lookback_horizon", "policy_map_capacity", "policy_states_are_swappable",
        "policy_map_cache", "keep_per_episode_custom_metrics", "min_time_s_per_iteration", "min_iter_time_s",
        "min_time_s_per_reporting", "min_train_timesteps_per_iteration", "min_train_timesteps_per_reporting",
        "log_gradients", "export_native_model_files", "checkpoint_trainable_policies_only", "logger_creator",
        "logger_config", "placement_strategy",
        "metrics_episode_collection_timeout_s", "collect_metrics_timeout", "custom_resources_per_env_runner",
        "custom_resources_per_worker", "custom_resources_per_learner", "extra_python_environs_for_driver",
        "extra_python_environs_for_worker", "torch_ddp_kwargs", "torch_skip_nan_gradients", "learner_config_dict",
        "max_requests_in_flight_per_sampler_worker", "max_requests_in_flight_per_env_runner", "action_mask_key",
        "categorical_distribution_temperature", "burn_in_len", "replay_sequence_length",
        "replay_mode", "off_policy_estimation_methods", "input", "input_", "input_config", "output", "output_config",
        "postprocess_inputs", "shuffle_buffer_size", "actions_in_input_normalized", "offline_sampling",
        # the rest of Ray 2.x's AlgorithmConfig: offline data and evaluation, learners, connectors, internals
        "input_compress_columns", "input_filesystem", "input_filesystem_kwargs", "input_read_batch_size",
        "input_read_episodes", "input_read_method", "input_read_method_kwargs", "input_read_sample_batches",
        "input_read_schema", "input_spaces_jsonable", "output_compress_columns", "output_filesystem",
        "output_filesystem_kwargs", "output_max_file_size", "output_max_rows_per_file", "output_write_episodes",
        "output_write_method", "output_write_method_kwargs", "output_write_remaining_data", "offline_data_class",
        "offline_eval_batch_size_per_runner", "offline_eval_rl_module_inference_only", "offline_eval_runner_class",
        "offline_eval_runner_health_probe_timeout_s", "offline_eval_runner_restore_timeout_s",
        "offline_evaluation_duration", "offline_evaluation_interval", "offline_evaluation_parallel_to_training",
        "offline_evaluation_timeout_s", "offline_evaluation_type", "offline_loss_for_module_fn",
        "num_offline_eval_runners", "num_cpus_per_offline_eval_runner", "num_gpus_per_offline_eval_runner",
        "custom_resources_per_offline_eval_runner", "max_num_offline_eval_runner_restarts",
        "restart_failed_offline_eval_runners", "ignore_offline_eval_runner_failures",
        "validate_offline_eval_runners_after_construction", "broadcast_offline_eval_runner_states",
        "callbacks_on_evaluate_offline_start", "callbacks_on_evaluate_offline_end",
        "callbacks_on_offline_eval_runners_recreated", "max_requests_in_flight_per_offline_eval_runner",
        "dataset_num_iters_per_learner", "dataset_num_iters_per_eval_runner", "materialize_data",
        "materialize_mapped_data", "map_batches_kwargs", "iter_batches_kwargs", "prelearner_class",
        "prelearner_buffer_class", "prelearner_buffer_kwargs", "prelearner_module_synch_period",
        "prelearner_use_recorded_module_states", "ope_split_batch_by_episode", "evaluation_auto_duration_max_env_steps_per_sample",
        "evaluation_auto_duration_min_env_steps_per_sample", "evaluation_error_after_n_consecutive_skips",
        "evaluation_unhealthy_workers_timeout_s", "custom_async_evaluation_function", "num_cpus_per_learner",
        "local_gpu_idx", "num_aggregator_actors_per_learner", "max_requests_in_flight_per_aggregator_actor",
        "max_requests_in_flight_per_learner", "custom_resources_for_main_process", "add_default_connectors_to_env_to_module_pipeline",
        "add_default_connectors_to_learner_pipeline", "add_default_connectors_to_module_to_env_pipeline",
        "broadcast_env_runner_states", "merge_env_runner_states", "use_env_runner_state_server",
        "env_runner_state_server_max_concurrency", "episodes_to_numpy", "gym_env_vectorize_mode", "ignore_final_observation",
        "in_evaluation", "sampler_perf_stats_ema_coef", "stats_cls_lookup",
        "sync_filters_on_rollout_workers_timeout_s", "_disable_action_flattening", "_disable_preprocessor_api",
        "_dont_auto_sync_env_runner_states", "_env_to_module_connector", "_module_to_env_connector", "_learner_connector",
        "_is_atari", "_is_online", "_learner_class", "_model_config", "_per_module_overrides", "_prior_exploration_config",
        "_rl_module_spec", "_torch_grad_scaler_class", "_torch_lr_scheduler_classes", "_train_batch_size_per_learner",
        "_use_msgpack_checkpoints", "_validate_config",
    ),
    "train_batch_size (PPO samples one train batch per iteration)": ("min_sample_timesteps_per_iteration",),
    "a gymnasium wrapper in the env creator (e.g. gymnasium.wrappers.ClipReward)": ("clip_rewards",),
    "the env's own time limit (gymnasium's max_episode_steps, or a TimeLimit wrapper)": ("horizon", "soft_horizon"),
    "recreate_failed_workers (restart a rollout worker that died)": (
        "ignore_worker_failures", "ignore_env_runner_failures", "num_consecutive_env_runner_failures_tolerance",
        "num_consecutive_worker_failures_tolerance", "delay_between_env_runner_restarts_s",
        "delay_between_worker_restarts_s", "env_runner_health_probe_timeout_s", "worker_health_probe_timeout_s",
        "env_runner_restore_timeout_s", "worker_restore_timeout_s",
    ),
    "sample_timeout_s (it bounds the rollout worker processes; evaluation runs in the trainer's process, where a "
    "hung env step cannot be interrupted)": ("evaluation_sample_timeout_s",),
    "torch_compile_learner (compiles the learner step)": (
        "torch_compile_worker", "torch_compile_worker_dynamo_backend", "torch_compile_worker_dynamo_mode",
        "torch_compile_learner_what_to_compile",
    ),
    "lr and grad_clip (Adam with torch's defaults)": ("optimizer", "adam_epsilon"),
    "callbacks (a DefaultCallbacks subclass with on_* hooks)": (
        "custom_eval_function", "custom_evaluation_function", "before_learn_on_batch", "callbacks_on_algorithm_init",
        "callbacks_on_environment_created", "callbacks_on_episode_created", "callbacks_on_episode_start",
        "callbacks_on_episode_step", "callbacks_on_episode_end", "callbacks_on_sample_end", "callbacks_on_train_result",
        "callbacks_on_evaluate_start", "callbacks_on_evaluate_end", "callbacks_on_checkpoint_loaded",
        "callbacks_on_env_runners_recreated",
    ),
    "multiagent.policies with PolicySpec(config={...}) per policy": ("algorithm_config_overrides_per_module",),
    "replay_buffer_config (uniform replay)": (
        "prioritized_replay", "prioritized_replay_alpha", "prioritized_replay_beta", "prioritized_replay_eps",
        "final_prioritized_replay_beta", "prioritized_replay_beta_annealing_timesteps", "beta_annealing_fraction",
        "worker_side_prioritization",
    ),
    "train_batch_size (DQN: the replay minibatch)": ("replay_batch_size",),
    "DQN's exploration_config (EpsilonGreedy: initial_epsilon, final_epsilon, epsilon_timesteps; "
    "run: DQN maps these old names onto it)": (
        "epsilon", "exploration_fraction", "exploration_final_eps", "exploration_initial_eps", "schedule_max_timesteps",
    ),
    "observation_filter": ("synchronize_filters", "update_worker_filter_stats", "use_worker_filter_stats"),
}
_MODEL_UNSUPPORTED_BY_HINT: dict[str, tuple[str, ...]] = {
    "": (
        "use_lstm", "lstm_cell_size", "lstm_use_prev_action", "lstm_use_prev_reward",
        "lstm_use_prev_action_reward", "lstm_weights_initializer", "lstm_bias_initializer", "use_attention",
        "attention_dim", "attention_num_heads", "attention_head_dim", "attention_num_transformer_units",
        "attention_memory_inference", "attention_memory_training", "attention_position_wise_mlp_dim",
        "attention_init_gru_gate_bias", "attention_use_n_prev_actions", "attention_use_n_prev_rewards",
        "conv_filters", "conv_activation", "conv_kernel_initializer", "conv_bias_initializer",
        "conv_transpose_kernel_initializer", "conv_transpose_bias_initializer", "fcnet_weights_initializer",
        "fcnet_weights_initializer_config", "fcnet_bias_initializer", "fcnet_bias_initializer_config",
        "post_fcnet_weights_initializer", "post_fcnet_bias_initializer", "no_final_linear", "log_std_clip_param",
        "conv_kernel_initializer_config", "conv_bias_initializer_config", "conv_transpose_kernel_initializer_config",
        "conv_transpose_bias_initializer_config", "lstm_weights_initializer_config", "lstm_bias_initializer_config",
        "post_fcnet_weights_initializer_config", "post_fcnet_bias_initializer_config",
        "encoder_latent_dim", "custom_action_dist", "_time_major", "_disable_preprocessor_api",
        "_disable_action_flattening",
    ),
    "a wrapper in the env creator (e.g. gymnasium's Atari preprocessing)": (
        "dim", "grayscale", "zero_mean", "framestack", "custom_preprocessor",
    ),
    "a Policy subclass in multiagent.policies (PolicySpec(policy_class=...)) or for the trainer": (
        "custom_model", "custom_model_config",
    ),
    "fcnet_hiddens / fcnet_activation": (
        "post_fcnet_hiddens", "post_fcnet_activation", "head_fcnet_hiddens", "head_fcnet_activation",
    ),
}


def _by_key(table: dict[str, tuple[str, ...]]) -> dict[str, str]:
    return {key: hint for hint, keys in table.items() for key in keys}


UNSUPPORTED: dict[str, str] = _by_key(_UNSUPPORTED_BY_HINT)  # key -> nearest rltune feature ("" if none)
BLOCK_UNSUPPORTED: dict[str, dict[str, str]] = {"model": _by_key(_MODEL_UNSUPPORTED_BY_HINT)}

# Fields of RLlib's tuned-example and Tune experiment files -> the study/train file field.
EXPERIMENT_FIELDS: dict[str, str] = {"local_dir": "results_dir", "storage_path": "results_dir"}
