"""An s3:// store keeps its settings and says what went wrong (issue 49): every command that puts to it (index,
yank, unyank, status, prune) puts with the configured ``s3-put-args`` and Cache-Control; a put the bucket refuses
is exit 4, one line; a wheel that cannot be read is exit 4, never "its sha256 differs".

moto behind the tests' busy proxy (busy_proxy.py), which answers chosen requests with an error of our choosing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import boto3
import pytest
from busy_proxy import BusyProxy, busy_proxy
from kernel_factory.record import Record
from kernel_factory.variants import parse
from servers import moto_server, s3_env
from support import clean_env, kf

pytestmark = pytest.mark.integration
LABEL = "torch213-cxx11-cpu-x86_64-linux"
ACCESS_DENIED = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code>'
                 b"<Message>Access Denied</Message></Error>")


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BusyProxy]:
    with moto_server(tmp_path_factory.mktemp("moto")) as endpoint, busy_proxy(endpoint) as p:
        client(endpoint).create_bucket(Bucket="kernels")
        yield p


def client(endpoint: str) -> Any:
    env = s3_env(endpoint)
    return boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
                        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"], region_name=env["AWS_DEFAULT_REGION"])


def record(version: str, body: bytes) -> Record:
    t = parse(LABEL)
    full = t.local_version(version)
    return Record(
        filename=f"k-{full}-{t.tag}.whl", name="k", version=full, sha256=hashlib.sha256(body).hexdigest(),
        size=len(body), metadata_sha256="b" * 64, requires_python=None, upload_time="2026-01-02T03:04:05Z",
        kind="kernel", kernel_version=version, label=t.label, variant=LABEL, backend=t.backend,
        backend_version=t.backend_version, framework=t.framework, framework_version=t.framework_version,
        os=t.os, arch=t.arch,
    )  # fmt: skip


def put_store(s3: Any, prefix: str, versions: tuple[str, ...]) -> list[Record]:
    """A store of one wheel per version, written as kernel-factory writes one (each object with its sha256)."""
    records = []
    for version in versions:
        body = f"wheel {version}".encode()
        r = record(version, body)
        for name, data in ((r.filename, body), (f"{r.filename}.metadata", b"m"), (f"{r.filename}.json", r.to_json())):
            s3.put_object(Bucket="kernels", Key=f"{prefix}/files/{name}", Body=data,
                          Metadata={"sha256": hashlib.sha256(data).hexdigest()})  # fmt: skip
        records.append(r)
    return records


def head(s3: Any, key: str) -> tuple[str | None, str | None]:
    """(StorageClass, CacheControl) of an object."""
    got = s3.head_object(Bucket="kernels", Key=key)
    return got.get("StorageClass"), got.get("CacheControl")


def errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


def test_every_command_puts_with_the_configured_put_args_and_cache_control(proxy: BusyProxy, tmp_path: Path) -> None:
    s3 = client(proxy.url)
    old, _new = put_store(s3, "a", ("1.0.0", "1.1.0"))
    cfg = tmp_path / "factory.toml"
    cfg.write_text('[factory]\nstore = "s3://kernels/a"\ncache-control-pages = "max-age=7"\n'
                   's3-put-args = { StorageClass = "STANDARD_IA" }\n')
    env = clean_env(**s3_env(proxy.url))
    common = ["--config", str(cfg), "--out", str(tmp_path / "out")]
    want = ("STANDARD_IA", "max-age=7")

    proc = kf("index", *common, env=env)
    assert proc.returncode == 0, proc.stderr
    assert head(s3, "a/files/.catalog.sqlite") == want  # the catalog put back
    proc = kf("yank", f"k=={old.version}", "--reason", "bad", *common, env=env)
    assert proc.returncode == 0, proc.stderr
    assert head(s3, f"a/files/{old.filename}.json") == want
    proc = kf("unyank", f"k=={old.version}", *common, env=env)
    assert proc.returncode == 0, proc.stderr
    proc = kf("status", "k", "deprecated", *common, env=env)
    assert proc.returncode == 0, proc.stderr
    assert head(s3, "a/files/project-status.json") == want
    proc = kf("prune", "--keep-per-major", "1", *common, env=env)
    assert proc.returncode == 0, proc.stderr
    assert head(s3, "a/files/.prune-pending.json") == want  # on S3 the wheels go at the next prune
    assert head(s3, f"a/files/{old.filename}.json") == want  # unyank's put


def test_a_refused_catalog_put_is_exit_4_in_one_line(proxy: BusyProxy, tmp_path: Path) -> None:
    put_store(client(proxy.url), "b", ("1.0.0",))
    env = clean_env(**s3_env(proxy.url))
    proxy.busy(10_000, status=403, methods=("PUT",), body=ACCESS_DENIED, retry_after=None,
               path_end="/files/.catalog.sqlite")  # a bucket policy that refuses the put
    try:
        proc = kf("index", "--store", "s3://kernels/b", "--out", tmp_path / "out", env=env)
    finally:
        proxy.busy(0)
    assert proc.returncode == 4, proc.stderr
    [line] = errors(proc.stderr)
    assert "s3://kernels/b/files/.catalog.sqlite cannot be written" in line and "AccessDenied" in line, line


def test_a_wheel_that_cannot_be_read_is_unreachable_not_changed(proxy: BusyProxy, tmp_path: Path) -> None:
    s3 = client(proxy.url)
    [r] = put_store(s3, "c", ("1.0.0",))
    env = clean_env(**s3_env(proxy.url), AWS_MAX_ATTEMPTS="2")
    index = ["index", "--store", "s3://kernels/c", "--out", str(tmp_path / "out")]
    assert kf(*index, env=env).returncode == 0
    key = f"c/files/{r.filename}"  # the same bytes again, in one part: a new ETag, so the next run hashes it
    upload = s3.create_multipart_upload(Bucket="kernels", Key=key, Metadata={"sha256": r.sha256})
    part = s3.upload_part(Bucket="kernels", Key=key, UploadId=upload["UploadId"], PartNumber=1,
                          Body=f"wheel {r.kernel_version}".encode())
    s3.complete_multipart_upload(Bucket="kernels", Key=key, UploadId=upload["UploadId"],
                                 MultipartUpload={"Parts": [{"ETag": part["ETag"], "PartNumber": 1}]})
    path = f"/kernels/c/files/{quote(r.filename, safe='~')}"  # as botocore quotes it ('+': %2B)
    proxy.busy(10_000, status=503, methods=("GET",), path_end=path, retry_after=None)
    try:
        proc = kf(*index, env=env)
    finally:
        proxy.busy(0)
    assert proc.returncode == 4, proc.stderr
    [line] = errors(proc.stderr)
    assert "busy or failing" in line and "after 2 attempts" in line and "sha256" not in line, line
    proxy.busy(1, status=503, methods=("GET",), path_end=path, retry_after=None)
    try:  # one failed GET: retried, and the wheel is the one its record describes
        proc = kf(*index, env=env)
    finally:
        proxy.busy(0)
    assert proc.returncode == 0, proc.stderr
    assert proxy.answered.count(f"GET {path}") == 2 + 1, proxy.answered  # two attempts, then one retried
