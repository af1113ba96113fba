"""serve --hub's answers (factory/hub/answers.py), without sockets: wheels made by convert() from variant folders,
the answers compared with the folders they came from."""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest
from kernel_factory.hub.answers import Answer, answer
from kernel_factory.hub.catalog import HubState
from kernel_factory.record import Record
from kernel_factory.verify.digest import walk
from kernel_factory.wheel.convert import convert
from wheel_kit import make_variant, wheel_input

SHA = "0123456789abcdef0123456789abcdef01234567"
OLD = "89abcdef0123456789abcdef0123456789abcdef"
VARIANT = "torch-universal"


def _store(tmp_path: Path, layout: str = "nested", **changes: str) -> tuple[HubState, Path, Record]:
    """A store holding one wheel of example/relu (``layout``: flat or nested) at SHA, tag v1.1.2."""
    vdir = make_variant(tmp_path / "repo", VARIANT, layout=layout, package="relu", name="relu", elf=None,
                        files={"relu/data.bin": b"\0\1binary\0" * 10} if layout == "nested" else {"data.bin": b"\0"})
    whl, _, record = convert(wheel_input(vdir, repo_name="relu", repo_id="example/relu", source="example/relu",
                                         **changes), tmp_path / "store" / "files")
    state = HubState(tmp_path / "store", ["example"], lambda: [record])
    return state, vdir, record


def _get(state: HubState, path: str, method: str = "GET", query: str = "") -> Answer:
    return answer(state, method, path, query)


def _body(got: Answer) -> bytes:
    if got.stream is None:
        return got.body
    try:
        return b"".join(got.stream)
    finally:
        got.stream.close()


def _json(got: Answer) -> object:
    assert got.status == 200, got.body
    return json.loads(got.body)


def test_overview_trusts_the_allowed_organisations_only(tmp_path: Path) -> None:
    state, _, _ = _store(tmp_path)
    assert _json(_get(state, "/api/organizations/example/overview")) == {
        "name": "example", "fullname": "example", "type": "org", "trustedKernelPublisher": True}
    other = _get(state, "/api/organizations/other/overview")
    assert other.status == 404 and ("X-Error-Code", "OrganizationNotFound") in other.headers


def test_refs_revision_and_names_of_a_revision(tmp_path: Path) -> None:
    state, _, record = _store(tmp_path)
    older = replace(record, filename="old.whl", revision=OLD, ref="v1.1.0", kernel_version="1.1.0",
                    upload_time="2025-01-01T00:00:00Z")
    state = HubState(tmp_path / "store", ["example"], lambda: [older, record])
    assert _json(_get(state, "/api/kernels/example/relu/refs")) == {
        "branches": [{"name": "v1", "ref": "refs/heads/v1", "targetCommit": SHA}],
        "tags": [{"name": "v1.1.0", "ref": "refs/tags/v1.1.0", "targetCommit": OLD},
                 {"name": "v1.1.2", "ref": "refs/tags/v1.1.2", "targetCommit": SHA}],
        "converts": [],
    }
    for rev, sha in (("v1", SHA), ("v1.1.0", OLD), ("refs%2Ftags%2Fv1.1.0", OLD), ("refs%2Fheads%2Fv1", SHA),
                     (SHA, SHA)):
        doc = _json(_get(state, f"/api/kernels/example/relu/revision/{rev}"))
        assert isinstance(doc, dict) and (doc["id"], doc["sha"]) == ("example/relu", sha), rev
    missing = _get(state, "/api/kernels/example/relu/revision/v2")
    assert missing.status == 404 and ("X-Error-Code", "RevisionNotFound") in missing.headers
    for path in ("/api/kernels/example/nothere/refs", "/api/kernels/other/relu/refs",
                 "/kernels/example/nothere/resolve/v1/build/x"):
        got = _get(state, path)
        assert got.status == 404 and ("X-Error-Code", "RepoNotFound") in got.headers, path


def test_a_withdrawn_wheel_and_other_organisations_are_not_served(tmp_path: Path) -> None:
    state, _, record = _store(tmp_path)
    for changed in (replace(record, yanked="broken"), replace(record, repo_id="other/relu")):
        hidden = HubState(tmp_path / "store", ["example"], lambda c=changed: [c])  # type: ignore[misc]
        assert _get(hidden, "/api/kernels/example/relu/refs").status == 404


