"""One JSON form and one default results directory, shared by trainers and the orchestrator."""

from pathlib import Path

import numpy as np

import rltune
from rltune._json import json_safe
from rltune._results_dir import DEFAULT_RESULTS_DIR, default_results_dir
from rltune.orchestrator import _reporter
from rltune.trainers.checkpoints import _checkpoint


def test_one_json_safe():
    assert _reporter.json_safe is json_safe
    value = {"a": np.float32(1.5), "b": np.arange(3), "c": (Path, 2), "d": object()}
    safe = json_safe(value)
    assert safe["a"] == 1.5 and safe["b"] == [0, 1, 2] and safe["c"] == ["pathlib:Path", 2]
    assert safe["d"].startswith("<object object")
    marked = _checkpoint.json_safe(value)  # a checkpoint marks what has no JSON form, to be given on restore
    assert {k: v for k, v in marked.items() if k != "d"} == {k: v for k, v in safe.items() if k != "d"}
    assert marked["d"] == {"__unserializable__": repr(value["d"])}


def test_one_default_results_dir(monkeypatch):
    root = Path(rltune.__file__).parent
    holders = [p.relative_to(root).as_posix() for p in root.rglob("*.py") if f'= "{DEFAULT_RESULTS_DIR}"' in p.read_text()]
    assert holders == ["_results_dir.py"]
    monkeypatch.setenv("RLTUNE_RESULTS_DIR", "")  # empty: the default, for `rltune train` as for studies
    assert default_results_dir() == Path(DEFAULT_RESULTS_DIR).expanduser()
    monkeypatch.setenv("RLTUNE_RESULTS_DIR", "/tmp/x")
    assert default_results_dir() == Path("/tmp/x")
