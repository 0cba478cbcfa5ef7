"""What a trainer asks of its rollout workers: one frozen dataclass per request, dispatched by its type.

The requests travel on the worker's :class:`rltune._ipc.Channel` (cloudpickled:
policy mapping functions, ``foreach_worker`` / ``foreach_env`` functions and
env task functions may be lambdas of the user's ``__main__``); the worker
answers each with :class:`rltune._ipc.Reply` or :class:`rltune._ipc.RemoteError`
and stops on :class:`rltune._ipc.Shutdown`. :func:`handle` runs a request on the
worker's :class:`RolloutWorker` by matching its type; a message of another type
is a :class:`WorkerError` naming it. Like the other messages of
:mod:`rltune._ipc`, both ends run the same rltune: add fields at the end, with
defaults. ``what`` names a request as the user knows it, for the message of a
worker that does not answer it in time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, ClassVar

from rltune.errors import WorkerError

if TYPE_CHECKING:  # the worker process imports RolloutWorker (and torch) only after setting its threads
    import gymnasium as gym

    from rltune.trainers.sampling._rollout_worker import RolloutWorker


@dataclass(frozen=True)
class WorkerRequest:
    """Base of the requests a rollout worker takes."""

    what: ClassVar[str] = "a request"


@dataclass(frozen=True)
class Sample(WorkerRequest):
    """Sample one round of fragments from every env (a :class:`SampleResult`)."""

    what: ClassVar[str] = "sample()"


@dataclass(frozen=True)
class SetWeights(WorkerRequest):
    """Load the trainer's weights by policy id, its global vars and (unless None) its master filter statistics."""

    what: ClassVar[str] = "the weights and filters sync"
    weights: dict[str, Any]
    global_vars: dict[str, Any] | None = None
    filters: dict[str, Any] | None = None


@dataclass(frozen=True)
class IsMultiAgent(WorkerRequest):
    """Whether the worker's env is a MultiAgentEnv."""

    what: ClassVar[str] = "is_multi_agent()"


@dataclass(frozen=True)
class NumEnvs(WorkerRequest):
    """How many envs the worker steps (a vector env's sub-envs count)."""

    what: ClassVar[str] = "num_envs()"


@dataclass(frozen=True)
class GetPolicySpaces(WorkerRequest):
    """The (observation, action) spaces of every policy, by policy id."""

    what: ClassVar[str] = "get_policy_spaces()"


@dataclass(frozen=True)
class SetPolicySet(WorkerRequest):
    """Match the trainer's policies, mapping and training set (``RolloutWorker.policy_set_state()``)."""

    what: ClassVar[str] = "set_policy_set()"
    state: dict[str, Any]


@dataclass(frozen=True)
class AddPolicy(WorkerRequest):
    """Build policy ``policy_id`` with these weights, and use this mapping and training set from now on."""

    what: ClassVar[str] = "add_policy()"
    policy_id: str
    spec: Any
    spaces: tuple[gym.Space, gym.Space]
    weights: Any = None
    mapping_fn: Any = None
    to_train: Any = None


@dataclass(frozen=True)
class RemovePolicy(WorkerRequest):
    """Drop policy ``policy_id``, and use this mapping and training set from now on (None: keep them)."""

    what: ClassVar[str] = "remove_policy()"
    policy_id: str
    mapping_fn: Any = None
    to_train: Any = None


@dataclass(frozen=True)
class SetPolicyMappingFn(WorkerRequest):
    """Map agents with ``mapping_fn`` from their next episode on."""

    what: ClassVar[str] = "set_policy_mapping_fn()"
    mapping_fn: Any


@dataclass(frozen=True)
class SetPoliciesToTrain(WorkerRequest):
    """Train these policies (a list of ids, or ``fn(policy_id, batch) -> bool``) from now on."""

    what: ClassVar[str] = "set_policies_to_train()"
    to_train: Any


@dataclass(frozen=True)
class Apply(WorkerRequest):
    """``fn(worker, *args, **kwargs)``: a function of the user run on the worker (``foreach_worker``)."""

    what: ClassVar[str] = "foreach_worker()"
    fn: Callable[..., Any]
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ForeachEnv(WorkerRequest):
    """``fn(env)`` for every env; the results and the envs' tasks afterwards."""

    what: ClassVar[str] = "foreach_env()"
    fn: Callable[[Any], Any]


