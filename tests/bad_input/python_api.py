"""Bad arguments of the Python API: ``tune.run``, trainers, configs; each must raise an RLTuneError."""

from __future__ import annotations

import math

from .harness import Case, Context, read_only_dir

FN = "orchestrator.trainables:counter"


def run(**fields):
    """``tune.run`` of the counter trainable with ``fields`` (valid ones by default)."""
    def call(ctx: Context) -> None:
        from rltune import tune

        kwargs = {"config": {"steps": 2}, "metric": "score", "stop": {"training_iteration": 2},
                  "results_dir": str(ctx.results), "verbose": 0, "tracking": False}
        kwargs.update({k: (ctx.fill(v) if isinstance(v, str) else v) for k, v in fields.items()})
        tune.run(kwargs.pop("run", FN), **kwargs)
    return call


def space(make):
    """``tune.run`` with ``config.x`` set to the entry ``make(tune)``."""
    def call(ctx: Context) -> None:
        from rltune import tune

        run(config={"steps": 2, "x": make(tune)})(ctx)
    return call


def builder(chain):
    """A call of ``chain(PPOConfig())``."""
    def call(ctx: Context) -> None:
        from rltune.trainers import PPOConfig

        chain(PPOConfig())
    return call


def from_checkpoint_overriding(overrides):
    """``Trainer.from_checkpoint`` of the recorded PPO checkpoint with ``config_overrides``."""
    def call(ctx: Context) -> None:
        from rltune.trainers import Trainer

        Trainer.from_checkpoint(ctx.checkpoint, config_overrides=overrides, results_dir=str(ctx.tmp)).stop()
    return call


def dqn_of_a_ppo_builder(ctx: Context) -> None:
    from rltune.trainers import DQN, PPOConfig

    DQN(config=PPOConfig().environment("CartPole-v1"))


def space_env(algorithm: str, action_space: str):
    """``algorithm`` on ``tests/trainers/envs.py``'s SpaceEnv with a Box observation and the named action space."""
    def call(ctx: Context) -> None:
        from rltune.trainers import get_trainer_class

        get_trainer_class(algorithm)(config={"env_config": {"space": "box", "action_space": action_space}},
                                     env="trainers.envs:SpaceEnv", results_dir=str(ctx.results))
    return call


def nonfinite_env(multi: bool, **env_config):
    """PPO on an env that emits NaN (``tests/trainers/nonfinite_envs.py``), trained until it raises."""
    def call(ctx: Context) -> None:
        from rltune.trainers import PPO

        env = "trainers.nonfinite_envs:" + ("NonFiniteAgents" if multi else "NonFiniteEnv")
        config = {"disable_env_checking": True, "train_batch_size": 64, "sgd_minibatch_size": 32, "num_sgd_iter": 1,
                  "env_config": env_config}
        if multi:
            config["multiagent"] = {"policies": {"p"}, "policy_mapping_fn": "trainers.nonfinite_envs:to_policy_p"}
        with PPO(config=config, env=env, results_dir=str(ctx.results)) as trainer:
            trainer.train()
    return call


def save_nan_weights(ctx: Context) -> None:
    from rltune.trainers import PPO

    with PPO(config={"model": {"fcnet_hiddens": [8]}}, env="CartPole-v1", results_dir=str(ctx.results)) as trainer:
        weights = trainer.get_policy().get_weights()
        weights["pi_head.bias"][:] = float("nan")
        trainer.get_policy().set_weights(weights)
        trainer.save(ctx.tmp / "nan_checkpoint")


def multi_agent(env, policies, *, train=False, **extra):
    """PPO on ``env`` of tests/trainers/multi_agent_envs.py with ``policies()`` (``train``: one iteration)."""
    def call(ctx: Context) -> None:
        from rltune.trainers import PPO
        from trainers import multi_agent_envs

        config = {"env": getattr(multi_agent_envs, env), "multiagent": {"policies": policies()}, "train_batch_size": 16,
                  "sgd_minibatch_size": 16, "num_sgd_iter": 1, "rollout_fragment_length": 8, "model": {"fcnet_hiddens": [8]},
                  **extra}
        with PPO(config=config, results_dir=str(ctx.tmp / "ma")) as trainer:
            if train:
                trainer.train()
    return call


def wide_actions():
    import gymnasium as gym

    from rltune.trainers import PolicySpec

    return {"p": PolicySpec(action_space=gym.spaces.Discrete(5))}


def hosted_dqn_policies():
    from rltune.trainers import DQNPolicy, PolicySpec

    return {"p": None, "q": PolicySpec(DQNPolicy)}


