"""download's checks, unit by unit: a wheel unpacked against its RECORD and the limits (local/download/wheelcheck.py),
the old lock's git_lfs_concat hash over the Hub's paths, links kept on the index's origin and the index root
(simple.py), and credentials taken out at the one sink (report.py). No network, no processes."""

from __future__ import annotations

import base64
import hashlib
import json
import zipfile
from pathlib import Path
from typing import Any

import pytest
from kernel_factory import fetch, report, simple
from kernel_factory.errors import Refused, UsageError
from kernel_factory.local.download import wheelcheck
from kernel_factory.verify.lockfile import files_lock_hash, lock_hash

PROV = {"repo_id": "org/k", "revision": "1" * 40, "variant": "torch-universal", "package": "k"}


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def wheel(tmp: Path, files: dict[str, bytes], *, record: dict[str, str] | None = None,
          prov: dict[str, Any] | None = None, stored: bool = False) -> Path:
    """k-1.0-py3-none-any.whl holding ``files`` (package k/), its provenance and a RECORD (``record`` overrides)."""
    path = tmp / "k-1.0-py3-none-any.whl"
    members = {**files, "k-1.0.dist-info/kernel_factory.json": json.dumps(prov or PROV).encode()}
    rows = {name: f"sha256={b64(data)}" for name, data in members.items()}
    rows.update(record or {})
    rows_text = "".join(f"{name},{h},\n" for name, h in rows.items()) + "k-1.0.dist-info/RECORD,,\n"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
        zf.writestr("k-1.0.dist-info/RECORD", rows_text)
    return path


GOOD = {"k/__init__.py": b"X = 1\n", "k/metadata.json": b"{}", "k/sub/lib.so": b"\x7fELF\0\0binary"}


def test_a_good_wheel_unpacks_with_its_record_hashes(tmp_path: Path) -> None:
    prov, folder, files = wheelcheck.unpack(wheel(tmp_path, GOOD), tmp_path / "out")
    assert prov == PROV and folder == tmp_path / "out" / "build"
    assert files == {rel.removeprefix("k/"): hashlib.sha256(data).hexdigest() for rel, data in GOOD.items()}
    assert (folder / "sub" / "lib.so").read_bytes() == GOOD["k/sub/lib.so"]


@pytest.mark.parametrize(("record", "message"), [
    ({"k/__init__.py": f"sha256={b64(b'other')}"}, "'k/__init__.py' does not match its RECORD sha256"),
    ({"k/__init__.py": ""}, "'k/__init__.py' is not in its RECORD"),
])
def test_a_file_that_fails_the_record_is_refused(tmp_path: Path, record: dict[str, str], message: str) -> None:
    with pytest.raises(Refused, match=message):
        wheelcheck.unpack(wheel(tmp_path, GOOD, record=record), tmp_path / "out")


def test_a_zip_bomb_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    bomb = wheel(tmp_path, {**GOOD, "k/zeros.bin": b"\0" * (8 << 20)})
    size = bomb.stat().st_size
    assert size * wheelcheck.MAX_RATIO < 8 << 20
    with pytest.raises(Refused) as info:
        wheelcheck.unpack(bomb, tmp_path / "out")
    assert str(info.value) == (
        f"k-1.0-py3-none-any.whl: its files inflate to {(8 << 20) + sum(map(len, GOOD.values()))} bytes, more than "
        f"the {max(wheelcheck.MAX_RATIO * size, 1 << 20)} allowed for a wheel of {size} bytes (a zip bomb?); "
        "nothing was installed: rebuild the wheel")
    assert not (tmp_path / "out").exists()


def test_the_same_bytes_stored_are_not_a_bomb(tmp_path: Path) -> None:
    """Ratio, not size: 8 MiB of zeros in a stored (uncompressed) wheel unpacks."""
    _, folder, _ = wheelcheck.unpack(wheel(tmp_path, {**GOOD, "k/zeros.bin": b"\0" * (8 << 20)}, stored=True),
                                     tmp_path / "out")
    assert (folder / "zeros.bin").stat().st_size == 8 << 20