@dataclass(frozen=True)
class ForeachEnvWithContext(WorkerRequest):
    """``fn(env, env_context)`` for every env; the results and the envs' tasks afterwards."""

    what: ClassVar[str] = "foreach_env_with_context()"
    fn: Callable[[Any, Any], Any]


@dataclass(frozen=True)
class SetTask(WorkerRequest):
    """Set ``task`` on every task-settable env (where it differs); every env's task afterwards."""

    what: ClassVar[str] = "set_task()"
    task: Any


@dataclass(frozen=True)
class SetEnvTasks(WorkerRequest):
    """Set the tasks of the envs named by vector index (where they differ); every env's task afterwards."""

    what: ClassVar[str] = "setting its envs' tasks"
    tasks: dict[int, Any]


@dataclass(frozen=True)
class ApplyEnvTaskFn(WorkerRequest):
    """``env_task_fn(result, env, env_context)`` per task-settable env; every env's task afterwards."""

    what: ClassVar[str] = "env_task_fn"
    env_task_fn: Callable[..., Any]
    result: dict[str, Any]


REQUESTS: tuple[type[WorkerRequest], ...] = (
    Sample, SetWeights, IsMultiAgent, NumEnvs, GetPolicySpaces, SetPolicySet, AddPolicy, RemovePolicy, SetPolicyMappingFn,
    SetPoliciesToTrain, Apply, ForeachEnv, ForeachEnvWithContext, SetTask, SetEnvTasks, ApplyEnvTaskFn,
)


def handle(worker: RolloutWorker, request: Any) -> Any:
    """Run ``request`` on ``worker``; what it returns is the reply. WorkerError for a message of another type."""
    match request:
        case Sample():
            return worker.sample()
        case SetWeights(weights, global_vars, filters):
            return worker.set_weights(weights, global_vars, filters)
        case IsMultiAgent():
            return worker.is_multi_agent()
        case NumEnvs():
            return worker.num_envs()
        case GetPolicySpaces():
            return worker.get_policy_spaces()
        case SetPolicySet(state):
            return worker.set_policy_set(state)
        case AddPolicy(policy_id, spec, spaces, weights, mapping_fn, to_train):
            return worker.add_policy(policy_id, spec, spaces, weights, mapping_fn, to_train)
        case RemovePolicy(policy_id, mapping_fn, to_train):
            return worker.remove_policy(policy_id, mapping_fn, to_train)
        case SetPolicyMappingFn(mapping_fn):
            return worker.set_policy_mapping_fn(mapping_fn)
        case SetPoliciesToTrain(to_train):
            return worker.set_policies_to_train(to_train)
        case Apply(fn, args, kwargs):
            return fn(worker, *args, **kwargs)
        case ForeachEnv(fn):
            return worker.foreach_env_tracked(fn)
        case ForeachEnvWithContext(fn):
            return worker.foreach_env_with_context_tracked(fn)
        case SetTask(task):
            return worker.set_task_all(task)
        case SetEnvTasks(tasks):
            return worker.set_env_tasks(tasks)
        case ApplyEnvTaskFn(env_task_fn, result):
            return worker.apply_env_task_fn(env_task_fn, result)
    kind = type(request)
    raise WorkerError(
        f"rollout worker {worker.worker_index} got a message it does not take: {kind.__module__}.{kind.__qualname__} "
        f"(it takes {', '.join(r.__name__ for r in REQUESTS)} and Shutdown)"
    )


__all__ = [
    "REQUESTS", "AddPolicy", "Apply", "ApplyEnvTaskFn", "ForeachEnv", "ForeachEnvWithContext", "GetPolicySpaces",
    "IsMultiAgent", "NumEnvs", "RemovePolicy", "Sample", "SetEnvTasks", "SetPoliciesToTrain", "SetPolicyMappingFn",
    "SetPolicySet", "SetTask", "SetWeights", "WorkerRequest", "handle",
]