def shrunk_observations(agent_obs, **kwargs):
    """An observation_fn whose observations do not fit the policy's space (Box(2,) in TurnGame)."""
    return {agent: [0.0] * 3 for agent in agent_obs}


def on_the_class(ctx: Context) -> None:
    from rltune.trainers import PPOConfig

    PPOConfig.training(lr=0.1)


def algo_class_a_number(ctx: Context) -> None:
    from rltune.trainers import PPOConfig

    PPOConfig(5)


def builder_class_as_config(ctx: Context) -> None:
    from rltune.trainers import PPO, PPOConfig

    PPO(config=PPOConfig, env="CartPole-v1", results_dir=str(ctx.results))


def ppo_in(results_dir: str):
    """A PPO trainer made with ``results_dir`` (placeholders filled)."""
    def call(ctx: Context) -> None:
        from rltune.trainers import PPO

        PPO(config={"env": "CartPole-v1"}, results_dir=ctx.fill(results_dir))
    return call


def ppo(config, algorithm="PPO"):
    def call(ctx: Context) -> None:
        from rltune.trainers import get_trainer_class

        get_trainer_class(algorithm)(config=config, env="CartPole-v1", results_dir=str(ctx.results))
    return call


def vector_env(kind="sync", **config):
    """PPO on a gymnasium VectorEnv instance of two CartPoles (``kind``: sync or async) with ``config``."""
    def call(ctx: Context) -> None:
        import gymnasium as gym

        from rltune.trainers import PPO

        make = gym.vector.SyncVectorEnv if kind == "sync" else gym.vector.AsyncVectorEnv
        env = make([lambda: gym.make("CartPole-v1")] * 2)
        try:
            PPO(config={"env": env, **config}, results_dir=str(ctx.results)).stop()
        finally:
            env.close()
    return call


def hung_env_in_a_worker(ctx: Context) -> None:
    """A rollout worker's env never returns from its 3rd step: train() must end, in a WorkerError."""
    from rltune.trainers import PPO

    config = {"num_workers": 1, "sample_timeout_s": 2, "disable_env_checking": True, "rollout_fragment_length": 10,
              "train_batch_size": 10, "sgd_minibatch_size": 10, "num_sgd_iter": 1, "model": {"fcnet_hiddens": [8]}}
    with PPO(config=config, env="trainers.envs:HangingEnv", results_dir=str(ctx.results)) as trainer:
        trainer.train()


def ray_name(make):
    """``tune.run`` with the Ray Tune object(s) ``make(tune)`` returns as its fields (a scheduler is made by the call)."""
    def call(ctx: Context) -> None:
        from rltune import tune

        run(**make(tune))(ctx)
    return call


def policy_from_checkpoint(policy_ids):
    """``Policy.from_checkpoint`` of the recorded PPO checkpoint, for ``policy_ids``."""
    def call(ctx: Context) -> None:
        from rltune.trainers import Policy

        Policy.from_checkpoint(ctx.checkpoint, policy_ids=policy_ids)
    return call


def tune_function(value):
    """``tune.function(value)``."""
    def call(ctx: Context) -> None:
        from rltune import tune

        tune.function(value)
    return call


def tuner(**settings):
    """``tune.Tuner(counter, ...).fit()`` with ``settings`` as TuneConfig / RunConfig / CheckpointConfig /
    FailureConfig keywords (``tune_``, ``run_``, ``checkpoint_``, ``failure_`` prefixes), or ``restore=...``."""
    def call(ctx: Context) -> None:
        from rltune import train, tune

        from orchestrator.trainables import counter

        if "restore" in settings:
            tune.Tuner.restore(ctx.fill(settings["restore"]), counter, **settings.get("restore_kwargs", {}))
            return
        grouped = {p: {k[len(p):]: v for k, v in settings.items() if k.startswith(p)}
                   for p in ("tune_", "run_", "checkpoint_", "failure_")}
        grouped["run_"] = {k: ctx.fill(v) if isinstance(v, str) else v for k, v in grouped["run_"].items()}
        grouped["run_"].setdefault("storage_path", str(ctx.results))
        run_config = train.RunConfig(verbose=0, **grouped["run_"],
                                     checkpoint_config=train.CheckpointConfig(**grouped["checkpoint_"]),
                                     failure_config=train.FailureConfig(**grouped["failure_"]))
        tune.Tuner(counter, param_space={"steps": 2}, tune_config=tune.TuneConfig(metric="score", **grouped["tune_"]),
                   run_config=run_config).fit()
    return call


