"""Changes made behind the tool's back (issue 27 items 3, 5, 8 and 9), each checked with real pip against a
served copy of the result and the exit code the docs give.

- a deleted ``.whl.metadata`` is written again from its wheel (local and S3 stores);
- a write to the ``--wheels`` folder's file, or to a published page, leaves the store as it was (copies, not
  hard links); a store wheel changed in place (local) or overwritten with another size (S3) is named, left
  out of the pages (exit 3), and ``--repair`` records it as it is;
- sdists in a ``--wheels`` folder are named and counted;
- an S3 store's index root published to another prefix carries the wheels its pages link.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import boto3
import pytest
from index_synth import make_wheel
from servers import moto_server, s3_env
from support import clean_env, http_server, kf

pytestmark = pytest.mark.integration

PIP_ENV = clean_env(PIP_NO_CACHE_DIR="1", PIP_CONFIG_FILE="/dev/null")


def pip_download(url: str, requirement: str, dest: Path) -> subprocess.CompletedProcess[str]:
    """Real pip: resolve ``requirement`` from the index at ``url`` (.metadata first) and download it, hash-checked."""
    return subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "-d",
                           str(dest), "--index-url", f"{url}/simple/", requirement],
                          capture_output=True, text=True, env=PIP_ENV, timeout=300)  # fmt: skip


def errors(proc: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in proc.stderr.splitlines() if line.startswith("error: ")]


def wheels(folder: Path) -> dict[str, Path]:
    """Three installable wheels of two projects in ``folder``."""
    made = [make_wheel(folder, "alpha", v, summary="alpha")[0] for v in ("1.0", "1.1")]
    made.append(make_wheel(folder, "beta", "2.0", summary="beta")[0])
    return {p.name: p for p in made}


@pytest.fixture
def store(tmp_path: Path) -> tuple[Path, dict[str, Path]]:
    folder = tmp_path / "w"
    made = wheels(folder)
    root = tmp_path / "store"
    proc = kf("index", "--store", root, "--wheels", folder)
    assert proc.returncode == 0, proc.stderr
    return root, made


def test_deleted_metadata_is_written_again_from_the_wheel(store: tuple[Path, dict[str, Path]], tmp_path: Path) -> None:
    root, made = store
    name = "alpha-1.1-py3-none-any.whl"
    meta = root / "files" / f"{name}.metadata"
    before = meta.read_bytes()
    for flags in ((), ("--rescan", "--repair")):
        meta.unlink()
        proc = kf("index", "--store", root, *flags)
        assert proc.returncode == 0, proc.stderr
        assert f"{meta} was missing: written again from its wheel" in proc.stderr.splitlines()
        assert meta.read_bytes() == before
    with http_server(root) as url:
        got = pip_download(url, "alpha==1.1", tmp_path / "dl")
    assert got.returncode == 0, got.stderr
    assert (tmp_path / "dl" / name).read_bytes() == made[name].read_bytes()


def test_write_to_the_adopted_folder_leaves_the_store_alone(store: tuple[Path, dict[str, Path]], tmp_path: Path
                                                            ) -> None:  # fmt: skip
    root, made = store
    name = "alpha-1.0-py3-none-any.whl"
    kept = (root / "files" / name).read_bytes()
    other = make_wheel(tmp_path / "other", "alpha", "1.0", summary="another alpha 1.0, with a longer summary")[0]
    with open(made[name], "r+b") as f:  # `cp other.whl W/<adopted name>`: the same inode, new bytes
        f.write(other.read_bytes())
        f.truncate()
    assert (root / "files" / name).read_bytes() == kept
    proc = kf("index", "--store", root, "--wheels", made[name].parent, "--rescan")
    assert proc.returncode == 0 and errors(proc) == [], proc.stderr
    with http_server(root) as url:
        got = pip_download(url, "alpha==1.0", tmp_path / "dl")
    assert got.returncode == 0, got.stderr
    assert (tmp_path / "dl" / name).read_bytes() == kept


def test_store_wheel_changed_in_place_is_named_and_left_out_then_repaired(
    store: tuple[Path, dict[str, Path]], tmp_path: Path
) -> None:
    root, _ = store
    name = "alpha-1.0-py3-none-any.whl"
    wheel = root / "files" / name
    other = make_wheel(tmp_path / "other", "alpha", "1.0", summary="another alpha 1.0, with a longer summary")[0]
    with open(wheel, "r+b") as f:  # in place: files/ itself does not change
        f.write(other.read_bytes())
        f.truncate()
    size = other.stat().st_size
    record_size = store[1][name].stat().st_size
    for _ in range(2):  # said on every run until the store is whole again
        proc = kf("index", "--store", root)
        assert proc.returncode == 3, proc.stderr
        assert errors(proc) == [
            f"error: {wheel}: {size} bytes where its record says {record_size}, not the wheel its record {name}.json "
            "describes (changed outside kernel-factory); it is left out of the pages: put back the wheel the record "
            "describes, or run `kernel-factory index --repair` to record this wheel as it is"
        ]
        assert name not in (root / "simple" / "alpha" / "index.html").read_text()
    with http_server(root) as url:
        got = pip_download(url, "alpha==1.0", tmp_path / "dl")
        assert got.returncode == 1 and "No matching distribution found for alpha==1.0" in got.stderr, got.stderr
        assert pip_download(url, "alpha==1.1", tmp_path / "dl").returncode == 0
    proc = kf("index", "--store", root, "--repair")
    assert proc.returncode == 0 and errors(proc) == [], proc.stderr
    assert f"repaired {wheel}.json: the wheel changed outside kernel-factory, its record now describes it" in (
        proc.stderr.splitlines())
    with http_server(root) as url:
        got = pip_download(url, "alpha==1.0", tmp_path / "dl2")
    assert got.returncode == 0, got.stderr
    assert (tmp_path / "dl2" / name).read_bytes() == other.read_bytes()


def listed_state(root: Path) -> str | None:
    """The files/ stat the last file check kept (a run that finds it unchanged lists nothing)."""
    with closing(sqlite3.connect(root / "files" / ".catalog.sqlite")) as db:
        row = db.execute("SELECT value FROM meta WHERE name='files_state'").fetchone()
    return None if row is None else str(row[0])


def test_settled_store_still_compares_each_wheel(store: tuple[Path, dict[str, Path]], tmp_path: Path) -> None:
    """Once a run has kept files/'s stat (nothing added, removed or renamed since: no listing), a same-size edit
    of a wheel with its mtime put back is still found: every wheel is stat'ed on every run."""
    root, _ = store
    time.sleep(0.05)  # files/ last changed longer ago than a clock tick: the next run keeps its stat
    for _ in range(2):
        assert kf("index", "--store", root).returncode == 0
    assert listed_state(root)
    name = "alpha-1.0-py3-none-any.whl"
    wheel = root / "files" / name
    original = wheel.read_bytes()
    data = bytearray(original)
    data[-40] ^= 0xFF  # same size, other bytes (in the zip's central directory)
    st = wheel.stat()
    with open(wheel, "r+b") as f:  # in place: files/ itself does not change
        f.write(data)
    os.utime(wheel, ns=(st.st_atime_ns, st.st_mtime_ns))
    proc = kf("index", "--store", root)
    assert proc.returncode == 3 and errors(proc) == [
        f"error: {wheel}: its sha256 differs from its record's, not the wheel its record {name}.json describes "
        "(changed outside kernel-factory); it is left out of the pages: put back the wheel the record describes, "
        "or run `kernel-factory index --repair` to record this wheel as it is"
    ], proc.stderr
    assert name not in (root / "simple" / "alpha" / "index.html").read_text()

    wheel.write_bytes(original)  # put back in place: whole again, and pip installs it
    proc = kf("index", "--store", root)
    assert proc.returncode == 0 and errors(proc) == [], proc.stderr
    with http_server(root) as url:
        got = pip_download(url, "alpha==1.0", tmp_path / "dl")
    assert got.returncode == 0, got.stderr


