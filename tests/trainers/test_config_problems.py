"""Config problems are structured records rendered once, and a config goes through RLlib's names once.

Before, the RLlib translation and the builder re-read rltune's own error
text (``problem.startswith(path + ":")``, ``p.split(":")[0]``) to reword or
drop problems: an evaluation override whose key holds a colon lost its
problem. And a checkpoint's config was translated in ``from_checkpoint`` and
again in the trainer, which then named an override by rltune's name, not by
the RLlib name the caller wrote.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rltune.errors import UNKNOWN_KEY, ConfigError, Problem
from rltune.trainers import PPO, PPOConfig
from rltune.trainers.rllib import _rllib_names

TINY = {"env": "CartPole-v1", "num_workers": 0, "train_batch_size": 32, "sgd_minibatch_size": 16, "num_sgd_iter": 1,
        "rollout_fragment_length": 32, "model": {"fcnet_hiddens": [16]}}


def test_a_config_error_carries_each_problem_as_a_record_with_its_path_and_hint():
    with pytest.raises(ConfigError) as caught:
        PPO.validate({"env": "CartPole-v1", "num_env_runners": -1, "lrr": 0.1})
    by_path = {p.path: p for p in caught.value.details}
    renamed, unknown = by_path[("num_workers",)], by_path[("lrr",)]
    assert renamed.where() == "num_env_runners (num_workers in rltune)"
    assert unknown.kind == UNKNOWN_KEY and unknown.hint == "did you mean 'lr'?"
    assert caught.value.problems == [str(p) for p in caught.value.details]
    assert "lrr: unknown key; did you mean 'lr'?" in str(caught.value)


def test_a_problem_renders_its_path_what_and_hint_and_moves_into_a_block():
    problem = Problem(("model", "fcnet_hiddens"), "must be a list", "e.g. [64, 64]")
    assert str(problem) == "model.fcnet_hiddens: must be a list; e.g. [64, 64]"
    assert str(problem.under("evaluation_config")) == "evaluation_config.model.fcnet_hiddens: must be a list; e.g. [64, 64]"
    assert str(problem.shown_as("hidden")) == "hidden: must be a list; e.g. [64, 64]"
    assert str(ConfigError([problem, "plain text"])).startswith("invalid config (2 problems):")


def test_an_evaluation_override_whose_key_holds_a_colon_is_still_refused():
    with pytest.raises(ConfigError, match=r"evaluation_config\.my:key: unknown key"):
        PPOConfig().evaluation(evaluation_config={"my:key": 1})


def test_the_rllib_translation_reads_no_error_text():
    package = Path(_rllib_names.__file__).parent
    text_reading = re.compile(r"""partition\(":"\)|split\(":"\)|startswith\("unknown key"\)|startswith\(path \+""")
    for module in sorted(package.glob("*.py")):
        assert not text_reading.search(module.read_text()), module.name


@pytest.fixture
def translations(monkeypatch):
    """How many configs went through the translation (each pass sets the new stack's defaults once)."""
    calls: list[dict] = []
    real = _rllib_names._new_stack_defaults

    def counted(out, config_cls):
        calls.append(dict(out))
        real(out, config_cls)

    monkeypatch.setattr(_rllib_names, "_new_stack_defaults", counted)
    return calls


def test_a_trainer_and_a_builder_translate_their_config_once(translations):
    PPO(config={**TINY, "num_env_runners": 0}).stop()
    assert len(translations) == 1
    builder = PPOConfig().environment("CartPole-v1").env_runners(num_env_runners=0).training(
        train_batch_size=32, sgd_minibatch_size=16, num_sgd_iter=1)
    translations.clear()
    builder.build().stop()
    assert len([c for c in translations if c]) == 1  # (its empty evaluation_config block is translated too)


def test_from_checkpoint_translates_the_saved_config_and_the_overrides_once_each(tmp_path, translations):
    with PPO(config=TINY, results_dir=str(tmp_path)) as trainer:
        checkpoint = trainer.save(str(tmp_path / "ckpt"))
    translations.clear()
    PPO.from_checkpoint(checkpoint, config_overrides={"num_epochs": 2}).stop()
    given = [c for c in translations if c]  # (the saved config's empty evaluation_config block is translated too)
    assert len(given) == 2 and given[1] == {"num_sgd_iter": 2}  # the saved config, then the overrides
    assert not any(c.get("num_sgd_iter") == 2 and "env" in c for c in translations)  # not the merged one in PPO()


def test_from_checkpoint_names_an_override_as_the_caller_wrote_it(tmp_path):
    with PPO(config=TINY, results_dir=str(tmp_path)) as trainer:
        checkpoint = trainer.save(str(tmp_path / "ckpt"))
    with pytest.raises(ConfigError, match=r"num_env_runners \(num_workers in rltune\): Input should be greater"):
        PPO.from_checkpoint(checkpoint, config_overrides={"num_env_runners": -1})


def test_the_evaluation_config_is_not_translated_again(tmp_path, translations):
    with PPO(config={**TINY, "evaluation_config": {"explore": False}, "evaluation_duration": 1},
             results_dir=str(tmp_path)) as trainer:
        translations.clear()
        trainer.evaluate()
    assert translations == []
