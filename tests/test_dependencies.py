"""pyproject.toml's version bounds cover what the tests run on: upgrading a library past a bound fails here first."""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"
# Libraries whose private names rltune uses (each in one adapter): bound below the next minor release.
PINNED_TO_MINOR = {"torch", "optuna", "mlflow", "tensorboardX"}


def _requirements() -> list[Requirement]:
    with open(PYPROJECT, "rb") as f:
        return [Requirement(r) for r in tomllib.load(f)["project"]["dependencies"]]


@pytest.mark.parametrize("requirement", _requirements(), ids=lambda r: r.name)
def test_every_dependency_has_an_upper_bound_that_the_installed_version_meets(requirement):
    assert any(spec.operator in ("<", "<=", "~=", "==") for spec in requirement.specifier), (
        f"{requirement}: no upper bound (bound it to what the tests ran on)"
    )
    installed = metadata.version(requirement.name)
    assert requirement.specifier.contains(installed, prereleases=True), (
        f"{requirement.name} {installed} is installed but pyproject.toml says {requirement}: "
        "run the tests on it and move the bound"
    )


def test_libraries_with_private_api_adapters_are_bound_to_the_tested_minor():
    for requirement in _requirements():
        if requirement.name not in PINNED_TO_MINOR:
            continue
        upper = [s.version for s in requirement.specifier if s.operator == "<"]
        installed = re.match(r"\d+\.\d+", metadata.version(requirement.name)).group()
        major, minor = map(int, installed.split("."))
        assert upper == [f"{major}.{minor + 1}"], f"{requirement}: bound it below {major}.{minor + 1} (tested {installed})"
