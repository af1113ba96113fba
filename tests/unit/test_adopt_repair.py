"""``index --repair`` (store/adopt.py ``repair``, ``repair_store``): a record rebuilt from its wheel, with the build
fields of a wheel kernel-factory built where its provenance file can be trusted; which records of a store are
rebuilt, which are left, and what is said (no network, no processes)."""

from __future__ import annotations

import hashlib
import json
import os
import zipfile
from pathlib import Path
from typing import Any

import pytest
from index_synth import make_wheel
from kernel_factory.errors import Refused
from kernel_factory.record import MAX_RECORD_BYTES
from kernel_factory.store.adopt import repair, repair_store
from packaging.utils import InvalidWheelFilename, parse_wheel_filename

CU = "torch27-cxx11-cu128-x86_64-linux"
CPU = "torch213-cxx11-cpu-x86_64-linux"
VERSION = "1.1.0+torch27cu128cxx11"
WHEEL = f"img2grey-{VERSION}-py3-none-linux_x86_64.whl"
MTIME = 1_700_000_000  # 2023-11-14T22:13:20Z: the wheel file's mtime, the upload time of an adopted wheel's record
ZIP_TIME = "2026-01-02T03:04:06Z"  # the wheel's first entry's time: a built wheel's upload time
PROV = {"repo_id": "kernels-community/img2grey", "revision": "a" * 40, "ref": "v1.1.0", "variant": CU,
        "package": "img2grey", "kernel_version": "1.1.0", "name": "img2grey", "kernel-depends": [],
        "digest": {"algorithm": "sha256", "hash": "sha256:" + "b" * 64}, "factory_version": "0.3.0"}  # fmt: skip
CU_FIELDS = {"label": "torch27cu128cxx11", "variant": CU, "backend": "cuda", "backend_version": "12.8",
             "framework": "torch", "framework_version": "2.7", "os": "linux", "arch": "x86_64"}  # fmt: skip


def built_wheel(files: Path, provenance: dict[str, Any] | None) -> tuple[Path, bytes]:
    """img2grey 1.1.0 for CU in ``files``, with ``provenance`` as its kernel_factory.json (None: none);
    its mtime MTIME. (its path, its METADATA)"""
    wheel, meta = make_wheel(files, "img2grey", VERSION, "py3-none-linux_x86_64")
    with zipfile.ZipFile(wheel) as zf:
        members = [(info.filename, zf.read(info)) for info in zf.infolist()]
    if provenance is not None:
        members.append((f"img2grey-{VERSION}.dist-info/kernel_factory.json", json.dumps(provenance).encode()))
    with zipfile.ZipFile(wheel, "w") as zf:  # the first entry's time is the build's; the others', other times
        for n, (name, data) in enumerate(members):
            zf.writestr(zipfile.ZipInfo(name, (2026, 1, 2, 3, 4, 6) if n == 0 else (2025, 5, 6, 7, 8, 2 * n)), data)
    os.utime(wheel, (MTIME, MTIME))
    return wheel, meta


def adopted_fields(wheel: Path, meta: bytes) -> dict[str, Any]:
    """The record of ``wheel`` as an adopted wheel labelled for CU (what --wheels would have made of it)."""
    data = wheel.read_bytes()
    return {
        "filename": WHEEL, "name": "img2grey", "version": VERSION, "sha256": hashlib.sha256(data).hexdigest(),
        "size": len(data), "metadata_sha256": hashlib.sha256(meta).hexdigest(), "requires_python": None,
        "upload_time": "2023-11-14T22:13:20Z", "summary": "", "requires_dist": [], "yanked": False, "kind": "adopted",
        "kernel_version": "1.1.0", **CU_FIELDS, "repo_id": None, "source": None, "revision": None, "ref": None,
        "platform_tag": None, "archs": [], "license": None, "upstream": None, "import_name": None, "digest": None,
        "factory_version": None, "schema": 1, "extra": {},
    }  # fmt: skip


def written(files: Path) -> dict[str, Any]:
    record: dict[str, Any] = json.loads((files / f"{WHEEL}.json").read_bytes())
    return record


@pytest.mark.parametrize(
    ("provenance", "build"),
    [
        (PROV, {"repo_id": "kernels-community/img2grey", "source": "kernels-community/img2grey", "revision": "a" * 40,
                "ref": "v1.1.0", "import_name": "img2grey", "kernel_version": "1.1.0",
                "digest": "sha256:" + "b" * 64, "factory_version": "0.3.0"}),
        # built from a local folder: `source` is its own; no kernel_version: the wheel's public version
        ({**PROV, "source": "/src/img2grey", "kernel_version": None}, {"repo_id": "kernels-community/img2grey",
         "source": "/src/img2grey", "revision": "a" * 40, "ref": "v1.1.0", "import_name": "img2grey",
         "kernel_version": "1.1.0", "digest": "sha256:" + "b" * 64, "factory_version": "0.3.0"}),
        # fields of the wrong type are dropped, not trusted: a digest that is no object, a revision that is no string
        ({"variant": CU, "repo_id": "kernels-community/img2grey", "revision": 12, "digest": "sha256:" + "b" * 64,
          "kernel_version": "9.9.9"},
         {"repo_id": "kernels-community/img2grey", "source": "kernels-community/img2grey", "revision": None,
          "ref": None, "import_name": None, "kernel_version": "9.9.9", "digest": None, "factory_version": None}),
    ],
    ids=["hub", "local-source", "wrong-types"],
)
def test_a_built_wheel_gets_its_build_fields_back(tmp_path: Path, provenance: dict[str, Any],
                                                  build: dict[str, Any]) -> None:
    files = tmp_path / "store/files"
    wheel, meta = built_wheel(files, provenance)
    record = repair(tmp_path / "store", WHEEL)
    expected = {**adopted_fields(wheel, meta), "kind": "kernel", "upload_time": ZIP_TIME, **build}
    assert written(files) == json.loads(record.to_json()) == expected
    assert (files / f"{WHEEL}.metadata").read_bytes() == meta
    assert sorted(p.name for p in files.iterdir()) == [WHEEL, f"{WHEEL}.json", f"{WHEEL}.metadata"]


