"""RLlib's and Tune's names in a study: Tune's experiment fields, a trainer's config translated for the trials.

The translation itself is :mod:`rltune.trainers.rllib._rllib_names`; here the
study planner (:func:`rltune.orchestrator._spec.make_plan`) applies it.
"""

from __future__ import annotations

from typing import Any

from rltune.orchestrator._search_space import SearchSpace, parse_space


def tune_field_names(fields: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The fields with Tune's ``local_dir`` / ``storage_path`` as ``results_dir``, a ``tune.with_resources``
    trainable as ``run`` and ``resources_per_trial``; and the problems found."""
    from rltune.orchestrator._trainable_wrappers import unwrap_resources
    from rltune.trainers.rllib._rllib_names import translate_fields

    fields, problems = unwrap_resources(fields)
    fields, more = translate_fields(fields)
    return fields, problems + more


def in_rltune_names(trainable: Any, config: dict[str, Any], space: SearchSpace,
                    space_invalid: bool) -> tuple[SearchSpace, SearchSpace, dict[str, Any]]:
    """``(space as written, the plan's space, the plan's config)``: a trainer's config in rltune's names.

    The trials run the config with RLlib's other names translated
    (``num_env_runners`` is ``num_workers``, ...; search-space entries kept);
    problems are found on the config as written, which validation translates
    the same way and names as the user wrote it. ``trainable``: the study's
    :class:`~rltune.orchestrator._spec.Trainable` (None when it did not resolve).
    """
    if trainable is None or trainable.kind != "trainer":
        return space, space, config
    from rltune.trainers import get_trainer_class
    from rltune.trainers.rllib._rllib_names import translate_config

    translated = translate_config(config, get_trainer_class(trainable.ref).config_class).config
    return space, (space if space_invalid else parse_space(translated)[0]), translated
