"""The URL of the tests' PostgreSQL server (``scripts/postgres.sh``): skip without one, fail under CI."""

from __future__ import annotations

import os

import pytest


def postgres_url() -> str:
    """``$RLTUNE_TEST_POSTGRES_URL``; skips the test when it is not set (fails it under CI, which starts the server)."""
    url = os.environ.get("RLTUNE_TEST_POSTGRES_URL")
    if not url:
        if os.environ.get("CI"):
            pytest.fail("RLTUNE_TEST_POSTGRES_URL is not set under CI: .ci/run starts PostgreSQL (scripts/postgres.sh)")
        pytest.skip("no PostgreSQL server: run `bash scripts/postgres.sh` and set RLTUNE_TEST_POSTGRES_URL to its URL")
    return url