@pytest.mark.parametrize(
    "provenance",
    [None, {**PROV, "repo_id": "not a repo id"}, {**PROV, "variant": CPU}, {"repo_id": "kernels-community/img2grey"}],
    ids=["none", "fails-the-record-check", "another-variant", "no-variant"],
)
def test_a_wheel_whose_provenance_is_absent_or_untrusted_gets_an_adopted_record(
    tmp_path: Path, provenance: dict[str, Any] | None
) -> None:
    """No provenance, one whose fields fail the record check, one naming a variant the wheel's label is not, or
    one naming none: the record of an adopted wheel, its variant read from its label, its upload time its mtime."""
    files = tmp_path / "store/files"
    wheel, meta = built_wheel(files, provenance)
    record = repair(tmp_path / "store", WHEEL)
    assert written(files) == json.loads(record.to_json()) == adopted_fields(wheel, meta)


def test_a_wheel_without_a_label_is_not_made_a_kernel_by_its_provenance(tmp_path: Path) -> None:
    files = tmp_path / "store/files"
    wheel, _ = make_wheel(files, "helper", "2.0")
    with zipfile.ZipFile(wheel, "a") as zf:
        zf.writestr("helper-2.0.dist-info/kernel_factory.json", json.dumps({**PROV, "variant": None}))
    record = repair(tmp_path / "store", wheel.name)
    assert (record.kind, record.variant, record.repo_id, record.label) == ("adopted", None, None, None)


def test_a_wheel_name_that_is_none_is_refused_and_nothing_written(tmp_path: Path) -> None:
    files = tmp_path / "store/files"
    files.mkdir(parents=True)
    (files / "not-a-wheel.whl").write_bytes(b"junk")
    with pytest.raises(InvalidWheelFilename) as why:
        parse_wheel_filename("not-a-wheel.whl")
    with pytest.raises(Refused) as refused:
        repair(tmp_path / "store", "not-a-wheel.whl")
    assert str(refused.value) == f"not-a-wheel.whl: not a valid wheel file name ({why.value}); rename or remove it"
    assert sorted(p.name for p in files.iterdir()) == ["not-a-wheel.whl"]


def test_a_store_without_files_has_nothing_to_repair(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert repair_store(tmp_path / "store") == ([], [])
    assert not (tmp_path / "store").exists() and capsys.readouterr() == ("", "")


def test_repair_store_rebuilds_the_records_that_fail_and_leaves_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    files = store / "files"
    names = {}
    for project in ("good", "missing", "damaged", "padded", "invalid"):
        names[project] = make_wheel(files, project, "1.0")[0].name
    first = repair_store(store)  # no record at all: every one made
    assert first == (sorted(names.values()), []) and capsys.readouterr().err.count("repaired ") == 5
    good = (files / f"{names['good']}.json").read_bytes()
    (files / f"{names['missing']}.json").unlink()
    (files / f"{names['damaged']}.json").write_bytes(b'{"filename": ')
    padded = files / f"{names['padded']}.json"
    # valid JSON, a valid record, but longer than a record may be: the record check refuses it whole
    padded.write_bytes(padded.read_bytes().rstrip(b"\n").ljust(MAX_RECORD_BYTES + 1))
    (files / f"{names['invalid']}.json").write_bytes(json.dumps({**json.loads(good), "size": -1}).encode())
    (files / "broken-1.0-py3-none-any.whl").write_bytes(b"not a zip")  # a wheel that cannot be read
    (files / "gone-1.0-py3-none-any.whl.json").write_bytes(b"{}")  # a record without its wheel: not ours
    (files / ".hidden-1.0-py3-none-any.whl").write_bytes(b"not a zip")  # a dot file: not a wheel of the store
    (files / "folder-1.0-py3-none-any.whl").mkdir()  # not a file
    capsys.readouterr()
    repaired, refused = repair_store(store)
    assert (repaired, refused) == (sorted(names[p] for p in ("damaged", "invalid", "missing", "padded")),
                                   ["broken-1.0-py3-none-any.whl"])
    out, err = capsys.readouterr()
    broken = files / "broken-1.0-py3-none-any.whl.json"
    assert out == "" and err.splitlines() == [
        f"error: cannot repair {broken}: broken-1.0-py3-none-any.whl: not a readable zip file (File is not a zip "
        "file); rebuild or remove it",
        *(f"repaired {files / names[p]}.json from its wheel" for p in ("damaged", "invalid", "missing", "padded")),
    ]
    assert (files / f"{names['good']}.json").read_bytes() == good
    for project in ("missing", "damaged", "padded", "invalid"):
        assert json.loads((files / f"{names[project]}.json").read_bytes())["name"] == project
    assert padded.stat().st_size < 2000
    assert (files / "gone-1.0-py3-none-any.whl.json").read_bytes() == b"{}" and not broken.exists()
    assert sorted(p.name for p in files.iterdir() if p.name.startswith((".", "broken", "folder", "gone"))) == [
        ".hidden-1.0-py3-none-any.whl", "broken-1.0-py3-none-any.whl", "folder-1.0-py3-none-any.whl",
        "gone-1.0-py3-none-any.whl.json",
    ]
