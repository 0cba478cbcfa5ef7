"""The one place rltune uses torch's private API: a faster trace of the compiled learner step.

``torch.compile`` (public) runs the learner step through dynamo's frame
evaluation on every call. Tracing the same functional step with ``make_fx``
on fake tensors and handing the aten graph to the backend directly gives a
callable with nothing in front of the compiled code; on the PPO benchmark's
step that is measurably faster (figures: ``benchmarks/README.md``, "Compiled
learner step"). These names are private and change between torch releases,
so this path is used only on the torch release it was written and tested for
(:data:`TESTED_TORCH`); on any other, :mod:`rltune.trainers.learning._sgd_step` takes
the public ``torch.compile`` path, and ``tests/trainers/test_torch_compat.py``
fails to say this adapter needs re-checking.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Optional

import torch

TESTED_TORCH = "2.13"  # major.minor this adapter was written and tested for


def torch_release() -> str:
    """The installed torch's ``major.minor``."""
    return ".".join(torch.__version__.split("+")[0].split(".")[:2])


def private_trace_available() -> bool:
    """Whether the installed torch is the release this adapter was written for."""
    return torch_release() == TESTED_TORCH


def trace_fake(fn: Callable[..., Any], args: list[torch.Tensor]) -> tuple[Any, list[torch.Tensor], Any]:
    """``fn`` traced into an aten graph on fake copies of ``args``: (graph, fake args, fake mode).

    The fake mode carries a shape environment so that inductor's on-disk
    caches serve later processes. Raises what tracing raises.
    """
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    fake_mode = FakeTensorMode(shape_env=ShapeEnv(), static_shapes=True)
    fake_args = [fake_mode.from_tensor(a, static_shapes=True) for a in args]
    with fake_mode:
        graph = make_fx(fn, tracing_mode="real")(*fake_args)
    return graph, fake_args, fake_mode


def compile_graph(graph: Any, fake_args: list[torch.Tensor], fake_mode: Any, backend: str, options: Optional[dict[str, Any]], mode: Optional[str]) -> Callable[..., Any]:
    """The ``torch.compile`` backend ``backend``'s compiled callable of a traced ``graph``.

    Inductor compiles under ``mode``'s settings, or ``options`` when no mode is given.
    """
    from torch._dynamo import lookup_backend
    from torch._guards import TracingContext, tracing

    settings: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()
    if backend == "inductor":
        import torch._inductor

        patch = torch._inductor.list_mode_options(mode) if mode is not None else dict(options or {})
        settings = torch._inductor.config.patch(patch)
    with tracing(TracingContext(fake_mode)), settings:
        return lookup_backend(backend)(graph, fake_args)