CASES: list[Case] = [
    Case("api name escapes", "name: must be letters, digits", call=run(name="../../x")),
    Case("api name absolute", "name: must be letters, digits", call=run(name="/etc/x")),
    Case("api name NUL", "name: must not contain a NUL byte", call=run(name="a\x00b")),
    Case("api name newline", "name: must be letters, digits", call=run(name="a\nb")),
    Case("api name not a string", "name: Input should be a valid string", call=run(name=5)),
    Case("api num_samples bool", "num_samples: a bool is not a number", call=run(num_samples=True)),
    Case("api num_samples 10**30", "num_samples: Input should be less than or equal to 100000", call=run(num_samples=10**30)),
    Case("api n_trials bool", "n_trials: a bool is not a number", call=run(n_trials=True)),
    Case("api n_jobs bool", "n_jobs: a bool is not a number", call=run(n_jobs=True)),
    Case("api max_concurrent bool", "max_concurrent: a bool is not a number", call=run(max_concurrent=True)),
    Case("api keep_checkpoints_num bool", "keep_checkpoints_num: a bool", call=run(keep_checkpoints_num=True)),
    Case("api max_failures bool", "max_failures: a bool is not a number", call=run(max_failures=True)),
    Case("api checkpoint_freq bool", "checkpoint_freq: a bool is not a number", call=run(checkpoint_freq=True)),
    Case("api seed bool", "seed: a bool is not a number", call=run(seed=True)),
    Case("api seed huge", "seed: Input should be less than or equal to", call=run(seed=2**40)),
    Case("api timeout inf", "timeout_s: Input should be a finite number", call=run(timeout_s=math.inf)),
    Case("api timeout nan", "timeout_s: Input should be a finite number", call=run(timeout_s=math.nan)),
    Case("api trial_timeout nan", "trial_timeout_s: Input should be a finite number", call=run(trial_timeout_s=math.nan)),
    Case("api stop nan", "stop.score: the value must be a finite number", call=run(stop={"score": math.nan})),
    Case("api stop inf", "stop.score: the value must be a finite number", call=run(stop={"score": math.inf})),
    Case("api results_dir a file", "results_dir: '{afile}' is a file, not a directory", call=run(results_dir="{afile}")),
    Case("api results_dir NUL", "results_dir: must not contain a NUL byte", call=run(results_dir="/tmp/a\x00b")),
    Case("api storage NUL", "storage: must not contain a NUL byte", call=run(storage="sqlite:///a\x00b")),
    Case("api uniform nan", "config.x.uniform: needs [low, high]", call=space(lambda t: t.uniform(math.nan, 1))),
    Case("api loguniform zero", "config.x.loguniform: needs [low, high] with 0 < low", call=space(lambda t: t.loguniform(0, 1))),
    Case("api randint inf", "config.x.randint: needs [low, high]", call=space(lambda t: t.randint(0, math.inf))),
    Case("api quniform negative step", "config.x.quniform: needs", call=space(lambda t: t.quniform(0, 1, -0.1))),
    Case("api huge grid randint", "values are too many for search_alg grid",
         call=lambda ctx: run(config={"steps": 2, "x": {"randint": [0, 10**30]}}, search_alg="grid")(ctx)),
    Case("api ppo lr inf in study", "config.lr: Input should be a finite number",
         call=run(run="PPO", config={"env": "CartPole-v1", "lr": math.inf})),
    Case("api ppo lr grid nan", "config.lr: Input should be a finite number",
         call=lambda ctx: run(run="PPO", config={"env": "CartPole-v1", "lr": {"grid_search": [0.1, math.nan]}})(ctx)),
    Case("api multi-objective optuna pruner", "scheduler: an Optuna pruner instance prunes on one metric",
         call=lambda ctx: run(metric=["score", "step"], mode=["max", "min"],
                              scheduler=__import__("optuna").pruners.MedianPruner())(ctx)),
    Case("api multi-objective cmaes", "search_alg: cmaes cannot optimize several metrics",
         call=run(metric=["score", "step"], mode="max", search_alg="cmaes")),
    Case("api constraints not strings", "constraints.0: Input should be a valid string",
         call=run(constraints=[("score", "<=", 3)])),
    Case("api resume without name", "resume=True needs the name", call=run(resume=True)),
    Case("api resume missing study", "study 'nope' does not exist", call=run(resume=True, name="nope")),
    Case("api resume not a mode", "resume: must be True, False or 'auto'", call=run(resume="always", name="base")),
    Case("api results_dir read-only", "the study directory '{tmp}/ro/ro_study' cannot be created",
         call=run(results_dir="{tmp}/ro", name="ro_study"), setup=read_only_dir("ro")),
    Case("api trainer results_dir read-only", "results_dir '{tmp}/ro' cannot be written",
         call=ppo_in("{tmp}/ro"), setup=read_only_dir("ro")),
    Case("api unknown sampler", "search_alg: unknown search_alg", call=run(search_alg="annealing")),
    Case("api trainer lr nan", "lr: Input should be a finite number", call=ppo({"lr": math.nan})),
    Case("api trainer batch bool", "train_batch_size: a bool is not a number", call=ppo({"train_batch_size": True})),
    Case("api trainer seed huge", "seed: Input should be less than or equal to", call=ppo({"seed": 10**30})),
    Case("api dqn tau zero", "invalid DQN config: tau: Input should be greater than 0", call=ppo({"tau": 0}, "DQN")),
    Case("api trainer hiddens bool", "model.fcnet_hiddens", call=ppo({"model": {"fcnet_hiddens": [True]}})),
    Case("api trainer max_seq_len 0", "model.max_seq_len: Input should be greater than or equal to 1",
         call=ppo({"model": {"max_seq_len": 0}})),
    Case("api trainer sample_timeout_s negative", "sample_timeout_s: Input should be greater than 0",
         call=ppo({"sample_timeout_s": -1})),
    Case("api trainer sample_timeout_s string", "sample_timeout_s: Input should be a valid number",
         call=ppo({"sample_timeout_s": "1m"})),
    Case("api trainer sample_timeout_s inf", "sample_timeout_s: Input should be a finite number",
         call=ppo({"sample_timeout_s": math.inf})),
    Case("api trainer sample_timeout_s null", "sample_timeout_s: Input should be a valid number",
         call=ppo({"sample_timeout_s": None})),
    Case("api builder sample_timeout_s zero", "invalid PPOConfig.env_runners(): sample_timeout_s: Input should be greater",
         call=builder(lambda c: c.env_runners(sample_timeout_s=0))),
    Case("api hung env in a worker", "of env 'trainers.envs:HangingEnv' did not answer sample() within 2 s",
         call=hung_env_in_a_worker),
    Case("api builder lr nan", "invalid PPOConfig.training(): lr: Input should be a finite number",
         call=builder(lambda c: c.training(lr=math.nan))),
    Case("api builder unknown keyword", "invalid PPOConfig.env_runners(): num_env_runner: unknown keyword; did you mean",
         call=builder(lambda c: c.env_runners(num_env_runner=2))),
    Case("api builder wrong method", "num_envs_per_worker: not a keyword of training()",
         call=builder(lambda c: c.training(num_envs_per_worker=2))),
    Case("api builder grid then build", "search-space entries make a study",
         call=builder(lambda c: c.training(lr={"grid_search": [0.1, 0.01]}).environment("CartPole-v1").build())),
    Case("api builder other algorithm", "got a PPOConfig, which configures PPO, not DQN", call=dqn_of_a_ppo_builder),
    Case("api builder evaluation key with a colon", "invalid PPOConfig.evaluation(): evaluation_config.my:key: unknown key",
         call=builder(lambda c: c.evaluation(evaluation_config={"my:key": 1}))),
    Case("api from_checkpoint override by RLlib's name",
         "num_env_runners (num_workers in rltune): Input should be greater than or equal to 0",
         call=from_checkpoint_overriding({"num_env_runners": -1})),
    Case("api run resources unknown", "resources_per_trial.memory: unknown field",
         call=run(resources_per_trial={"cpu": 1, "memory": 2})),
    Case("api run local_dir and results_dir", "local_dir is", call=run(local_dir="{tmp}/a")),
    Case("api trainer nan_policy unknown", "nan_policy: Input should be 'raise' or 'drop_episode'",
         call=ppo({"nan_policy": "skip"})),
    Case("api env emits NaN reward", "(worker 0, env 0), step 3 of the episode: non-finite reward nan",
         call=nonfinite_env(False)),
    Case("api env emits inf observation", "step 2 of the episode: non-finite observation (flattened) entries [1] = inf",
         call=nonfinite_env(False, bad="obs", value="inf", at_step=2)),
    Case("api multi-agent env emits NaN observation", "agent 'b', step 3 of the episode: non-finite observation",
         call=nonfinite_env(True, bad="obs")),
    Case("api save NaN weights", "policy 'default_policy', weight tensor 'pi_head.bias' holds NaN or inf",
         call=save_nan_weights),
    Case("api stop negative time_total_s", "stop.time_total_s: must be > 0, but got -5", call=run(stop={"time_total_s": -5})),
    Case("api dqn tuple action space", "DQN needs a Discrete action space, but the action space is Tuple: Tuple(",
         call=space_env("DQN", "tuple")),
    Case("api ppo text action space", "PPO: action space Text(", call=space_env("PPO", "text")),
    # -- multi-agent envs and policies ---------------------------------------------------------------
    Case("api ma policy actions the agents lack", "the policy's action space Discrete(5) does not fit the agent's Discrete(2)",
         call=multi_agent("TurnGame", wide_actions)),
    Case("api ma truncateds without __all__", "breaks the multi-agent env API: step: truncateds has no '__all__' key",
         call=multi_agent("NoAllInTruncateds", lambda: {"p"}, train=True, disable_env_checking=True)),
    Case("api ma done agent acts again", "step 3 of an episode: agent 'a' has an observation, but it was done",
         call=multi_agent("Respawning", lambda: {"p"}, train=True, disable_env_checking=True)),
    Case("api ma done agent acts again checked", "step 3: agent 'a' has an observation, but it was done",
         call=multi_agent("Respawning", lambda: {"p"})),
    Case("api ma hosted policy in policies_to_train", "multiagent.policies_to_train: ['q'] are policies of another "
         "algorithm (DQNPolicy): this trainer acts with them but only trains PPOPolicy policies",
         call=multi_agent("TurnGame", hosted_dqn_policies, policies_to_train=["p", "q"])),
    Case("api ma hosted policy's unknown key", "multiagent.policies.q.config: dueling: Input should "
         "be a valid boolean", call=multi_agent("TurnGame", lambda: {"q": {"policy_class": "rltune.trainers:DQNPolicy", "config": {"dueling": "x"}}})),
    Case("api ma observation_fn result of another shape", "multiagent.observation_fn shrunk_observations returned for "
         "agent 'x' an observation that does not fit the observation space Box(0.0, 1.0, (2,), float32) of its policy 'p'",
         call=multi_agent("TurnGame", lambda: {"p"}, train=True,
                          multiagent={"policies": {"p"}, "observation_fn": shrunk_observations})),
    Case("api ma observation_fn a number", "multiagent.observation_fn: must be a function fn(agent_obs, worker, base_env",
         call=multi_agent("TurnGame", lambda: {"p"}, multiagent={"policies": {"p"}, "observation_fn": 5})),
    # -- builder misuse: a ConfigError naming the method and the argument --------------------------------
    Case("api ma env of unlike agents without multiagent", "the config has no 'multiagent' block, so every agent acts "
         "with one shared 'default_policy', but the agents' spaces differ", call=multi_agent("UnlikeAgents", dict)),
    Case("api ma env without spaces, spec without them", "multiagent.policies.p: env 'Undeclared' declares no "
         "observation or action space for its agents", call=multi_agent("Undeclared", lambda: {"p"})),
    Case("api builder mapping fn a number", "invalid PPOConfig.multi_agent(): policy_mapping_fn: must be a function",
         call=builder(lambda c: c.multi_agent(policy_mapping_fn=5))),
    Case("api builder env a number", "invalid PPOConfig.environment(): env: must be a gymnasium id",
         call=builder(lambda c: c.environment(env=5))),
    Case("api builder env_task_fn a number", "invalid PPOConfig.environment(): env_task_fn: must be a function",
         call=builder(lambda c: c.environment(env_task_fn=5))),
    Case("api builder observation_space a number", "invalid PPOConfig.environment(): observation_space: must be a gymnasium space",
         call=builder(lambda c: c.environment(observation_space=5))),
    Case("api builder policy config a number", "invalid PPOConfig.multi_agent(): policies: p.config: must be a dict",
         call=builder(lambda c: c.multi_agent(policies={"p": {"config": 5}}))),
    Case("api builder positional value", "invalid PPOConfig.training(): takes keywords only", call=builder(lambda c: c.training(0.1))),
    Case("api builder too many positional", "invalid PPOConfig.environment(): takes at most 1 positional argument(s) (env)",
         call=builder(lambda c: c.environment("CartPole-v1", {}))),
    Case("api builder method on the class", "invalid AlgorithmConfig.training(): called on the class, not on a config",
         call=on_the_class),
    Case("api builder algo_class a number", "invalid PPOConfig(): algo_class: must be a trainer class",
         call=algo_class_a_number),
    Case("api builder results_dir a number", "invalid PPO(): results_dir: must be a path",
         call=builder(lambda c: c.environment("CartPole-v1").build(results_dir=5))),
    Case("api trainer config a builder class", "invalid PPO(config=...): got the class PPOConfig, not a config",
         call=builder_class_as_config),
    Case("api trainer config a number", "invalid PPO(config=...): must be a dict of config keys", call=ppo(5)),
    # -- a gymnasium VectorEnv as env: options that act on single sub-envs, instances that cannot be shipped --
    Case("api vector env with another num_envs_per_worker", "num_envs_per_worker=3, but env 'SyncVectorEnv' is a "
         "gymnasium VectorEnv of 2 sub-envs", call=vector_env(num_envs_per_worker=3)),
    Case("api vector env with restart_failed_sub_environments", "restart_failed_sub_environments: True cannot rebuild "
         "one sub-env of env 'SyncVectorEnv'", call=vector_env(restart_failed_sub_environments=True)),
    Case("api vector env with env_task_fn", "env_task_fn: the sub-envs of env 'SyncVectorEnv', a gymnasium VectorEnv, "
         "cannot be reached", call=vector_env(env_task_fn=lambda result, env, ctx: 0)),
    Case("api AsyncVectorEnv instance to a rollout worker", "an AsyncVectorEnv instance cannot be sent to rollout "
         "worker processes", call=vector_env("async", num_workers=1)),
    # -- Ray Tune's schedulers, searchers and MLflow names: each argument honoured or refused by name --
    Case("api ray ASHA time_attr", "invalid ASHAScheduler: time_attr='timesteps_total': the study's pruners count",
         call=ray_name(lambda t: {"scheduler": t.ASHAScheduler(time_attr="timesteps_total")})),
    Case("api ray ASHA brackets", "invalid ASHAScheduler: brackets=3: rltune's ASHA has one bracket",
         call=ray_name(lambda t: {"scheduler": t.ASHAScheduler(brackets=3)})),
    Case("api ray ASHA grace over max_t", "invalid AsyncHyperBandScheduler: grace_period=5: must be at most max_t=2",
         call=ray_name(lambda t: {"scheduler": t.AsyncHyperBandScheduler(max_t=2, grace_period=5)})),
    Case("api ray ASHA reduction_factor 1", "invalid ASHAScheduler: reduction_factor=1: must be an int >= 2",
         call=ray_name(lambda t: {"scheduler": t.ASHAScheduler(reduction_factor=1)})),
    Case("api ray HyperBand max_t 0", "invalid HyperBandScheduler: max_t=0: must be an int >= 1",
         call=ray_name(lambda t: {"scheduler": t.HyperBandScheduler(max_t=0)})),
    Case("api ray PBT synch", "invalid PopulationBasedTraining: synch='yes': must be True or False",
         call=ray_name(lambda t: {"scheduler": t.PopulationBasedTraining(synch="yes", hyperparam_mutations={"lr": [1]})})),
    Case("api ray PBT time_attr", "invalid PopulationBasedTraining: time_attr='time_total_s'",
         call=ray_name(lambda t: {"scheduler": t.PopulationBasedTraining(time_attr="time_total_s",
                                                                         hyperparam_mutations={"lr": [1]})})),
    Case("api ray median hard_stop", "invalid MedianStoppingRule: hard_stop=False: rltune stops (prunes) a trial",
         call=ray_name(lambda t: {"scheduler": t.MedianStoppingRule(hard_stop=False)})),
    Case("api ray median min_time_slice", "invalid MedianStoppingRule: min_time_slice=10: rltune never pauses",
         call=ray_name(lambda t: {"scheduler": t.MedianStoppingRule(min_time_slice=10)})),
    Case("api ray median time_attr", "invalid MedianStoppingRule: time_attr='episodes_total'",
         call=ray_name(lambda t: {"scheduler": t.MedianStoppingRule(time_attr="episodes_total")})),
    Case("api ray scheduler mode", "invalid ASHAScheduler: mode='maximize': must be 'max' or 'min'",
         call=ray_name(lambda t: {"scheduler": t.ASHAScheduler(mode="maximize")})),
    Case("api ray metric clash", "metric: tune.run gives 'score' but ASHAScheduler gives 'loss'; give it once",
         call=ray_name(lambda t: {"scheduler": t.ASHAScheduler(metric="loss")})),
    Case("api ray mode clash", "mode: OptunaSearch gives 'min' but ASHAScheduler gives 'max'",
         call=ray_name(lambda t: {"search_alg": t.OptunaSearch(mode="min"), "scheduler": t.ASHAScheduler(mode="max")})),
    Case("api ray searcher as scheduler", "scheduler: OptunaSearch is not a scheduler",
         call=ray_name(lambda t: {"scheduler": t.OptunaSearch()})),
    Case("api ray OptunaSearch space", "invalid OptunaSearch: space={'x': 1}: give the search space as the study's config",
         call=ray_name(lambda t: {"search_alg": t.OptunaSearch(space={"x": 1})})),
    Case("api ray OptunaSearch sampler not a sampler", "invalid OptunaSearch: sampler='tpe': must be an Optuna sampler",
         call=ray_name(lambda t: {"search_alg": t.OptunaSearch(sampler="tpe")})),
    Case("api ray OptunaSearch evaluated_rewards", "invalid OptunaSearch: evaluated_rewards=[1.0]: results of points",
         call=ray_name(lambda t: {"search_alg": t.OptunaSearch(points_to_evaluate=[{}], evaluated_rewards=[1.0])})),
    Case("api ray OptunaSearch mode list length", "invalid OptunaSearch: mode=['max']: needs one mode per metric (2)",
         call=ray_name(lambda t: {"search_alg": t.OptunaSearch(metric=["a", "b"], mode=["max"])})),
    Case("api ray HyperOpt metric list", "invalid HyperOptSearch: metric=['a', 'b']: must be one result key "
                                         "(a string); a multi-objective study takes a list",
         call=ray_name(lambda t: {"search_alg": t.HyperOptSearch(metric=["a", "b"])})),
    Case("api ray HyperOpt gamma", "invalid HyperOptSearch: gamma=2: must be in (0, 1]",
         call=ray_name(lambda t: {"search_alg": t.HyperOptSearch(gamma=2)})),
    Case("api ray BayesOpt utility_kwargs", "invalid BayesOptSearch: utility_kwargs={'kind': 'ucb'}: Optuna's GPSampler",
         call=ray_name(lambda t: {"search_alg": t.BayesOptSearch(utility_kwargs={"kind": "ucb"})})),
    Case("api ray BayesOpt analysis", "invalid BayesOptSearch: analysis='a': a study continues from its storage",
         call=ray_name(lambda t: {"search_alg": t.BayesOptSearch(analysis="a")})),
    Case("api ray BasicVariantGenerator constant grid", "invalid BasicVariantGenerator: constant_grid_search=True",
         call=ray_name(lambda t: {"search_alg": t.BasicVariantGenerator(constant_grid_search=True)})),
    Case("api ray BasicVariantGenerator RandomState", "invalid BasicVariantGenerator: random_state=1.5: must be an int seed",
         call=ray_name(lambda t: {"search_alg": t.BasicVariantGenerator(random_state=1.5)})),
    Case("api ray limiter batch", "invalid ConcurrencyLimiter: batch=True: trials start one at a time",
         call=ray_name(lambda t: {"search_alg": t.ConcurrencyLimiter(t.OptunaSearch(), 2, batch=True)})),
    Case("api ray limiter of a scheduler", "invalid ConcurrencyLimiter: searcher=ASHAScheduler(",
         call=ray_name(lambda t: {"search_alg": t.ConcurrencyLimiter(t.ASHAScheduler(), 2)})),
    Case("api ray limiter zero", "invalid ConcurrencyLimiter: max_concurrent=0: must be an int >= 1",
         call=ray_name(lambda t: {"search_alg": t.ConcurrencyLimiter(t.OptunaSearch(), 0)})),
    Case("api ray point not in the space", "points_to_evaluate[0].y: not a search-space entry of the config",
         call=ray_name(lambda t: {"search_alg": t.OptunaSearch(points_to_evaluate=[{"y": 1}])})),
    Case("api ray point of a grid", "points_to_evaluate: the config has grid_search entries",
         call=ray_name(lambda t: {"search_alg": t.OptunaSearch(points_to_evaluate=[{"x": 1}]),
                                  "config": {"steps": 2, "x": t.grid_search([1, 2])}})),
    Case("api ray sample_from not a function", "invalid tune.sample_from: needs a function", call=space(lambda t: t.sample_from(5))),
    Case("api ray sample_from raises", "config.x: tune.sample_from's function raised ZeroDivisionError",
         call=space(lambda t: t.sample_from(lambda spec: 1 / 0))),
    Case("api ray qrandint step", "config.x.qrandint: needs [low, high, q] of ints", call=space(lambda t: t.qrandint(0, 10, 3))),
    Case("api ray lograndint zero", "config.x.lograndint: needs [low, high] of ints with 0 < low", call=space(lambda t: t.lograndint(0, 9))),
    Case("api ray qloguniform zero", "config.x.qloguniform: needs [low, high, q] with 0 < low", call=space(lambda t: t.qloguniform(0, 1, 0.1))),
    Case("api ray randn sd 0", "config.x.randn: needs [mean, sd] with sd > 0", call=space(lambda t: t.randn(0, 0))),
    Case("api ray randn grid", "config.x.randn: search_alg grid runs a finite grid",
         call=lambda ctx: run(config={"steps": 2, "x": {"randn": [0, 1]}}, search_alg="grid")(ctx)),
    Case("api ray MLflow tags", "invalid MLflowLoggerCallback: tags={'a': 'b'}: rltune tags its runs itself",
         call=ray_name(lambda t: {"callbacks": [t.MLflowLoggerCallback(tags={"a": "b"})]})),
    Case("api ray MLflow token", "invalid MLflowLoggerCallback: tracking_token='***': set MLFLOW_TRACKING_TOKEN",
         call=ray_name(lambda t: {"callbacks": [t.MLflowLoggerCallback(tracking_token="s3cret")]})),
    Case("api ray MLflow registry", "invalid MLflowLoggerCallback: registry_uri='x': rltune registers no models",
         call=ray_name(lambda t: {"callbacks": [t.MLflowLoggerCallback(registry_uri="x")]})),
    Case("api ray MLflow experiment clash", "name: tune.run gives 'a' but MLflowLoggerCallback gives 'b'",
         call=ray_name(lambda t: {"name": "a", "callbacks": [t.MLflowLoggerCallback(experiment_name="b")]})),
    Case("api ray other callback", "callbacks: object is not taken", call=ray_name(lambda t: {"callbacks": [object()]})),
    Case("api ray config.mlflow option", "invalid config.mlflow: run_name='r': each trial's run is named after its trial",
         call=ray_name(lambda t: {"config": {"steps": 2, "mlflow": {"run_name": "r"}}})),
    # -- RLlib 2.x's script API (issue 26) --
    Case("api builder render_env true", "render_env: True is not supported yet: rltune renders no env yet",
         call=builder(lambda c: c.environment("CartPole-v1", render_env=True))),
    Case("api builder item a bad value", "invalid PPOConfig.update_from_dict(): lr: Input should be a valid number",
         call=builder(lambda c: c.__setitem__("lr", "fast"))),
    Case("api run resources function raises", "resources_per_trial: the function raised KeyError: 'nope'",
         call=run(resources_per_trial=lambda config: {"cpu": config["nope"]})),
    Case("api run resources function returns bad", "resources_per_trial (as the function returned them)",
         call=run(resources_per_trial=lambda config: {"cpu": -1})),
    Case("api policy from_checkpoint unknown id", "no trained policy 'nope'", call=policy_from_checkpoint("nope")),
    Case("api tune.function of a number", "invalid tune.function(): must be a function", call=tune_function(3)),
    # -- Ray Tune 2.x's Tuner: each setting named with the class that takes it ------------------------
    Case("api TuneConfig unknown argument", "invalid TuneConfig: num_sample: unknown argument; did you mean "
         "'num_samples'?", call=tuner(tune_num_sample=2)),
    Case("api TuneConfig num_samples a string", "invalid TuneConfig: num_samples: Input should be a valid integer",
         call=tuner(tune_num_samples="two")),
    Case("api TuneConfig mode list", "invalid TuneConfig: mode: Input should be 'max' or 'min' (or a list of them",
         call=tuner(tune_mode=["max", "up"])),
    Case("api TuneConfig trial_name_creator", "invalid TuneConfig: trial_name_creator: not supported",
         call=tuner(tune_trial_name_creator=str)),
    Case("api RunConfig unknown argument", "invalid RunConfig: storage: unknown argument; did you mean 'storage_path'?",
         call=tuner(run_storage="x")),
    Case("api RunConfig stop a function", "invalid RunConfig: stop: Input should be a valid dictionary",
         call=tuner(run_stop=lambda trial_id, result: False)),
    Case("api RunConfig callbacks", "invalid RunConfig: callbacks: object is not a tune.Callback",
         call=tuner(run_callbacks=[object()])),
    Case("api CheckpointConfig num_to_keep 0", "invalid CheckpointConfig: num_to_keep: Input should be greater than "
         "or equal to 1", call=tuner(checkpoint_num_to_keep=0)),
    Case("api FailureConfig fail_fast", "invalid FailureConfig: fail_fast: not supported", call=tuner(failure_fail_fast=True)),
    Case("api Tuner name a path", "invalid Tuner: name: must be letters, digits", call=tuner(run_name="../up")),
    Case("api Tuner storage_path read-only", "cannot write the Tuner's settings '{tmp}/ro/ro_tuner/tuner.json': read-only file system",
         call=tuner(run_storage_path="{tmp}/ro", run_name="ro_tuner"), setup=read_only_dir("ro")),
    Case("api Tuner.restore of no study", "invalid Tuner.restore: path: '{afile}' is not the directory of a Tuner's study",
         call=tuner(restore="{afile}")),
    Case("api Tuner.restore resume_errored and restart_errored", "resume_errored and restart_errored are both True; "
         "give one", call=tuner(restore="{tmp}", restore_kwargs={"restart_errored": True, "resume_errored": True})),
]
