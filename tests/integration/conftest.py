"""Shared integration fixtures: the example kernel repositories, a cached torch venv, a moto S3 server."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from servers import moto_server, s3_env
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


# A moto S3 server per test module, and a client with its environment (AWS_ENDPOINT_URL, dummy credentials).
@pytest.fixture(scope="module")
def endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with moto_server(tmp_path_factory.mktemp("moto")) as url:
        yield url


@pytest.fixture
def s3(endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    for key, value in s3_env(endpoint).items():
        monkeypatch.setenv(key, value)
    return boto3.client("s3")