def test_settled_store_adding_a_wheel_still_sees_a_deleted_metadata(store: tuple[Path, dict[str, Path]],
                                                                     tmp_path: Path) -> None:  # fmt: skip
    """The run that adopts a wheel writes files/ itself; a .metadata deleted before it is still found (files/'s
    stat is compared with the kept one before the adoption) and written again, and the new wheel is indexed."""
    root, made = store
    time.sleep(0.05)
    for _ in range(2):
        assert kf("index", "--store", root).returncode == 0
    assert listed_state(root)
    meta = root / "files" / "beta-2.0-py3-none-any.whl.metadata"
    before = meta.read_bytes()
    meta.unlink()
    new = make_wheel(tmp_path / "w", "beta", "2.1", summary="beta")[0]
    proc = kf("index", "--store", root, "--wheels", tmp_path / "w")
    assert proc.returncode == 0 and errors(proc) == [], proc.stderr
    assert f"{meta} was missing: written again from its wheel" in proc.stderr.splitlines()
    assert meta.read_bytes() == before
    with http_server(root) as url:
        for requirement in ("beta==2.0", "beta==2.1"):
            got = pip_download(url, requirement, tmp_path / "dl")
            assert got.returncode == 0, got.stderr
    assert (tmp_path / "dl" / new.name).read_bytes() == new.read_bytes()


