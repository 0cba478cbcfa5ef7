"""Which keywords each config-builder method takes, and how RLlib's builder names map onto rltune's keys.

RLlib's :class:`AlgorithmConfig` groups its settings by method
(``environment``, ``rollouts``/``env_runners``, ``training``, ...). Here each
method's keywords are RLlib's (classic and new API stack); a keyword takes
effect when the trainer's typed settings have its key (after the renaming in
:data:`RLLIB_BUILDER_NAMES`), and is refused as "not supported yet"
otherwise. ``training()`` also takes every settings key no other method
claims (an algorithm's own keys, and rltune's own).

The renaming is the one place where a builder keyword differs from the
config-dict key: the classic builder's attribute names
(``num_rollout_workers``), Python spellings (``lambda_``, ``input_``) and the
new API stack's names (``num_env_runners``, ``num_epochs``, ...).
"""

from __future__ import annotations

# Builder keyword -> rltune config key ('block.key' for a key inside a block). One place, so that it can
# defer to rltune/trainers/rllib/_rllib_names.py (the RLlib name table of the config dicts) once both exist.
RLLIB_BUILDER_NAMES: dict[str, str] = {
    "num_rollout_workers": "num_workers",
    "num_env_runners": "num_workers",
    "num_envs_per_env_runner": "num_envs_per_worker",
    "num_cpus_per_env_runner": "num_cpus_per_worker",
    "num_gpus_per_env_runner": "num_gpus_per_worker",
    "num_epochs": "num_sgd_iter",
    "minibatch_size": "sgd_minibatch_size",
    "shuffle_batch_per_epoch": "shuffle_sequences",
    "lambda_": "lambda",
    "input_": "input",
    "synchronize_filter": "synchronize_filters",
    "restart_failed_env_runners": "recreate_failed_workers",
    "max_num_env_runner_restarts": "max_num_worker_restarts",
    "num_steps_sampled_before_learning_starts": "learning_starts",
    "evaluation_num_env_runners": "evaluation_num_workers",
    "vf_share_layers": "model.vf_share_layers",
    "num_gpus_per_learner": "num_gpus",
    "model_config": "model",
    "model_config_dict": "model",
    "policies": "multiagent.policies",
    "policy_mapping_fn": "multiagent.policy_mapping_fn",
    "policies_to_train": "multiagent.policies_to_train",
    "observation_fn": "multiagent.observation_fn",
    "framework_str": "framework",  # the attribute .framework() sets (PPOConfig.overrides(framework_str=...))
}

