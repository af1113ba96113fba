"""An s3:// store's index reads O(changed) objects: the catalog object in the bucket, not one GET per record.

Requests are counted in the moto server's own request log.
"""

from __future__ import annotations

import hashlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import boto3
import pytest
from index_synth import index_pages
from kernel_factory.cli import main
from kernel_factory.record import Record
from kernel_factory.store.catalog import CATALOG_FILE
from kernel_factory.variants import parse
from servers import moto_server, s3_env

pytestmark = pytest.mark.integration
N = 150  # records in the bucket: what the index reads must not grow with it
LABELS = ("torch27-cxx11-cu128-x86_64-linux", "torch213-cxx11-cpu-x86_64-linux", "torch-cuda")
REQUEST = re.compile(r'"(GET|PUT|HEAD|POST|DELETE) (\S+) HTTP')


@pytest.fixture(scope="module")
def moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    tmp = tmp_path_factory.mktemp("moto")
    with moto_server(tmp) as url:
        yield url, tmp / "moto.log"


def record(project: int, version: int, variant: str) -> Record:
    t = parse(variant)
    full = t.local_version(f"1.{version}.0")
    return Record(
        filename=f"k{project:03d}-{full}-{t.tag}.whl", name=f"k{project:03d}", version=full, sha256="a" * 64, size=0,
        metadata_sha256="b" * 64, requires_python=None, upload_time="2026-01-02T03:04:05Z", kind="kernel",
        kernel_version=f"1.{version}.0", label=t.label, variant=variant, backend=t.backend,
        backend_version=t.backend_version, framework=t.framework, framework_version=t.framework_version,
        os=t.os, arch=t.arch,
    )  # fmt: skip


def put(s3: Any, r: Record, bucket: str = "kernels") -> None:
    s3.put_object(Bucket=bucket, Key=f"public/files/{r.filename}", Body=b"")
    s3.put_object(Bucket=bucket, Key=f"public/files/{r.filename}.metadata", Body=b"")  # the pages link it
    data = r.to_json()
    s3.put_object(Bucket=bucket, Key=f"public/files/{r.filename}.json", Body=data,
                  Metadata={"sha256": hashlib.sha256(data).hexdigest()})  # fmt: skip


def requests(log: Path, since: int) -> list[tuple[str, str]]:
    """(method, path) of every request the server logged after byte ``since``."""
    return REQUEST.findall(log.read_bytes()[since:].decode(errors="replace"))


def test_index_reads_changed_records_only(
    moto: tuple[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, log = moto
    for key, value in s3_env(url).items():
        monkeypatch.setenv(key, value)
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket="kernels")
    records = [record(p, v, lab) for p in range(N // 30) for v in range(10) for lab in LABELS]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda r: put(s3, r), records))
    out = tmp_path / "out"
    index = ["index", "--store", "s3://kernels/public", "--out", str(out)]

    def run() -> list[tuple[str, str]]:
        since = log.stat().st_size
        assert main(index) == 0
        return requests(log, since)

    def record_gets(seen: list[tuple[str, str]]) -> int:
        return sum(1 for method, path in seen if method == "GET" and path.split("?")[0].endswith(".whl.json"))

    first = run()
    assert record_gets(first) == N  # a cold catalog: every record once
    assert ("PUT", f"/kernels/public/files/{CATALOG_FILE}") in first
    again = run()  # nothing changed: the listing and the catalog object
    assert record_gets(again) == 0
    assert len(again) <= 2 + N // 1000 and not any(m == "PUT" for m, _ in again)
    # one record added, one yanked: two records read, whatever N is
    put(s3, record(999, 0, LABELS[0]))
    put(s3, replace(records[7], yanked="broken"))
    changed = run()
    assert record_gets(changed) == 2
    assert sum(1 for m, _ in changed if m == "PUT") == 1  # the catalog, once
    # the pages equal a full rebuild from the records alone (no catalog, a fresh index root)
    s3.delete_object(Bucket="kernels", Key=f"public/files/{CATALOG_FILE}")
    fresh = tmp_path / "fresh"
    assert main(["index", "--store", "s3://kernels/public", "--out", str(fresh)]) == 0
    assert index_pages(out) == index_pages(fresh)
    assert b"broken" in (out / f"simple/{records[7].name}/index.html").read_bytes()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "kill-9"])
def test_killed_while_the_catalog_copy_is_open_then_a_plain_run_sweeps_it_and_renders_the_same_pages(
    moto: tuple[str, Path], tmp_path: Path, sig: int
) -> None:
    """The main process alone killed (docker stop; the OOM killer) once its copy of the bucket's catalog is open:
    SIGTERM leaves nothing in TMPDIR; kill -9 leaves that scratch folder, which the next run removes. The rerun
    exits 0 with the pages of an index of the records alone."""
    url, _ = moto
    bucket = f"killed-{'term' if sig == signal.SIGTERM else 'nine'}"
    s3 = boto3.client("s3", endpoint_url=url, region_name="us-east-1", aws_access_key_id="testing",
                      aws_secret_access_key="testing")
    s3.create_bucket(Bucket=bucket)
    records = [record(p, v, lab) for p in range(N // 30) for v in range(10) for lab in LABELS]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda r: put(s3, r, bucket), records))
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, **s3_env(url), "TMPDIR": str(tmp), "KERNEL_FACTORY_LOCK_WAIT": "0"}
    store = f"s3://{bucket}/public"

    def index(out: Path) -> subprocess.Popen[str]:
        return subprocess.Popen([sys.executable, "-m", "kernel_factory", "index", "--store", store, "--out", str(out)],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    fresh = index(tmp_path / "fresh")
    _, err = fresh.communicate(timeout=300)
    assert fresh.returncode == 0, err
    s3.delete_object(Bucket=bucket, Key=f"public/files/{CATALOG_FILE}")  # a cold catalog again: every record read
    proc = index(tmp_path / "out")
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        if any(name.startswith("kernel-factory-catalog-") for name in os.listdir(tmp)):
            os.kill(proc.pid, sig)
            break
        time.sleep(0.001)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == (143 if sig == signal.SIGTERM else -signal.SIGKILL), err
    left = [name.rstrip("0123456789abcdefghijklmnopqrstuvwxyz_") for name in os.listdir(tmp)]  # less the random part
    assert left == ([] if sig == signal.SIGTERM else ["kernel-factory-catalog-"])
    rerun = index(tmp_path / "out")
    _, err = rerun.communicate(timeout=300)
    assert rerun.returncode == 0, err
    assert os.listdir(tmp) == []
    assert index_pages(tmp_path / "out") == index_pages(tmp_path / "fresh")
