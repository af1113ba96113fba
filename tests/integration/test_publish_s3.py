"""Publish to S3 (a real moto server on 127.0.0.1) and the S3 store."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from kernel_factory.cli import main
from kernel_factory.publish.run import list_root
from kernel_factory.record import PEP691_JSON as PEP691
from kernel_factory.s3util import SHA_KEY
from kernel_factory.store import load_records
from kernel_factory.store.s3 import S3Store
from servers import Root, add_wheel, make_root, moto_server, page_links, s3_env, write_pages

pytestmark = pytest.mark.integration
WHEELS = [("img2grey", "1.1.2+torch213cpucxx11"), ("img2grey", "1.1.2+torch27cu128cxx11"), ("relu", "1.0.0")]
PUBLIC_READ = ('{"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": "*", '
               '"Action": "s3:GetObject", "Resource": "arn:aws:s3:::%s/*"}]}')
REPO = Path(__file__).resolve().parents[2]




def bucket_objects(s3: Any, bucket: str, prefix: str) -> dict[str, dict[str, Any]]:
    """key (relative to prefix) -> head_object answer."""
    out = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/"):
        for obj in page.get("Contents", []):
            out[obj["Key"].removeprefix(prefix + "/")] = s3.head_object(Bucket=bucket, Key=obj["Key"])
    return out


def bucket_keys(s3: Any, bucket: str, prefix: str) -> set[str]:
    """Keys relative to prefix."""
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/")
    return {obj["Key"].removeprefix(prefix + "/") for page in pages for obj in page.get("Contents", [])}


def assert_links_resolve(s3: Any, bucket: str, prefix: str) -> None:
    """Every link of every page in the bucket names an object in the bucket."""
    keys = bucket_keys(s3, bucket, prefix)
    for key in keys:
        if key.endswith(".html"):
            text = s3.get_object(Bucket=bucket, Key=f"{prefix}/{key}")["Body"].read().decode()
            missing = [link for link in page_links(key, text) if link not in keys]
            assert not missing, f"{key} links missing objects {missing}"


def publish(*args: str) -> int:
    return main(["publish", *args])


def test_publish_mirrors_root_with_content_types_and_is_idempotent(
    s3: Any, endpoint: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root: Root = make_root(tmp_path, WHEELS)
    s3.create_bucket(Bucket="site")
    s3.put_bucket_policy(Bucket="site", Policy=PUBLIC_READ % "site")

    assert publish("--store", str(root.path), "--to", "s3://site/idx", "--dry-run") == 0
    assert "would upload" in capsys.readouterr().out
    assert bucket_objects(s3, "site", "idx") == {}  # a dry run uploads nothing

    assert publish("--store", str(root.path), "--to", "s3://site/idx/") == 0
    local = {f.rel: f for f in list_root(root.path)}
    assert f"uploaded {len(local)} files" in capsys.readouterr().out
    remote = bucket_objects(s3, "site", "idx")
    assert set(remote) == set(local)
    for rel, head in remote.items():
        assert head["Metadata"][SHA_KEY] == local[rel].sha256()
        assert head["ContentLength"] == local[rel].size
    types = {rel: head["ContentType"] for rel, head in remote.items()}
    wheel = "files/img2grey-1.1.2+torch213cpucxx11-py3-none-any.whl"
    assert types[wheel] == "application/octet-stream"
    assert types[wheel + ".metadata"].startswith("text/plain")
    assert types[wheel + ".json"] == "application/json"
    assert types["simple/img2grey/index.html"].startswith("text/html")
    assert types["simple/img2grey/index.json"] == PEP691
    assert types["index.html"].startswith("text/html")
    # the pages link %2B; S3 decodes it to the raw '+' of the key
    url = f"{endpoint}/site/idx/files/img2grey-1.1.2%2Btorch213cpucxx11-py3-none-any.whl"
    with urllib.request.urlopen(url) as resp:
        assert resp.read() == local[wheel].path.read_bytes()
    assert_links_resolve(s3, "site", "idx")

    assert publish("--store", str(root.path), "--to", "s3://site/idx") == 0
    assert f"uploaded 0 files (0.0 MB), skipped {len(local)} unchanged" in capsys.readouterr().out

    # a changed page is replaced, nothing else moves; nothing is deleted at the destination
    (root.path / "index.html").write_text("<html><body>changed</body></html>\n")
    s3.put_object(Bucket="site", Key="idx/extra.txt", Body=b"kept")
    assert publish("--store", str(root.path), "--to", "s3://site/idx") == 0
    out = capsys.readouterr().out
    assert "replaced index.html" in out and "uploaded 1 files" in out
    assert "extra.txt" in bucket_objects(s3, "site", "idx")


def test_missing_bucket_unreachable_endpoint_exit_4(
    s3: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_root(tmp_path, WHEELS[:1])
    before = sorted(f.rel for f in list_root(root.path))
    assert publish("--store", str(root.path), "--to", "s3://no-such-bucket/x") == 4
    err = capsys.readouterr().err.strip()
    assert err == "error: bucket no-such-bucket does not exist; create it or fix --to"

    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # nothing listens on the discard port
    assert publish("--store", str(root.path), "--to", "s3://site/x") == 4
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "cannot reach S3 at http://127.0.0.1:9" in err
    assert "testing" not in err  # no secret in the message
    assert sorted(f.rel for f in list_root(root.path)) == before  # the source is untouched


def test_killed_publish_reruns_to_a_complete_consistent_bucket(s3: Any, endpoint: str, tmp_path: Path) -> None:
    wheels = [(f"kernel{i % 4}", f"1.0.{i}+torch213cpucxx11") for i in range(60)]
    root = make_root(tmp_path, wheels, payload=os.urandom(4096))
    s3.create_bucket(Bucket="killed")
    env = {**os.environ, **s3_env(endpoint), "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "kernel_factory", "publish", "--store", str(root.path),
                             "--to", "s3://killed/p"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            if s3.list_objects_v2(Bucket="killed", Prefix="p/").get("KeyCount", 0) > 0:
                break
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    local = {f.rel for f in list_root(root.path)}
    partial = bucket_keys(s3, "killed", "p")
    assert partial and partial < local  # killed part-way
    assert_links_resolve(s3, "killed", "p")  # no page links a file that is not there yet

    assert main(["publish", "--store", str(root.path), "--to", "s3://killed/p"]) == 0
    assert bucket_keys(s3, "killed", "p") == local
    assert_links_resolve(s3, "killed", "p")


def test_a_record_deleted_between_the_listing_and_its_read_is_gone_not_a_failure(s3: Any, tmp_path: Path) -> None:
    """A prune (or another writer) deletes a record after the store was listed: the sync counts it as removed."""
    s3.create_bucket(Bucket="vanish")
    built = make_root(tmp_path / "built", WHEELS)
    store = S3Store("s3://vanish/kf")
    for record in built.records:
        wheel = tmp_path / record.filename
        wheel.write_bytes((built.path / "files" / record.filename).read_bytes())
        store.put(wheel, (built.path / "files" / f"{record.filename}.metadata").read_bytes(), record)
    gone = built.records[0].filename
    catalog = store.open_catalog()  # the listing names every record
    try:
        s3.delete_object(Bucket="vanish", Key=f"kf/files/{gone}.json")
        synced = store.sync(catalog)
        assert synced.errors == [] and gone not in {r.filename for r in catalog.records()}
        assert len(catalog.records()) == len(built.records) - 1
    finally:
        catalog.close()


def test_s3_store_put_records_then_publish_skips_its_wheels(
    s3: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    s3.create_bucket(Bucket="store")
    built = make_root(tmp_path / "built", WHEELS)  # wheels made locally; their records and metadata
    store = S3Store("s3://store/kf")
    assert load_records(store) == []
    work = tmp_path / "out"
    work.mkdir()
    for record in built.records:
        wheel = work / record.filename
        wheel.write_bytes((built.path / "files" / record.filename).read_bytes())
        store.put(wheel, (built.path / "files" / f"{record.filename}.metadata").read_bytes(), record)
        assert not wheel.exists()  # moved in, as LocalStore.put does
    s3.put_object(Bucket="store", Key="kf/files/orphan-1.0-py3-none-any.whl.json", Body=b"{}")  # no wheel: not listed
    assert load_records(store) == sorted(built.records, key=lambda r: r.filename)

    # the index job: render pages from the bucket's records into a local root, publish them to the same prefix
    local = tmp_path / "public"
    s3.delete_object(Bucket="store", Key="kf/files/orphan-1.0-py3-none-any.whl.json")
    assert main(["index", "--store", "s3://store/kf", "--out", str(local)]) == 0
    assert not (local / "files").exists()  # the wheels stay in the bucket; only pages are rendered
    capsys.readouterr()
    assert main(["publish", "--store", str(local), "--to", "s3://store/kf"]) == 0
    pages = [f for f in list_root(local) if not f.rel.startswith("files/")]
    assert f"uploaded {len(pages)} files" in capsys.readouterr().out
    assert_links_resolve(s3, "store", "kf")


def test_add_wheel_then_publish_uploads_only_the_new_files(
    s3: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = make_root(tmp_path, WHEELS[:1])
    s3.create_bucket(Bucket="grow")
    assert main(["publish", "--store", str(root.path), "--to", "s3://grow"]) == 0
    record = add_wheel(root.path, "img2grey", "1.1.3+torch213cpucxx11")
    write_pages(root.path, [*root.records, record])
    capsys.readouterr()
    assert main(["publish", "--store", str(root.path), "--to", "s3://grow"]) == 0
    out = capsys.readouterr().out
    uploaded = {line.split()[1] for line in out.splitlines() if line.startswith(("uploaded files/", "replaced "))}
    new = {f"files/{record.filename}{ext}" for ext in ("", ".metadata", ".json")}
    changed = {"simple/img2grey/index.html", "simple/img2grey/index.json",
               "variants/torch213cpucxx11/simple/img2grey/index.html",
               "variants/torch213cpucxx11/simple/img2grey/index.json"}
    assert uploaded == new | changed


def test_wrong_credentials_exit_4_one_line_no_secret(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """moto with its IAM checks on: keys it does not know are refused, as a real S3 refuses them."""
    root = make_root(tmp_path, WHEELS[:1])
    before = sorted(f.rel for f in list_root(root.path))
    with moto_server(tmp_path, auth=True) as url:
        for key, value in s3_env(url).items():
            monkeypatch.setenv(key, value)
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAWRONGKEY00000000")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s3cr3t-never-printed")
        assert publish("--store", str(root.path), "--to", "s3://site/x") == 4
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "refused the credentials" in err[0] and "AWS_ACCESS_KEY_ID" in err[0], err[0]
    assert not any("s3cr3t-never-printed" in line for line in err)
    assert sorted(f.rel for f in list_root(root.path)) == before