def test_too_many_members_and_a_big_provenance_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    monkeypatch.setattr(wheelcheck, "MAX_MEMBERS", 4)
    with pytest.raises(Refused, match="holds 6 files, more than the 4 a kernel wheel may"):
        wheelcheck.unpack(wheel(tmp_path, {**GOOD, "k/x.py": b""}), tmp_path / "out")
    monkeypatch.setattr(wheelcheck, "MAX_MEMBERS", 100)
    big = wheel(tmp_path, GOOD, prov={**PROV, "pad": "x" * wheelcheck.MAX_PROVENANCE})
    with pytest.raises(Refused, match=r"kernel_factory.json inflates to more than 65536 bytes \(a zip bomb\?\)"):
        wheelcheck.unpack(big, tmp_path / "out2")


def test_not_a_zip_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "k-1.0-py3-none-any.whl"
    bad.write_bytes(b"PK\3\4 not really")
    with pytest.raises(Refused, match="^k-1.0-py3-none-any.whl is not a readable zip file"):
        wheelcheck.unpack(bad, tmp_path / "out")


# -- the lock's hash -------------------------------------------------------------------------------------------


def hub_variant(tmp: Path, files: dict[str, bytes]) -> Path:
    folder = tmp / "hub" / "build" / "v"
    for rel, data in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(data)
    return folder


@pytest.mark.parametrize("lfs", [False, True])
@pytest.mark.parametrize("nested", [False, True])
def test_the_lock_hash_is_found_over_the_hubs_paths(tmp_path: Path, nested: bool, lfs: bool) -> None:
    """The Hub's folder (flat, or nested with metadata.json beside the package; the binary in LFS or not) hashes
    as the lock says; the unpacked wheel's files match it, and one changed byte does not."""
    _, folder, files = wheelcheck.unpack(wheel(tmp_path, GOOD), tmp_path / "out")
    hub = {("k/" if nested and rel != "k/metadata.json" else "") + rel.removeprefix("k/"): data
           for rel, data in GOOD.items()}
    expected = lock_hash(hub_variant(tmp_path, hub), {r for r in hub if r.endswith(".so")} if lfs else set())
    wheelcheck.check_lock_hash({"torch-universal": expected}, "org/k", "torch-universal", "k", folder, files, "k.whl")
    (folder / "__init__.py").write_bytes(b"X = 2\n")
    with pytest.raises(Refused, match="k.whl: its files do not match the kernels.lock hash of org/k torch-universal"):
        wheelcheck.check_lock_hash({"torch-universal": expected}, "org/k", "torch-universal", "k", folder, files,
                                   "k.whl")


def test_a_variant_the_lock_does_not_list_is_refused(tmp_path: Path) -> None:
    with pytest.raises(Refused, match="kernels.lock locks org/k for cpu-a, cpu-b, not torch-universal"):
        wheelcheck.check_lock_hash({"cpu-b": "sha256-" + "0" * 64, "cpu-a": "sha256-" + "0" * 64}, "org/k",
                                   "torch-universal", "k", tmp_path, {}, "k.whl")
    wheelcheck.check_lock_hash({}, "org/k", "torch-universal", "k", tmp_path, {}, "k.whl")  # no hashes: no check


def test_files_lock_hash_is_lock_hash_over_the_same_paths(tmp_path: Path) -> None:
    folder = hub_variant(tmp_path, {"a.py": b"a", "b/c.so": b"\0c"})
    assert files_lock_hash([("b/c.so", folder / "b/c.so"), ("a.py", folder / "a.py")], {"b/c.so"}) == lock_hash(
        folder, {"b/c.so"})
    git_blob = hashlib.sha1(b"blob 1\0a").digest()
    expected = hashlib.sha256(b"a.py" + git_blob + b"b/c.so" + hashlib.sha256(b"\0c").digest()).hexdigest()
    assert lock_hash(folder, {"b/c.so"}) == f"sha256-{expected}"


# -- the index's origin and root -------------------------------------------------------------------------------


@pytest.mark.parametrize(("link", "ok"), [
    ("http://127.0.0.1:8000/files/k.whl", True),
    ("HTTP://127.0.0.1:8000/files/k.whl", True),
    ("http://127.0.0.1:8001/files/k.whl", False),
    ("https://127.0.0.1:8000/files/k.whl", False),
    ("http://127.0.0.2:8000/files/k.whl", False),
    ("file:///dev/zero", False),
    ("http://127.0.0.1:8000@127.0.0.2:8000/k.whl", False),
])
def test_links_stay_on_an_http_index_origin(link: str, ok: bool) -> None:
    if ok:
        simple.check_link(link, "http://127.0.0.1:8000")
    else:
        with pytest.raises(Refused, match="which is not on the index's own origin; nothing is read from there"):
            simple.check_link(link, "http://127.0.0.1:8000")


