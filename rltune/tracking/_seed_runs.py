"""The seeds of a ``seeds_per_trial`` trial as MLflow runs nested under the trial's run.

Each seed's run (tags ``rltune.role = seed``, ``rltune.trial``, ``rltune.seed_index``; params ``seed``,
``seed_index``) holds the seed's own results as metrics at ``step = training_iteration``. Logging them again
(a resumed trial) reopens the run and adds only the steps it lacks (the tag ``rltune.seed_steps``: the last
step logged), so a seed's history is never doubled.
"""

from __future__ import annotations

import time
from typing import Any, Mapping, Sequence

from rltune.tracking._keys import flatten_metrics
from rltune.tracking._store import TAG_PARENT, TAG_ROLE, TAG_STUDY, TAG_TRIAL

TAG_SEED_INDEX = "rltune.seed_index"
TAG_SEED_STEPS = "rltune.seed_steps"
STATUS = {"COMPLETE": "FINISHED", "PRUNED": "KILLED", "FAIL": "FAILED", "INTERRUPTED": "KILLED"}
BATCH = 1000  # MLflow's limit of metrics per log_batch call


def log_seed_runs(client: Any, experiment_id: str, study_name: str, trial_run_id: str, number: int,
                  runs: Sequence[Mapping[str, Any]], state: str) -> list[str]:
    """Create or extend the nested run of each seed in ``runs`` (index, seed, results); their run ids."""
    from mlflow.entities import Metric, Param

    existing = {r.data.tags.get(TAG_SEED_INDEX): r for r in client.search_runs(
        [experiment_id], filter_string=f"tags.`{TAG_PARENT}` = '{trial_run_id}' and tags.`{TAG_ROLE}` = 'seed'")}
    ids = []
    for seed in runs:
        index = str(seed["index"])
        found = existing.get(index)
        if found is None:
            run_id = client.create_run(experiment_id, run_name=f"trial {number} seed {index}", tags={
                TAG_ROLE: "seed", TAG_STUDY: study_name, TAG_TRIAL: str(number), TAG_SEED_INDEX: index,
                TAG_PARENT: trial_run_id}).info.run_id
            client.log_batch(run_id, params=[Param("seed", str(seed["seed"])), Param("seed_index", index)])
            done = 0
        else:
            run_id = found.info.run_id
            done = int(found.data.tags.get(TAG_SEED_STEPS) or 0)
        now = int(time.time() * 1000)
        metrics, last = [], done
        for result in seed["results"]:
            step = result.get("training_iteration")
            if not isinstance(step, int) or step <= done:
                continue
            last = max(last, step)
            metrics.extend(Metric(k, v, int(result.get("timestamp", now / 1000) * 1000), step)
                           for k, v in flatten_metrics(result).items())
        for start in range(0, len(metrics), BATCH):
            client.log_batch(run_id, metrics=metrics[start:start + BATCH])
        client.set_tag(run_id, TAG_SEED_STEPS, str(last))
        client.set_terminated(run_id, status=STATUS.get(state, "FINISHED"))
        ids.append(run_id)
    return ids
