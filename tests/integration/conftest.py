"""Shared integration fixtures: the example kernel repositories and a cached torch venv."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from support import (  # noqa: F401  (re-exported for tests that import them from here)
    ROOT,
    TORCH_REQ,
    cached_venv,
    clean_env,
    free_port,
    fresh_venv,
    http_server,
    kf,
    run,
    wait_http,
)


@pytest.fixture(scope="session")
def example_repos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled example kernels as git repositories (scripts/build_fixtures.py --from-prebuilt)."""
    out = tmp_path_factory.mktemp("repos")
    run(sys.executable, ROOT / "scripts" / "build_fixtures.py", "--from-prebuilt", "--out", out)
    return out


@pytest.fixture(scope="session")
def torch_python() -> Path:
    """Python of a cached venv holding torch 2.13 CPU and recent pip (read-only for tests)."""
    return cached_venv("torch213", TORCH_REQ, "setuptools>=77")