def test_write_to_a_published_page_leaves_the_store_alone(store: tuple[Path, dict[str, Path]], tmp_path: Path
                                                          ) -> None:  # fmt: skip
    root, _ = store
    dest = tmp_path / "site"
    assert kf("publish", "--store", root, "--to", dest).returncode == 0
    page = root / "simple" / "index.html"
    kept = page.read_bytes()
    with open(dest / "simple" / "index.html", "ab") as f:  # `echo >> DEST/simple/index.html`
        f.write(b"\n<a href='evil'>x</a>\n")
    with open(dest / "files" / "beta-2.0-py3-none-any.whl", "r+b") as f:
        f.write(b"XXXX")
    assert page.read_bytes() == kept
    assert hashlib.sha256((root / "files" / "beta-2.0-py3-none-any.whl").read_bytes()).hexdigest() == \
        hashlib.sha256(wheels(tmp_path / "again")["beta-2.0-py3-none-any.whl"].read_bytes()).hexdigest()
    proc = kf("index", "--store", root)
    assert proc.returncode == 0 and errors(proc) == [], proc.stderr
    assert kf("publish", "--store", root, "--to", dest).returncode == 0  # puts the destination right
    assert (dest / "simple" / "index.html").read_bytes() == kept
    with http_server(dest) as url:
        assert pip_download(url, "beta==2.0", tmp_path / "dl").returncode == 0


def test_sdists_in_the_wheels_folder_are_named_and_counted(tmp_path: Path) -> None:
    folder = tmp_path / "w"
    wheels(folder)
    for sdist in ("six-1.16.0.tar.gz", "alpha-1.2.zip"):
        (folder / sdist).write_bytes(b"not really an sdist")
    for _ in range(2):  # said on every run while they are there
        proc = kf("index", "--store", tmp_path / "store", "--wheels", folder)
        assert proc.returncode == 0, proc.stderr
        assert [line for line in proc.stderr.splitlines() if line.startswith("warning: ")] == [
            f"warning: {folder}: 2 file(s) not indexed (only wheels are): alpha-1.2.zip, six-1.16.0.tar.gz; build "
            "wheels of them (`pip wheel --no-deps FILE`) and put those in the folder"
        ]


# -- S3 stores -----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with moto_server(tmp_path_factory.mktemp("moto")) as url:
        yield url


