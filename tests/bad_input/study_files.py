"""Bad study files (``rltune tune FILE``) and train files (``rltune train -f FILE``)."""

from __future__ import annotations

from .harness import Case, study_case, train_file_case

FN = "run: orchestrator.trainables:counter\nmetric: score\nstop: {training_iteration: 2}\n"  # a valid head
PPO = "run: PPO\nstop: {training_iteration: 1}\nconfig:\n  env: CartPole-v1\n"  # config entries follow, indented


def _bomb(levels: int = 25) -> str:
    """A ~1.2 KB 'billion laughs' study: each level is a dict of two aliases of the one before."""
    lines = ["    l0: &l0 {a: 1, b: 2}"]
    lines += [f"    l{i}: &l{i} {{a: *l{i - 1}, b: *l{i - 1}, c: *l{i - 1}}}" for i in range(1, levels)]
    return FN + "config:\n  steps: 2\n  junk:\n" + "\n".join(lines) + "\n"


def _fn(extra: str) -> str:
    return FN + "config: {steps: 2}\n" + extra


CASES: list[Case] = [
    # -- the file itself ---------------------------------------------------------------------
    Case("missing file", "the file does not exist", ("tune", "{tmp}/nope.yaml", "--results-dir", "{results}")),
    Case("directory as file", "cannot read it", ("tune", "{tmp}", "--results-dir", "{results}")),
    study_case("empty file", "", "the file is empty"),
    study_case("list not mapping", "- run\n- PPO\n", "must be a mapping of fields"),
    study_case("scalar not mapping", "PPO\n", "must be a mapping of fields"),
    study_case("malformed yaml", FN + "config: {steps: 2\n", "not valid YAML"),
    study_case("tab indentation", FN + "config:\n\tsteps: 2\n", "not valid YAML"),
    study_case("python tag", FN + "config: !!python/object/apply:os.system ['true']\n", "not valid YAML"),
    study_case("duplicate top-level key", _fn("num_samples: 1\nnum_samples: 2\n"),
               "duplicate key 'num_samples' (first at line 5, again at line 6)"),
    study_case("duplicate config key", FN + "config:\n  steps: 2\n  steps: 3\n",
               "duplicate key 'steps' (first at line 5, again at line 6)"),
    study_case("alias bomb", _bomb(), "expand it to more than 100,000 values"),
    study_case("recursive alias", FN + "config: &c {steps: 2, again: *c}\n", "refers to the value that contains it"),
    study_case("deeply nested", FN + "config: " + "[" * 5000 + "]" * 5000 + "\n", "not valid YAML"),
    study_case("unknown field", _fn("num_sample: 2\n"), "num_sample: unknown field; did you mean 'num_samples'?"),
    study_case("missing run", "metric: score\nconfig: {steps: 2}\n", "run: required"),
    study_case("run not a trainable", "run: 5\nconfig: {steps: 2}\n", "run: must be a trainer name"),
    study_case("unknown trainer", "run: PPOO\nconfig: {env: CartPole-v1}\n", "unknown algorithm 'PPOO'"),
    study_case("config not a mapping", FN + "config: [1, 2]\n", "config: Input should be a valid dictionary"),
    # -- ints given as bools, absurd or non-finite budgets ---------------------------------------
    study_case("num_samples bool", _fn("num_samples: true\n"), "num_samples: a bool is not a number"),
    study_case("num_samples zero", _fn("num_samples: 0\n"), "num_samples: Input should be greater than or equal to 1"),
    study_case("num_samples 10**30", _fn("num_samples: 1000000000000000000000000000000\n"),
               "num_samples: Input should be less than or equal to 100000"),
    study_case("num_samples inf", _fn("num_samples: .inf\n"), "num_samples: Input should be a finite number"),
    study_case("num_samples string", _fn("num_samples: many\n"), "num_samples: Input should be a valid integer"),
    study_case("num_samples fraction", _fn("num_samples: 1.5\n"), "num_samples: Input should be a valid integer"),
    study_case("n_trials bool", _fn("n_trials: true\n"), "n_trials: a bool is not a number"),
    study_case("n_trials zero", _fn("n_trials: 0\n"), "n_trials: Input should be greater than or equal to 1"),
    study_case("n_trials 10**30", _fn("n_trials: 1000000000000000000000000000000\n"),
               "n_trials: Input should be less than or equal to 100000"),
    study_case("n_jobs bool", _fn("n_jobs: true\n"), "n_jobs: a bool is not a number"),
    study_case("n_jobs zero", _fn("n_jobs: 0\n"), "n_jobs: Input should be greater than or equal to 1"),
    study_case("max_concurrent bool", _fn("max_concurrent: true\n"), "max_concurrent: a bool is not a number"),
    study_case("checkpoint_freq bool", _fn("checkpoint_freq: true\n"), "checkpoint_freq: a bool is not a number"),
    study_case("checkpoint_freq negative", _fn("checkpoint_freq: -1\n"), "checkpoint_freq: Input should be greater"),
    study_case("keep_checkpoints_num bool", _fn("keep_checkpoints_num: true\n"), "keep_checkpoints_num: a bool"),
    study_case("keep_checkpoints_num zero", _fn("keep_checkpoints_num: 0\n"), "keep_checkpoints_num: Input should be"),
    study_case("max_failures bool", _fn("max_failures: false\n"), "max_failures: a bool is not a number"),
    study_case("max_failures negative", _fn("max_failures: -1\n"), "max_failures: Input should be greater"),
    study_case("seed bool", _fn("seed: true\n"), "seed: a bool is not a number"),
    study_case("seed negative", _fn("seed: -1\n"), "seed: Input should be greater than or equal to 0"),
    study_case("seed 10**30", _fn("seed: 1000000000000000000000000000000\n"), "seed: Input should be less than"),
    study_case("heartbeat_interval_s bool", _fn("heartbeat_interval_s: true\n"), "heartbeat_interval_s: a bool"),
    study_case("heartbeat_grace_s zero", _fn("heartbeat_grace_s: 0\n"), "heartbeat_grace_s: Input should be"),
    study_case("timeout_s inf", _fn("timeout_s: .inf\n"), "timeout_s: Input should be a finite number"),
    study_case("timeout_s nan", _fn("timeout_s: .nan\n"), "timeout_s: Input should be a finite number"),
    study_case("timeout_s negative", _fn("timeout_s: -1\n"), "timeout_s: Input should be greater than 0"),
    study_case("timeout_s bool", _fn("timeout_s: true\n"), "timeout_s: a bool is not a number"),
    study_case("timeout_s string", _fn("timeout_s: soon\n"), "timeout_s: Input should be a valid number"),
    study_case("trial_timeout_s inf", _fn("trial_timeout_s: .inf\n"), "trial_timeout_s: Input should be a finite"),
    study_case("checkpoint_at_end not bool", _fn("checkpoint_at_end: maybe\n"), "checkpoint_at_end: Input should be"),
    study_case("tracking not bool", _fn("tracking: 5\n"), "tracking: Input should be a valid boolean"),
    study_case("mode", _fn("mode: up\n"), "mode: Input should be 'max' or 'min'"),
    study_case("empty metric", "run: orchestrator.trainables:counter\nmetric: ''\nconfig: {steps: 2}\n",
               "metric: must be a result key"),
    # -- names and paths -------------------------------------------------------------------------
    study_case("name escapes", _fn("name: ../../x\n"), "name: must be letters, digits"),
    study_case("name with slash", _fn("name: a/b\n"), "name: must be letters, digits"),
    study_case("name hidden", _fn("name: .hidden\n"), "name: must be letters, digits"),
    study_case("name dotdot", _fn("name: '..'\n"), "name: must be letters, digits"),
    study_case("name newline", _fn('name: "a\\nb"\n'), "name: must be letters, digits"),
    study_case("name NUL", _fn('name: "a\\0b"\n'), "name: must not contain a NUL byte"),
    study_case("name too long", _fn("name: " + "n" * 200 + "\n"), "at most 128 characters"),
    study_case("name empty", _fn("name: ''\n"), "name: must be letters, digits"),
    study_case("name not a string", _fn("name: [a]\n"), "name: Input should be a valid string"),
    study_case("results_dir is a file", _fn("results_dir: {afile}\n"), "results_dir: '{afile}' is a file, not a directory", results_flag=False),
    study_case("results_dir under a file", _fn("results_dir: {afile}/sub\n"), "which is a file, not a directory", results_flag=False),
    study_case("results_dir NUL", _fn('results_dir: "/tmp/a\\0b"\n'), "results_dir: must not contain a NUL byte", results_flag=False),
    study_case("storage NUL", _fn('storage: "sqlite:///a\\0b"\n'), "storage: must not contain a NUL byte"),
    # -- trainer config values (rltune's own keys) ------------------------------------------------
    study_case("lr inf", PPO + "  lr: .inf\n", "config.lr: Input should be a finite number"),
    study_case("lr nan", PPO + "  lr: .nan\n", "config.lr: Input should be a finite number"),
    study_case("gamma -inf", PPO + "  gamma: -.inf\n", "config.gamma: Input should be a finite number"),
    study_case("num_gpus inf", PPO + "  num_gpus: .inf\n", "config.num_gpus: Input should be a finite number"),
    study_case("train_batch_size bool", PPO + "  train_batch_size: true\n", "config.train_batch_size:"),
    study_case("num_workers bool", PPO + "  num_workers: true\n", "config.num_workers:"),
    study_case("config seed bool", PPO + "  seed: true\n", "config.seed:"),
    study_case("config seed huge", PPO + "  seed: 1000000000000000000000000000000\n", "config.seed: Input should be less"),
    study_case("fcnet_hiddens bool", PPO + "  model: {fcnet_hiddens: [true, 64]}\n", "config.model.fcnet_hiddens"),
    study_case("fcnet_hiddens inf", PPO + "  model: {fcnet_hiddens: [.inf]}\n", "config.model.fcnet_hiddens.0"),
    study_case("lr_schedule nan", PPO + "  lr_schedule: [[0, .nan]]\n", "config.lr_schedule.0.1"),
    study_case("clip_param inf", PPO + "  clip_param: .inf\n", "config.clip_param: Input should be a finite number"),
    study_case("unknown config key", PPO + "  lr_: 0.1\n", "config.lr_: unknown key; did you mean 'lr'?"),
    study_case("two envs", "env: Pendulum-v1\n" + PPO, "env is 'Pendulum-v1' but config.env is 'CartPole-v1'"),
    study_case("trainer without env", "run: PPO\nconfig: {lr: 0.1}\n", "config.env: PPO needs an env"),
    # -- search-space entries --------------------------------------------------------------------
    study_case("loguniform zero", PPO + "  lr: {loguniform: [0, 0.1]}\n", "config.lr.loguniform: needs [low, high] with 0 <"),
    study_case("uniform nan bound", _fn("") .replace("config: {steps: 2}", "config: {steps: 2, x: {uniform: [.nan, 1]}}"),
               "config.x.uniform: needs [low, high]"),
    study_case("uniform inf bound", FN + "config: {steps: 2, x: {uniform: [0, .inf]}}\n", "config.x.uniform: needs"),
    study_case("uniform too wide", FN + "config: {steps: 2, x: {uniform: [-1.0e308, 1.0e308]}}\n",
               "config.x.uniform: the range [-1e+308, 1e+308] is too wide"),
    study_case("uniform bool bound", FN + "config: {steps: 2, x: {uniform: [false, true]}}\n", "config.x.uniform: needs"),
    study_case("randint fraction", FN + "config: {steps: 2, x: {randint: [0, 1.5]}}\n", "config.x.randint: needs"),
    study_case("quniform zero step", FN + "config: {steps: 2, x: {quniform: [0, 1, 0]}}\n", "config.x.quniform: needs"),
    study_case("grid_search empty", FN + "config: {steps: 2, x: {grid_search: []}}\n", "config.x.grid_search: needs a non-empty"),
    study_case("choice not a list", FN + "config: {steps: 2, x: {choice: 5}}\n", "config.x.choice: needs a non-empty list"),
    study_case("misspelt entry", FN + "config: {steps: 2, x: {loguniformm: [0.1, 1]}}\n", "did you mean 'loguniform'?"),
    study_case("huge randint under grid", FN + "search_alg: grid\nconfig: {steps: 2, x: {randint: [0, 1000000000000000000000000000000]}}\n",
               "config.x.randint: 1,000,000,000,000,000,019,884,624,838,656 values are too many"),
    study_case("continuous under grid", FN + "search_alg: grid\nconfig: {steps: 2, x: {uniform: [0, 1]}}\n",
               "config.x.uniform: search_alg grid runs a finite grid"),
    study_case("grid of a million points", FN + "config: {steps: 2, " + ", ".join(
        f"g{i}: {{grid_search: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]}}" for i in range(6)) + "}\n",
               "config: the grid entries make 1,000,000 grid points"),
    study_case("grid times num_samples", FN + "num_samples: 20000\nconfig: {steps: 2, g: {grid_search: [1, 2, 3, 4, 5, 6]}}\n",
               "num_samples: 6 grid points x 20,000 samples make more than 100,000 trials"),
    study_case("search entry bad for trainer", PPO + "  lr: {choice: [0.1, -1]}\n", "(when lr = -1)"),
    # -- stop criteria ------------------------------------------------------------------------------
    study_case("stop inf", _fn("").replace("stop: {training_iteration: 2}", "stop: {score: .inf}"),
               "stop.score: the value must be a finite number"),
    study_case("stop nan", _fn("").replace("stop: {training_iteration: 2}", "stop: {score: .nan}"),
               "stop.score: the value must be a finite number"),
    study_case("stop -inf", _fn("").replace("stop: {training_iteration: 2}", "stop: {score: -.inf}"),
               "stop.score: the value must be a finite number"),
    study_case("stop string", _fn("").replace("stop: {training_iteration: 2}", "stop: {score: lots}"),
               "stop.score: the value must be a number"),
    study_case("stop bool", _fn("").replace("stop: {training_iteration: 2}", "stop: {score: true}"),
               "stop.score: the value must be a number"),
    study_case("stop not a mapping", _fn("").replace("stop: {training_iteration: 2}", "stop: [1]"),
               "stop: Input should be a valid dictionary"),
    # -- sampler and pruner ---------------------------------------------------------------------------
    study_case("unknown search_alg", _fn("search_alg: tpee\n"), "search_alg: unknown search_alg 'tpee'; did you mean 'tpe'?"),
    study_case("search_alg bad option", _fn("search_alg: {type: tpe, n_startup: 5}\n"), "search_alg.n_startup: not an option of tpe"),
    study_case("search_alg number", _fn("search_alg: 5\n"), "search_alg: must be one of"),
    study_case("unknown scheduler", _fn("scheduler: ashaa\n"), "scheduler: unknown scheduler 'ashaa'"),
    study_case("scheduler and pruner", _fn("scheduler: asha\npruner: median\n"), "scheduler and pruner are the same field"),
    study_case("grid with options", _fn("search_alg: {type: grid, seed: 1}\n"), "search_alg"),
    study_case("curriculum twice", FN + "curriculum: {phases: []}\nconfig: {steps: 2, curriculum: {phases: []}}\n",
               "curriculum is given both as a field and in config"),
    study_case("rllib layout bad field", "exp:\n  run: orchestrator.trainables:counter\n  config: {steps: 2}\n  num_samples: true\n",
               "num_samples: a bool is not a number"),
]