def test_file_links_only_from_a_local_index() -> None:
    simple.check_link("file:///srv/index/files/k.whl", "/srv/index")
    simple.check_link("file:///srv/index/files/k.whl", "file:///srv/index")
    with pytest.raises(Refused):
        simple.check_link("http://127.0.0.1:8000/k.whl", "/srv/index")
    assert fetch.origin("http://127.0.0.1/x") == ("http", "127.0.0.1", 80)
    assert fetch.origin("https://127.0.0.1/x") == ("https", "127.0.0.1", 443)


@pytest.mark.parametrize("url", ["http://127.0.0.1:8000/simple", "http://127.0.0.1:8000/simple/",
                                 "http://u:p@127.0.0.1:8000/kernels/simple/", "/srv/index/simple"])
def test_an_index_url_naming_simple_is_refused(url: str) -> None:
    with pytest.raises(UsageError) as info:
        simple.index_root(url)
    parent = url.rstrip("/").rsplit("/", 1)[0]
    assert str(info.value) == (f"--index-url {url} names a simple/ root; give the index root, the folder holding "
                               f"simple/ and variants/: --index-url {parent}")


def test_the_index_root_is_kept() -> None:
    assert simple.index_root("http://127.0.0.1:8000/kernels/") == "http://127.0.0.1:8000/kernels"
    assert simple.index_root("http://127.0.0.1:8000/simpler") == "http://127.0.0.1:8000/simpler"


def test_a_page_over_the_limit_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(simple, "MAX_PAGE", 10)
    (tmp_path / "index.json").write_bytes(b"x" * 11)
    with pytest.raises(Refused, match="is bigger than 0 MiB"):
        simple.fetch(str(tmp_path) + "/", None)
    (tmp_path / "index.json").write_bytes(b"x" * 10)
    assert simple.fetch(str(tmp_path) + "/", None) == (b"x" * 10, "application/vnd.pypi.simple.v1+json")


def test_did_you_mean_reads_the_project_list(tmp_path: Path) -> None:
    (tmp_path / "simple").mkdir()
    (tmp_path / "simple" / "index.json").write_text(json.dumps({
        "meta": {"api-version": "1.1"}, "projects": [{"name": "img2grey"}, {"name": "relu"}]}))
    assert simple.did_you_mean("img2gray", str(tmp_path), None) == "; did you mean img2grey?"
    assert simple.did_you_mean("zzzz", str(tmp_path), None) == ""
    assert simple.did_you_mean("img2gray", str(tmp_path / "none"), None) == ""


# -- the sink --------------------------------------------------------------------------------------------------

URL = "https://user:s3cr3t@127.0.0.1:8000/simple/k/"


def test_every_line_and_the_document_lose_the_password(capsys: pytest.CaptureFixture[str]) -> None:
    report.configure(verbose=1)
    try:
        for say in (report.result, report.info, report.progress, report.detail, report.warn, report.error,
                    report.raw_error, report.output):
            say(f"at {URL} x")
        report.document({"url": URL, "list": [URL, {"k": URL}], URL: 1, "n": 2})
    finally:
        report.configure()
    got = capsys.readouterr()
    assert "s3cr3t" not in got.out + got.err
    assert got.err.count("https://127.0.0.1:8000/simple/k/") == 5 and got.out.count("https://127.0.0.1:8000") == 7
    doc = json.loads(got.out[got.out.index("{"):])
    assert doc == {"url": URL.replace("user:s3cr3t@", ""), "list": [URL.replace("user:s3cr3t@", "")] * 1 + [
        {"k": URL.replace("user:s3cr3t@", "")}], URL.replace("user:s3cr3t@", ""): 1, "n": 2}


def test_the_executable_bit_is_kept_and_only_it(tmp_path: Path) -> None:
    path = tmp_path / "k-1.0-py3-none-any.whl"
    members = {**GOOD, "k/run.sh": b"#!/bin/sh\n", "k-1.0.dist-info/kernel_factory.json": json.dumps(PROV).encode()}
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (0o100755 if name.endswith(".sh") else 0o100644) << 16
            zf.writestr(info, data)
        zf.writestr("k-1.0.dist-info/RECORD", "".join(f"{n},sha256={b64(d)},\n" for n, d in members.items()))
    _, folder, _ = wheelcheck.unpack(path, tmp_path / "out")
    assert (folder / "run.sh").stat().st_mode & 0o777 == 0o755
    assert (folder / "__init__.py").stat().st_mode & 0o111 == 0


