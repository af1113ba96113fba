"""A busy service: the Hub (olah) answering 429/503 with Retry-After, S3 (moto) answering SlowDown, an upload
endpoint (pypiserver) answering 503. Retried with backoff within a bounded time, then exit 4 with one line."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from busy_proxy import SLOW_DOWN, BusyProxy, busy_proxy
from hub_server import Proxy, hf_env, hub, make_kernel_repo, serve_repo
from servers import PASSWORD, USER, make_root, moto_server, pypi_server, s3_env
from support import clean_env, kf

pytestmark = pytest.mark.integration
WHEELS = [("relu", "1.0.0"), ("gelu", "2.0.0")]


def errors(stderr: str) -> list[str]:
    assert "Traceback" not in stderr, stderr
    return [line for line in stderr.splitlines() if line.startswith("error:")]


# -- the Hub --------------------------------------------------------------------
@pytest.fixture(scope="module")
def busy_hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proxy]:
    root = tmp_path_factory.mktemp("hub")
    repo = make_kernel_repo(root / "src" / "relu", variants=("torch-universal", "torch-cpu"))
    serve_repo(repo.path, root / "mirrors", "kernels-community/relu")
    with hub(root / "mirrors", root / "olah") as (_, proxy):
        yield proxy


def test_hub_429_with_retry_after_is_retried_then_builds(busy_hub: Proxy, tmp_path: Path) -> None:
    env = clean_env(**hf_env(busy_hub.url, tmp_path / "hf"))
    busy_hub.busy(3, status=429, retry_after=1)
    proc = kf("to-wheel", "kernels-community/relu", "1.0.0", "-o", tmp_path / "out", "--jobs", "1", env=env)
    assert proc.returncode == 0, proc.stderr
    assert busy_hub.busy_answers >= 3 and "HTTP 429; retrying in 1.0 s" in proc.stderr
    assert len(list((tmp_path / "out").glob("*.whl"))) == 2


def test_hub_503_for_longer_than_the_budget_is_exit_4_one_line(busy_hub: Proxy, tmp_path: Path) -> None:
    env = clean_env(**hf_env(busy_hub.url, tmp_path / "hf"), KERNEL_FACTORY_RETRY_S="3")
    busy_hub.busy(10_000, status=503, retry_after=1)
    try:
        proc = kf("to-wheel", "kernels-community/relu", "1.0.0", "-o", tmp_path / "out", env=env)
    finally:
        busy_hub.busy(0)
    assert proc.returncode == 4, proc.stderr
    [line] = errors(proc.stderr)
    assert "kernels-community/relu" in line and "HTTP 503" in line and "gave up after" in line, line
    assert not list((tmp_path / "out").glob("*"))  # nothing half-written


# -- S3 ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def s3_proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BusyProxy]:
    with moto_server(tmp_path_factory.mktemp("moto")) as endpoint, busy_proxy(endpoint) as proxy:
        boto3.client("s3", **_client_args(endpoint)).create_bucket(Bucket="kernels")
        yield proxy


def _client_args(endpoint: str) -> dict[str, str]:
    env = s3_env(endpoint)
    return {"endpoint_url": endpoint, "aws_access_key_id": env["AWS_ACCESS_KEY_ID"],
            "aws_secret_access_key": env["AWS_SECRET_ACCESS_KEY"], "region_name": env["AWS_DEFAULT_REGION"]}


def test_s3_slow_down_is_retried_by_botocore_then_gives_up_with_one_line(s3_proxy: BusyProxy, tmp_path: Path) -> None:
    root = make_root(tmp_path, WHEELS)
    env = clean_env(**s3_env(s3_proxy.url))
    s3_proxy.busy(2, status=503, methods=("PUT",), body=SLOW_DOWN)
    proc = kf("publish", "--store", root.path, "--to", "s3://kernels/a", env=env)
    assert proc.returncode == 0, proc.stderr
    assert len(s3_proxy.answered) == 2 and "uploaded" in proc.stdout

    s3_proxy.busy(10_000, status=503, methods=("PUT",), body=SLOW_DOWN)
    try:
        proc = kf("publish", "--store", root.path, "--to", "s3://kernels/b", env={**env, "AWS_MAX_ATTEMPTS": "3"})
    finally:
        s3_proxy.busy(0)
    assert proc.returncode == 4, proc.stderr
    [line] = errors(proc.stderr)
    assert "SlowDown" in line and "after 3 attempts" in line and "s3://kernels" in line, line

    proc = kf("publish", "--store", root.path, "--to", "s3://kernels/b", env=env)  # the rerun completes
    assert proc.returncode == 0, proc.stderr


# -- an upload endpoint -----------------------------------------------------------
@pytest.fixture(scope="module")
def upload_proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BusyProxy]:
    with pypi_server(tmp_path_factory.mktemp("pypi")) as url, busy_proxy(url) as proxy:
        yield proxy


def test_upload_endpoint_5xx_is_retried_then_gives_up_with_one_line(upload_proxy: BusyProxy, tmp_path: Path) -> None:
    root = make_root(tmp_path, WHEELS)
    env = clean_env(TWINE_USERNAME=USER, TWINE_PASSWORD=PASSWORD, KERNEL_FACTORY_RETRY_S="4",
                    PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring")
    upload_proxy.busy(10_000, status=503, methods=("POST",))
    try:
        proc = kf("publish", "--store", root.path, "--to", upload_proxy.url + "/", env=env)
    finally:
        upload_proxy.busy(0)
    assert proc.returncode == 4, proc.stderr
    [line] = errors(proc.stderr)
    assert "HTTP 503" in line and "tries in" in line and upload_proxy.url in line, line
    assert len(upload_proxy.answered) >= 3

    upload_proxy.answered.clear()
    upload_proxy.busy(2, status=503, methods=("POST", "GET"))  # the simple pages (urllib3's Retry) and the upload
    proc = kf("publish", "--store", root.path, "--to", upload_proxy.url + "/", env=env)
    assert proc.returncode == 0, proc.stderr
    assert "uploaded 2 files" in proc.stdout and len(upload_proxy.answered) == 2