@pytest.mark.parametrize("layout", ["nested", "flat"])
def test_the_tree_lists_the_variant_folder_and_resolve_gives_its_bytes(tmp_path: Path, layout: str) -> None:
    state, vdir, _ = _store(tmp_path, layout)
    entries = _json(_get(state, f"/api/kernels/example/relu/tree/{SHA}", query="recursive=true&expand=false"))
    assert isinstance(entries, list)
    files = {e["path"]: e for e in entries if e["type"] == "file"}
    expected = set(walk(vdir))  # every file, the flat build's compat subfolder included
    assert set(files) == {f"build/{VARIANT}/{rel}" for rel in expected}
    folders = {e["path"] for e in entries if e["type"] == "directory"}
    assert {"build", f"build/{VARIANT}"} <= folders and all("xetHash" not in e for e in entries)
    for rel in expected:
        data = (vdir / rel).read_bytes()
        entry = files[f"build/{VARIANT}/{rel}"]
        head = _get(state, f"/kernels/example/relu/resolve/v1.1.2/build/{VARIANT}/{rel}", "HEAD")
        got = _get(state, f"/kernels/example/relu/resolve/v1.1.2/build/{VARIANT}/{rel}")
        assert head.status == got.status == 200 and head.stream is None and head.body == b""
        assert _body(got) == data and entry["size"] == len(data)
        headers = dict(head.headers)
        assert headers["X-Repo-Commit"] == SHA and headers["Content-Length"] == str(len(data))
        sha256 = hashlib.sha256(data).hexdigest()
        if b"\0" in data:  # the Hub keeps binary files in Git LFS: the blob is named by its sha256
            assert entry["lfs"]["oid"] == sha256 and headers["X-Linked-Etag"] == f'"{sha256}"'
            assert headers["X-Linked-Size"] == str(len(data))
        else:
            blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
            assert "lfs" not in entry and entry["oid"] == blob and headers["ETag"] == f'"{blob}"'
            assert "X-Linked-Etag" not in headers


def test_a_tree_below_build_and_one_level(tmp_path: Path) -> None:
    state, vdir, _ = _store(tmp_path)
    top = _json(_get(state, "/api/kernels/example/relu/tree/v1/build"))
    assert isinstance(top, list) and [(e["type"], e["path"]) for e in top] == [("directory", f"build/{VARIANT}")]
    inner = _json(_get(state, f"/api/kernels/example/relu/tree/v1/build%2F{VARIANT}%2Frelu"))
    assert isinstance(inner, list)
    assert sorted(e["path"] for e in inner) == [f"build/{VARIANT}/relu/{n}" for n in sorted(
        p.name for p in (vdir / "relu").iterdir())]
    gone = _get(state, "/api/kernels/example/relu/tree/v1/nothere")
    assert gone.status == 404 and ("X-Error-Code", "EntryNotFound") in gone.headers


def test_what_is_outside_the_surface_is_404(tmp_path: Path) -> None:
    state, _, _ = _store(tmp_path)
    for path in ("/api/agent-harnesses", "/", "/api/models/example/relu", "/api/kernels/example/relu/commits/v1",
                 f"/kernels/example/relu/resolve/{SHA}/README.md",
                 f"/kernels/example/relu/resolve/{SHA}/build/{VARIANT}/../../../../etc/passwd",
                 f"/kernels/example/relu/resolve/{SHA}/build/{VARIANT}/relu/nothere.py",
                 f"/kernels/example/relu/resolve/{SHA}/build/other-variant/metadata.json",
                 "/api/kernels/example%2F..%2Frelu/refs", "/files/relu-1.1.2-py3-none-any.whl"):
        got = _get(state, path)
        assert got.status == 404 and got.stream is None, path
    missing = _get(state, f"/kernels/example/relu/resolve/{SHA}/build/{VARIANT}/relu/nothere.py", "HEAD")
    assert ("X-Error-Code", "EntryNotFound") in missing.headers
    posted = _get(state, "/api/kernels/example/relu/refs", "POST")
    assert posted.status == 405 and ("Allow", "GET, HEAD") in posted.headers


def _flip_last_member_byte(whl: Path, member: str) -> None:
    """One byte of the stored data of the member whose name ends with ``member`` changed in place (the wheel's
    size unchanged)."""
    with zipfile.ZipFile(whl) as zf:
        info = next(i for i in zf.infolist() if i.filename.endswith("/" + member))
    data = bytearray(whl.read_bytes())
    at = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra) + info.compress_size - 1
    data[at] ^= 0xFF
    whl.write_bytes(bytes(data))


def test_a_wheel_that_fails_its_checks_is_never_served(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    state, _, record = _store(tmp_path)
    whl = tmp_path / "store" / "files" / record.filename
    _flip_last_member_byte(whl, "relu/_ops.py")
    with caplog.at_level(logging.ERROR, "kernel_factory.hub"):
        tree = _json(_get(state, f"/api/kernels/example/relu/tree/{SHA}", query="recursive=true"))
        got = _get(state, f"/kernels/example/relu/resolve/{SHA}/build/{VARIANT}/metadata.json")
        head = _get(state, f"/kernels/example/relu/resolve/{SHA}/build/{VARIANT}/relu/__init__.py", "HEAD")
    assert tree == [] and got.status == head.status == 502 and got.stream is None
    assert [r.getMessage() for r in caplog.records] == [
        f"not served: {record.filename} does not match the sha256 of its record: run `kernel-factory index --repair`"]


def test_a_wheel_whose_record_matches_but_a_member_does_not_is_never_served(tmp_path: Path) -> None:
    """The index's sha256 made again for the changed wheel: the member's RECORD digest still stops it."""
    state, _, record = _store(tmp_path)
    whl = tmp_path / "store" / "files" / record.filename
    _flip_last_member_byte(whl, "relu/_ops.py")
    again = replace(record, sha256=hashlib.sha256(whl.read_bytes()).hexdigest())
    state = HubState(tmp_path / "store", ["example"], lambda: [again])
    assert _get(state, f"/kernels/example/relu/resolve/{SHA}/build/{VARIANT}/metadata.json").status == 502


def test_a_wheel_replaced_after_its_check_is_checked_again(tmp_path: Path) -> None:
    state, _, record = _store(tmp_path)
    path = f"/kernels/example/relu/resolve/{SHA}/build/{VARIANT}/metadata.json"
    assert _get(state, path, "HEAD").status == 200
    whl = tmp_path / "store" / "files" / record.filename
    data = whl.read_bytes()
    whl.unlink()
    whl.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))  # another file, same size: its sha256 differs
    assert _get(state, path).status == 502