# RLlib's keywords of each builder method (classic and new stack), rltune's own keys added where they belong.
METHOD_KEYWORDS: dict[str, tuple[str, ...]] = {
    "environment": (
        "env", "env_config", "observation_space", "action_space", "env_task_fn", "render_env", "clip_rewards",
        "normalize_actions", "clip_actions", "disable_env_checking", "is_atari", "auto_wrap_old_gym_envs",
        "action_mask_key", "curriculum",
    ),
    "rollouts": (
        "num_rollout_workers", "num_envs_per_worker", "create_env_on_local_worker", "sample_collector",
        "sample_async", "enable_connectors", "rollout_fragment_length", "batch_mode", "remote_worker_envs",
        "remote_env_batch_wait_ms", "validate_workers_after_construction", "ignore_worker_failures",
        "recreate_failed_workers", "restart_failed_sub_environments", "num_consecutive_worker_failures_tolerance",
        "preprocessor_pref", "observation_filter", "synchronize_filter", "compress_observations",
        "enable_tf1_exec_eagerly", "sampler_perf_stats_ema_coef", "worker_health_probe_timeout_s",
        "worker_restore_timeout_s", "horizon", "soft_horizon", "no_done_at_end", "sample_timeout_s",
    ),
    "env_runners": (
        "env_runner_cls", "num_env_runners", "num_envs_per_env_runner", "num_cpus_per_env_runner",
        "num_gpus_per_env_runner", "custom_resources_per_env_runner", "validate_env_runners_after_construction",
        "sample_timeout_s", "create_env_on_local_worker", "create_local_env_runner", "env_to_module_connector",
        "module_to_env_connector", "add_default_connectors_to_env_to_module_pipeline",
        "add_default_connectors_to_module_to_env_pipeline", "episode_lookback_horizon", "rollout_fragment_length",
        "batch_mode", "explore", "compress_observations", "observation_filter", "update_worker_filter_stats",
        "use_worker_filter_stats", "enable_connectors", "sampler_perf_stats_ema_coef",
        "max_requests_in_flight_per_env_runner", "gym_env_vectorize_mode", "remote_worker_envs",
        "remote_env_batch_wait_ms", "preprocessor_pref",
    ),
    "training": (
        "gamma", "lr", "lr_schedule", "grad_clip", "grad_clip_by", "train_batch_size",
        "train_batch_size_per_learner", "model", "optimizer", "max_requests_in_flight_per_sampler_worker",
        "learner_class", "learner_connector", "add_default_connectors_to_learner_pipeline", "learner_config_dict",
        "num_epochs", "minibatch_size", "shuffle_batch_per_epoch", "_enable_learner_api",
    ),
    "resources": (
        "num_gpus", "_fake_gpus", "num_cpus_per_worker", "num_gpus_per_worker", "num_cpus_for_local_worker",
        "num_cpus_for_main_process", "num_learner_workers", "num_cpus_per_learner_worker",
        "num_gpus_per_learner_worker", "local_gpu_idx", "custom_resources_per_worker", "placement_strategy",
        "torch_num_threads",
    ),
    "framework": (
        "framework", "eager_tracing", "eager_max_retraces", "tf_session_args", "local_tf_session_args",
        "torch_compile_learner", "torch_compile_learner_what_to_compile", "torch_compile_learner_dynamo_backend",
        "torch_compile_learner_dynamo_mode", "torch_compile_worker", "torch_compile_worker_dynamo_backend",
        "torch_compile_worker_dynamo_mode", "torch_ddp_kwargs", "torch_skip_nan_gradients",
    ),
    "debugging": ("logger_creator", "logger_config", "log_level", "log_sys_usage", "fake_sampler", "seed", "worker_cls"),
    "evaluation": (
        "evaluation_interval", "evaluation_duration", "evaluation_duration_unit", "evaluation_sample_timeout_s",
        "evaluation_parallel_to_training", "evaluation_force_reset_envs_before_iteration", "evaluation_config",
        "off_policy_estimation_methods", "ope_split_batch_by_episode", "evaluation_num_workers",
        "evaluation_num_env_runners", "custom_evaluation_function", "always_attach_evaluation_results",
        "enable_async_evaluation",
    ),
    "multi_agent": (
        "policies", "policy_map_capacity", "policy_map_cache", "policy_mapping_fn", "policies_to_train",
        "policy_states_are_swappable", "observation_fn", "count_steps_by", "replay_mode",
        "algorithm_config_overrides_per_module",
    ),
    "callbacks": ("callbacks",),
    "exploration": ("explore", "exploration_config"),
    "reporting": (
        "keep_per_episode_custom_metrics", "metrics_episode_collection_timeout_s",
        "metrics_num_episodes_for_smoothing", "min_time_s_per_iteration", "min_train_timesteps_per_iteration",
        "min_sample_timesteps_per_iteration", "log_gradients",
    ),
    "fault_tolerance": (
        "recreate_failed_workers", "max_num_worker_restarts", "delay_between_worker_restarts_s",
        "restart_failed_sub_environments", "num_consecutive_worker_failures_tolerance",
        "worker_health_probe_timeout_s", "worker_restore_timeout_s", "ignore_worker_failures",
        "restart_failed_env_runners", "ignore_env_runner_failures", "max_num_env_runner_restarts",
        "delay_between_env_runner_restarts_s", "num_consecutive_env_runner_failures_tolerance",
        "env_runner_health_probe_timeout_s", "env_runner_restore_timeout_s", "nan_policy",
    ),
    "offline_data": (
        "input_", "input_config", "actions_in_input_normalized", "input_evaluation", "postprocess_inputs",
        "shuffle_buffer_size", "output", "output_config", "output_compress_columns", "output_max_file_size",
        "offline_sampling",
    ),
    "checkpointing": ("export_native_model_files", "checkpoint_trainable_policies_only"),
    "rl_module": ("model_config", "model_config_dict", "rl_module_spec", "_enable_rl_module_api"),
    "learners": ("num_learners", "num_gpus_per_learner", "num_cpus_per_learner", "local_gpu_idx"),
    "api_stack": ("enable_rl_module_and_learner", "enable_env_runner_and_connector_v2"),
    "experimental": (
        "_enable_new_api_stack", "_tf_policy_handles_more_than_one_loss", "_disable_preprocessor_api",
        "_disable_action_flattening", "_disable_initialize_loss_from_dummy_batch", "_validate_config",
    ),
}

# Each algorithm's own keywords of RLlib's training() (rltune's own keys need no listing: training() takes them).
ALGORITHM_TRAINING_KEYWORDS: dict[str, tuple[str, ...]] = {
    "PPO": (
        "use_critic", "use_gae", "lambda_", "use_kl_loss", "kl_coeff", "kl_target", "sgd_minibatch_size",
        "num_sgd_iter", "shuffle_sequences", "vf_loss_coeff", "entropy_coeff", "entropy_coeff_schedule",
        "clip_param", "vf_clip_param", "vf_share_layers",
    ),
    "DQN": (
        "target_network_update_freq", "replay_buffer_config", "store_buffer_in_checkpoints", "adam_epsilon",
        "num_steps_sampled_before_learning_starts", "learning_starts", "tau", "num_atoms", "v_min", "v_max",
        "noisy", "sigma0", "dueling", "hiddens", "double_q", "n_step", "before_learn_on_batch",
        "training_intensity", "td_error_loss_fn", "categorical_distribution_temperature", "burn_in_len", "epsilon",
    ),
}

# What to do instead, for RLlib settings rltune does not have (the rest say "not supported yet").
INSTEAD: dict[str, str] = {
    "horizon": "wrap the env in gymnasium.wrappers.TimeLimit",
    "soft_horizon": "have the env's step() return truncated=True",
    "no_done_at_end": "have the env's step() return truncated=True",
    "input_": "rltune samples from envs only (input_='sampler')",
    "output": "rltune samples from envs only; 'rltune rollout CHECKPOINT --out FILE' writes a trained "
              "policy's episodes as JSON lines",
}

# Values of RLlib settings that mean what rltune does anyway: accepted and ignored.
SAME_AS_RLTUNE: dict[str, tuple[object, ...]] = {
    "input_": ("sampler",),
    "output": (None,),
    "num_learners": (0, 1),
}

# Switches between RLlib's API stacks: rltune has one, so they are accepted and change nothing (a warning says so).
NO_EFFECT_KEYWORDS = frozenset({"enable_rl_module_and_learner", "enable_env_runner_and_connector_v2", "_enable_new_api_stack"})