def test_a_record_that_is_not_csv_is_one_line(tmp_path: Path) -> None:
    path = wheel(tmp_path, GOOD, record={"x" * 200_000: "sha256=AAAA"})
    with pytest.raises(Refused, match=r"^k-1.0-py3-none-any.whl: its RECORD is not CSV \(field larger than"):
        wheelcheck.unpack(path, tmp_path / "out")


def test_only_the_dist_infos_record_counts(tmp_path: Path) -> None:
    """A file named like a RECORD inside the package is a package file, not a second RECORD."""
    _, folder, files = wheelcheck.unpack(wheel(tmp_path, {**GOOD, "k/x.dist-info/RECORD": b"a,b,c\n"}),
                                         tmp_path / "out")
    assert (folder / "x.dist-info" / "RECORD").read_bytes() == b"a,b,c\n" and "x.dist-info/RECORD" in files


@pytest.mark.parametrize("package", ["not-an-id", 5, None])
def test_a_provenance_without_a_package_is_refused(tmp_path: Path, package: object) -> None:
    with pytest.raises(Refused, match="its kernel_factory.json names no package; rebuild it with kernel-factory"):
        wheelcheck.unpack(wheel(tmp_path, GOOD, prov={**PROV, "package": package}), tmp_path / "out")


def test_a_record_of_exactly_the_limit_is_read_and_one_byte_more_refused(tmp_path: Path) -> None:
    for extra, ok in ((0, True), (1, False)):
        path = wheel(tmp_path, GOOD)
        with zipfile.ZipFile(path) as zf:
            rows = zf.read("k-1.0.dist-info/RECORD")
        pad = wheelcheck.MAX_RECORD - len(rows) + extra  # in rows of "p,,\n" (4 bytes) and one of the rest
        filler = b"p,,\n" * ((pad - 3) // 4) + b"q" * ((pad - 3) % 4) + b",,\n"
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
            for name, data in {**GOOD, "k-1.0.dist-info/kernel_factory.json": json.dumps(PROV).encode()}.items():
                zf.writestr(name, data)
            zf.writestr("k-1.0.dist-info/RECORD", rows + filler)
        out = tmp_path / f"out{extra}"
        if ok:
            assert wheelcheck.unpack(path, out)[2].keys() == {"__init__.py", "metadata.json", "sub/lib.so"}
        else:
            with pytest.raises(Refused, match="RECORD inflates to more than 8388608 bytes"):
                wheelcheck.unpack(path, out)


def test_a_wheel_with_two_dist_info_records_is_refused(tmp_path: Path) -> None:
    path = wheel(tmp_path, {**GOOD, "other-1.0.dist-info/RECORD": b"k/__init__.py,sha256=AAAA,1\n"})
    with pytest.raises(Refused, match=r"^k-1.0-py3-none-any.whl carries no .dist-info/RECORD; rebuild it"):
        wheelcheck.unpack(path, tmp_path / "out")


def test_record_rows_without_a_size_count(tmp_path: Path) -> None:
    """PEP 376's third column may be left out: a row of name and hash is a row."""
    path = tmp_path / "k-1.0-py3-none-any.whl"
    members = {**GOOD, "k-1.0.dist-info/kernel_factory.json": json.dumps(PROV).encode()}
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
        zf.writestr("k-1.0.dist-info/RECORD", "".join(f"{n},sha256={b64(d)}\n" for n, d in members.items()))
    files = wheelcheck.unpack(path, tmp_path / "out")[2]
    assert files == {rel.removeprefix("k/"): hashlib.sha256(data).hexdigest() for rel, data in GOOD.items()}


def test_a_record_digest_that_is_not_base64_names_its_file(tmp_path: Path) -> None:
    path = wheel(tmp_path, GOOD, record={"k/__init__.py": "sha256=A"})
    with pytest.raises(Refused) as refused:
        wheelcheck.unpack(path, tmp_path / "out")
    assert str(refused.value) == ("k-1.0-py3-none-any.whl: its RECORD entry for 'k/__init__.py' is not a sha256 "
                                  "digest; rebuild it")
