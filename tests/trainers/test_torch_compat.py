"""torch outside its public API only in rltune/trainers/learning/_torch_compat.py, and only on the torch release it was written for."""

from __future__ import annotations

import re
from pathlib import Path

from private_names import private_uses

import rltune
from rltune.trainers.learning import _torch_compat

ADAPTER = "rltune/trainers/learning/_torch_compat.py"
# a private torch module or name, dunders aside (torch._dynamo, torch.fx.experimental, from torch import _x, from torch.x import _y)
PRIVATE = re.compile(
    r"\btorch(\.\w+)*\._[A-Za-z0-9]|\btorch\.fx\.experimental\b|from torch[\w.]* import \(?\s*_\w"
)


def test_no_private_torch_name_outside_the_adapter():
    hits = private_uses(PRIVATE, ADAPTER)
    assert not hits, "private torch names outside " + ADAPTER + ":\n" + "\n".join(hits)


def test_the_pattern_finds_what_the_adapter_uses():
    text = (Path(rltune.__file__).resolve().parent / "trainers" / "learning" / "_torch_compat.py").read_text()
    assert len(PRIVATE.findall(text)) >= 4
    assert PRIVATE.search("from torch._dynamo import lookup_backend") and PRIVATE.search("import torch._inductor")
    assert not PRIVATE.search("torch.compiler.list_backends()") and not PRIVATE.search("torch.func.grad_and_value")


def test_the_adapter_was_written_for_the_installed_torch():
    release = _torch_compat.torch_release()
    assert release == _torch_compat.TESTED_TORCH, (
        f"torch {release} is installed but {ADAPTER} was written and measured for torch {_torch_compat.TESTED_TORCH}: "
        "its private names may have changed (rltune uses public torch.compile meanwhile). Re-check the adapter "
        "(tests/trainers/test_sgd_step.py with it), re-measure it against the public path (benchmarks/README.md, "
        "'Compiled learner step'), then set TESTED_TORCH, or delete the adapter if the public path is as fast."
    )
    assert _torch_compat.private_trace_available()