def s3_store(endpoint: str, tmp_path: Path, bucket: str) -> tuple[dict[str, str], Any, dict[str, Path]]:
    """A bucket whose ``store`` prefix holds three adopted wheels (published there from a local store)."""
    env = clean_env(**s3_env(endpoint))
    client = boto3.client("s3", **{"endpoint_url": endpoint, "aws_access_key_id": "testing",
                                   "aws_secret_access_key": "testing", "region_name": "us-east-1"})  # fmt: skip
    client.create_bucket(Bucket=bucket)
    made = wheels(tmp_path / "w")
    assert kf("index", "--store", tmp_path / "local", "--wheels", tmp_path / "w").returncode == 0
    proc = kf("publish", "--store", tmp_path / "local", "--to", f"s3://{bucket}/store", env=env)
    assert proc.returncode == 0, proc.stderr
    return env, client, made


def download(client: Any, bucket: str, prefix: str, folder: Path) -> Path:
    """Every object under ``prefix`` into ``folder`` (to serve a copy of the bucket to pip)."""
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"{prefix}/"):
        for obj in page.get("Contents", []):
            path = folder / obj["Key"][len(prefix) + 1 :]
            path.parent.mkdir(parents=True, exist_ok=True)
            client.download_file(bucket, obj["Key"], str(path))
    return folder


def test_s3_store_out_folder_published_elsewhere_carries_its_wheels(endpoint: str, tmp_path: Path) -> None:
    env, client, made = s3_store(endpoint, tmp_path, "one")
    out = tmp_path / "out"
    proc = kf("index", "--store", "s3://one/store", "--out", out, env=env)
    assert proc.returncode == 0, proc.stderr
    assert not (out / "files").exists()
    client.create_bucket(Bucket="other")
    proc = kf("publish", "--store", out, "--to", "s3://other/prefix", env=env)
    assert proc.returncode == 0, proc.stderr
    site = download(client, "other", "prefix", tmp_path / "site")
    for name, wheel in made.items():
        assert (site / "files" / name).read_bytes() == wheel.read_bytes()
    with http_server(site) as url:
        got = pip_download(url, "alpha==1.1", tmp_path / "dl")
    assert got.returncode == 0, got.stderr


def test_s3_out_folder_without_its_store_publishes_nothing(endpoint: str, tmp_path: Path) -> None:
    env, client, _ = s3_store(endpoint, tmp_path, "two")
    out = tmp_path / "out"
    assert kf("index", "--store", "s3://two/store", "--out", out, env=env).returncode == 0
    (out / ".index-store").unlink()  # an out folder copied without its hidden files
    dest = tmp_path / "dest"
    proc = kf("publish", "--store", out, "--to", dest, env=env)
    assert proc.returncode == 3, proc.stderr
    assert errors(proc) == [
        f"error: the pages under {out} link 6 file(s) that are neither there nor at the destination (first: "
        "files/alpha-1.0-py3-none-any.whl); publish the store's own folder (or index into this one again so that it "
        "names its store); no page was published"
    ]
    assert not (dest / "simple").exists()


def test_s3_store_deleted_metadata_and_overwritten_wheel(endpoint: str, tmp_path: Path) -> None:
    env, client, made = s3_store(endpoint, tmp_path, "three")
    out = tmp_path / "out"
    assert kf("index", "--store", "s3://three/store", "--out", out, env=env).returncode == 0
    meta = "store/files/alpha-1.1-py3-none-any.whl.metadata"
    kept = client.get_object(Bucket="three", Key=meta)["Body"].read()
    client.delete_object(Bucket="three", Key=meta)
    bad = "alpha-1.0-py3-none-any.whl"
    client.put_object(Bucket="three", Key=f"store/files/{bad}", Body=b"another size")
    proc = kf("index", "--store", "s3://three/store", "--out", out, env=env)
    assert proc.returncode == 3, proc.stderr
    assert f"s3://three/{meta} was missing: written again from its wheel" in proc.stderr.splitlines()
    assert client.get_object(Bucket="three", Key=meta)["Body"].read() == kept
    assert errors(proc) == [
        f"error: s3://three/store/files/{bad}: 12 bytes where its record says {made[bad].stat().st_size}, not the "
        f"wheel its record {bad}.json describes (changed outside kernel-factory); it is left out of the pages: put "
        "back the wheel the record describes, or delete the wheel and its record and run `kernel-factory build` again"
    ]
    assert bad not in (out / "simple" / "alpha" / "index.html").read_text()
    site = tmp_path / "site"
    assert kf("publish", "--store", out, "--to", site, env=env).returncode == 0
    with http_server(site) as url:
        assert pip_download(url, "alpha==1.1", tmp_path / "dl").returncode == 0
        got = pip_download(url, "alpha==1.0", tmp_path / "dl")
        assert got.returncode == 1 and "No matching distribution found for alpha==1.0" in got.stderr, got.stderr


