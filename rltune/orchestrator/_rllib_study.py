"""RLlib's and Tune's names in a study: Tune's experiment fields, a trainer's config translated for the trials.

The translation itself is :mod:`rltune.trainers.rllib._rllib_names`; here the
study planner (:func:`rltune.orchestrator._spec.make_plan`) applies it.
"""

from __future__ import annotations

import logging
from typing import Any

from rltune.orchestrator._search_space import SearchSpace, parse_space

logger = logging.getLogger(__name__)


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


def function(fn: Any) -> Any:
    """Old Tune's ``tune.function(fn)``: marked a function in a config as a value, not a sampler; here it is ``fn``.

    rltune never calls a function in a config to sample it (``tune.sample_from`` does that), so the mark is not needed.
    """
    if not callable(fn):
        from rltune.errors import ConfigError

        raise ConfigError(f"must be a function, but got {fn!r:.60}", where="tune.function()")
    return fn


def check_learning_achieved(tune_results: Any, min_value: float, evaluation: bool = False,
                            metric: str = "episode_reward_mean") -> None:
    """RLlib's test helper: StudyFailedError unless some trial's last ``metric`` reached ``min_value``.

    ``tune_results``: ``tune.run``'s analysis, a Tuner's result grid (each
    result's ``metrics``) or a list of result dicts; ``evaluation`` reads the
    metric in each result's ``evaluation`` block. ``metric`` may be nested
    (``"evaluation/episode_reward_mean"``).
    """
    from rltune.callbacks._curriculum import lookup_metric
    from rltune.errors import StudyFailedError

    trials = getattr(tune_results, "trials", None)
    rows = [t.last_result for t in trials] if trials is not None else [getattr(r, "metrics", r) for r in tune_results]
    values = [v for v in (lookup_metric(row or {}, ("evaluation/" if evaluation else "") + metric) for row in rows)
              if isinstance(v, (int, float))]
    best = max(values, default=None)
    if best is None or best < min_value:
        raise StudyFailedError(f"`{metric}` of {min_value} not reached (best: {best}, over {len(rows)} trial(s))",
                               analysis=tune_results)
    logger.info("`%s` of %s reached (best: %s)", metric, min_value, best)