def _old_wheel(folder: Path, members: dict[str, bytes]) -> Record:
    """A wheel as kernel-factory wrote them before the variant root: the package folder ``relu/`` with
    metadata.json inside, a provenance without ``variant-root``; its record."""
    info = "relu-1.1.2.dist-info"
    members = {**members, f"{info}/kernel_factory.json": json.dumps(
        {"repo_id": "example/relu", "revision": SHA, "variant": VARIANT, "package": "relu"}).encode()}
    rows = "".join(f"{n},sha256={base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b'=').decode()},"
                   f"{len(d)}\n" for n, d in members.items())
    folder.mkdir(parents=True, exist_ok=True)
    whl = folder / "relu-1.1.2-py3-none-any.whl"
    with zipfile.ZipFile(whl, "w", zipfile.ZIP_DEFLATED) as zf:
        for n, d in members.items():
            zf.writestr(n, d)
        zf.writestr(f"{info}/RECORD", rows + f"{info}/RECORD,,\n")
    data = whl.read_bytes()
    return Record(filename=whl.name, name="relu", version="1.1.2", sha256=hashlib.sha256(data).hexdigest(),
                  size=len(data), metadata_sha256="", requires_python=None, upload_time="2026-01-01T00:00:00Z",
                  kernel_version="1.1.2", variant=VARIANT, repo_id="example/relu", revision=SHA, ref="v1.1.2")


def _meta(files: dict[str, bytes]) -> bytes:
    return json.dumps({"name": "relu", "digest": {"algorithm": "sha256", "files": {
        rel: base64.b64encode(hashlib.sha256(d).digest()).decode() for rel, d in files.items()}}}).encode()


def test_an_older_nested_wheel_is_served_where_its_digest_puts_its_files(tmp_path: Path) -> None:
    init, ops = b"from ._ops import ops\n", b"ops = None\n"
    meta = _meta({"relu/__init__.py": init, "relu/_ops.py": ops})
    record = _old_wheel(tmp_path / "store" / "files", {"relu/__init__.py": init, "relu/_ops.py": ops,
                                                         "relu/metadata.json": meta})
    state = HubState(tmp_path / "store", ["example"], lambda: [record])
    entries = _json(_get(state, f"/api/kernels/example/relu/tree/{SHA}", query="recursive=true"))
    assert isinstance(entries, list)
    assert sorted(e["path"] for e in entries if e["type"] == "file") == [
        f"build/{VARIANT}/metadata.json", f"build/{VARIANT}/relu/__init__.py", f"build/{VARIANT}/relu/_ops.py"]
    assert _body(_get(state, f"/kernels/example/relu/resolve/v1/build/{VARIANT}/metadata.json")) == meta


def test_an_older_flat_wheel_without_its_compat_folder_is_not_served(tmp_path: Path,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    """kernels 0.18+ would refuse the variant (a file of its digest missing): the mirror serves none of it."""
    init, ops, compat = b"from ._ops import ops\n", b"ops = None\n", b"from .. import *\n"
    meta = _meta({"__init__.py": init, "_ops.py": ops, "relu/__init__.py": compat})
    record = _old_wheel(tmp_path / "store" / "files", {"relu/__init__.py": init, "relu/_ops.py": ops,
                                                         "relu/metadata.json": meta})
    state = HubState(tmp_path / "store", ["example"], lambda: [record])
    with caplog.at_level(logging.ERROR, "kernel_factory.hub"):
        assert _json(_get(state, f"/api/kernels/example/relu/tree/{SHA}", query="recursive=true")) == []
        assert _get(state, f"/kernels/example/relu/resolve/v1/build/{VARIANT}/metadata.json").status == 502
    assert [r.getMessage() for r in caplog.records] == [
        f"not served: {record.filename}: it was made by an older kernel-factory that left relu/__init__.py (listed "
        "in the variant's digest) out of the wheel, so kernels 0.18+ refuse it; rebuild it with this kernel-factory "
        "(to-wheel or build), which keeps the variant byte for byte"]