def test_s3_store_wheel_overwritten_at_the_same_size(endpoint: str, tmp_path: Path) -> None:
    """An S3 wheel object overwritten with other bytes of the same size: its ETag is not the one it had when it
    last matched its record, so it is read and hashed, named, and left out of the pages (until put back)."""
    env, client, made = s3_store(endpoint, tmp_path, "four")
    out = tmp_path / "out"
    for _ in range(2):  # the first run keeps each wheel's ETag, the second finds them as they were
        proc = kf("index", "--store", "s3://four/store", "--out", out, env=env)
        assert proc.returncode == 0 and errors(proc) == [], proc.stderr
    bad = "alpha-1.0-py3-none-any.whl"
    data = bytearray(made[bad].read_bytes())
    data[-40] ^= 0xFF  # same size, other bytes
    client.put_object(Bucket="four", Key=f"store/files/{bad}", Body=bytes(data))
    for _ in range(2):  # said on every run
        proc = kf("index", "--store", "s3://four/store", "--out", out, env=env)
        assert proc.returncode == 3, proc.stderr
        assert errors(proc) == [
            f"error: s3://four/store/files/{bad}: its sha256 differs from its record's, not the wheel its record "
            f"{bad}.json describes (changed outside kernel-factory); it is left out of the pages: put back the wheel "
            "the record describes, or delete the wheel and its record and run `kernel-factory build` again"
        ]
        assert bad not in (out / "simple" / "alpha" / "index.html").read_text()
    client.put_object(Bucket="four", Key=f"store/files/{bad}", Body=made[bad].read_bytes())  # put back
    proc = kf("index", "--store", "s3://four/store", "--out", out, env=env)
    assert proc.returncode == 0 and errors(proc) == [], proc.stderr
    site = tmp_path / "site"
    assert kf("publish", "--store", out, "--to", site, env=env).returncode == 0
    with http_server(site) as url:
        got = pip_download(url, "alpha==1.0", tmp_path / "dl")
    assert got.returncode == 0, got.stderr
    assert (tmp_path / "dl" / bad).read_bytes() == made[bad].read_bytes()


def test_rescan_lists_files_whatever_the_catalog_kept(store: tuple[Path, dict[str, Path]]) -> None:
    """A catalog made to say files/ is as the last check saw it (another writer of the store set the kept stat
    to the folder's stat after deleting a .metadata): `--rescan` lists files/ anyway and writes it again."""
    root, _ = store
    meta = root / "files" / "beta-2.0-py3-none-any.whl.metadata"
    before = meta.read_bytes()
    meta.unlink()
    with closing(sqlite3.connect(root / "files" / ".catalog.sqlite")) as db, db:
        db.execute("PRAGMA journal_mode=MEMORY")  # no journal file: files/ keeps its stat
        st = (root / "files").stat()
        db.execute("INSERT OR REPLACE INTO meta VALUES ('files_state', ?)",
                   (f"{st.st_dev}:{st.st_ino}:{st.st_mtime_ns}:{st.st_ctime_ns}:{st.st_size}",))  # fmt: skip
    assert (root / "files").stat().st_mtime_ns == st.st_mtime_ns
    proc = kf("index", "--store", root, "--rescan")
    assert proc.returncode == 0 and errors(proc) == [], proc.stderr
    assert f"{meta} was missing: written again from its wheel" in proc.stderr.splitlines()
    assert meta.read_bytes() == before