TRAIN_CASES: list[Case] = [
    train_file_case("train empty", "", "the file is empty"),
    train_file_case("train duplicate key", "run: PPO\nenv: CartPole-v1\nrun: DQN\n", "duplicate key 'run' (first at line 1, again at line 3)"),
    train_file_case("train alias bomb", _bomb().replace(FN, "run: PPO\nenv: CartPole-v1\n"), "expand it to more than 100,000 values"),
    train_file_case("train file name escapes", "run: PPO\nenv: CartPole-v1\nname: ../../x\n", "line 3: name: must be letters, digits"),
    train_file_case("train file name NUL", 'run: PPO\nenv: CartPole-v1\nname: "a\\0b"\n', "name: must not contain a NUL byte"),
    train_file_case("train checkpoint_freq bool", "run: PPO\nenv: CartPole-v1\ncheckpoint_freq: true\n", "checkpoint_freq: a bool"),
    train_file_case("train checkpoint_freq negative", "run: PPO\nenv: CartPole-v1\ncheckpoint_freq: -2\n", "checkpoint_freq: Input should be"),
    train_file_case("train stop inf", "run: PPO\nenv: CartPole-v1\nstop: {timesteps_total: .inf}\n", "stop.timesteps_total: Input should be a finite"),
    train_file_case("train stop nan", "run: PPO\nenv: CartPole-v1\nstop: {timesteps_total: .nan}\n", "stop.timesteps_total: Input should be a finite"),
    train_file_case("train file results_dir a file", "run: PPO\nenv: CartPole-v1\nresults_dir: {afile}\n", "results_dir: '{afile}' is a file", results_flag=False),
    train_file_case("train lr inf", "run: PPO\nenv: CartPole-v1\nconfig: {lr: .inf}\n", "lr: Input should be a finite number"),
    train_file_case("train unknown field", "run: PPO\nenv: CartPole-v1\nstpo: {}\n", "stpo: unknown field; did you mean 'stop'?"),
    train_file_case("train config not mapping", "run: PPO\nenv: CartPole-v1\nconfig: 5\n", "config: Input should be a valid dictionary"),
    train_file_case("train checkpoint_at_end", "run: PPO\nenv: CartPole-v1\ncheckpoint_at_end: often\n", "checkpoint_at_end: Input should be"),
    train_file_case("train search entry", "run: PPO\nenv: CartPole-v1\nconfig: {lr: {choice: [0.1, 0.2]}}\n", "search-space entries make a study"),
    train_file_case("train not a mapping", "[run, PPO]\n", "must be a mapping of fields"),
]

CASES += TRAIN_CASES
