"""Catalog.apply and sync take their rows in batches inside one transaction; a checked row is known by its
filename and the digest of its text (store/catalog.py); the file check reads its rows in batches (filecheck.py)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from index_synth import add_kernel, kernel_record, make_wheel
from kernel_factory.record import Record
from kernel_factory.store.catalog import Catalog, CatalogDamaged, select_in, sync
from kernel_factory.store.filecheck import _QUERY
from kernel_factory.store.local import _VALUES, _read_in_worker

CPU = "torch213-cxx11-cpu-x86_64-linux"


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Record:
    folder = tmp_path_factory.mktemp("wheels")
    wheel, meta = make_wheel(folder, "img2grey", "1.1.2+torch213cpucxx11", "py3-none-linux_x86_64")
    return kernel_record(wheel, meta, "img2grey", "1.1.2", CPU, repo_id="kernels-community/img2grey")


def copies(good: Record, count: int, project: str = "img2grey") -> list[Record]:
    """``count`` records of ``project``, each its own version."""
    return [dataclasses.replace(good, name=project, version=f"1.{i}.0+torch213cpucxx11",
                                filename=f"{project}-1.{i}.0+torch213cpucxx11-py3-none-linux_x86_64.whl")
            for i in range(count)]  # fmt: skip


def test_a_checked_row_whose_text_changed_after_is_read_from_its_text(tmp_path: Path, good: Record) -> None:
    catalog = Catalog(tmp_path / "c.sqlite")
    catalog.apply([("k", good, None)], (), checked=True)
    later = json.loads(good.to_json())
    later["upload_time"] = "2030-01-01T00:00:00Z"
    catalog.db.execute("UPDATE records SET row=? WHERE filename=?", (json.dumps(later), good.filename))
    ((_project, (record,)),) = list(catalog.reader().projects())
    assert record.upload_time == "2030-01-01T00:00:00Z"  # not the record known from before the change
    assert dataclasses.replace(record, upload_time=good.upload_time) == good


def test_a_checked_row_unchanged_is_the_record_known(tmp_path: Path, good: Record) -> None:
    catalog = Catalog(tmp_path / "c.sqlite")
    catalog.apply([("k", good, None)], (), checked=True)
    ((_project, (record,)),) = list(catalog.reader().projects())
    assert record is good


def test_a_row_whose_text_is_not_text_is_damage(tmp_path: Path, good: Record) -> None:
    catalog = Catalog(tmp_path / "c.sqlite")
    catalog.apply([("k", good, None)], (), checked=True)
    catalog.db.execute("UPDATE records SET row=? WHERE filename=?", (b"\x00blob", good.filename))
    with pytest.raises(CatalogDamaged, match="are not records' JSON"):
        list(catalog.reader().projects())


def test_sync_writes_every_batch_and_drops_what_failed_in_one_generation(tmp_path: Path, good: Record) -> None:
    catalog = Catalog(tmp_path / "c.sqlite")
    old = copies(good, 3, "gone")  # rows of a project whose records are no longer listed
    records = copies(good, 1201)  # three batches of rows
    catalog.apply([("old-key", r, None) for r in [*old, records[7]]], ())  # records[7] fails its read below
    failing = {records[7].filename, records[1100].filename}
    listing = {r.filename: "key" for r in records}

    def read(wheels: list[str]):  # type: ignore[no-untyped-def]
        by_name = {r.filename: r for r in records}
        for wheel in wheels:
            yield wheel, None if wheel in failing else by_name[wheel], None

    before = catalog.generation()
    touched = sync(catalog, listing, read)
    assert touched == {"img2grey", "gone"}
    assert catalog.generation() != before
    assert sorted(catalog.keys()) == sorted(set(listing) - failing)
    assert catalog.count() == 1199


def test_sync_again_with_a_rescan_touches_only_the_changed_project(tmp_path: Path, good: Record) -> None:
    catalog = Catalog(tmp_path / "c.sqlite")
    records = copies(good, 600) + copies(good, 2, "other")
    listing = {r.filename: "key" for r in records}

    def read(wheels: list[str]):  # type: ignore[no-untyped-def]
        by_name = {r.filename: r for r in records}
        for wheel in wheels:
            yield wheel, by_name[wheel], None

    sync(catalog, listing, read)
    before = catalog.generation()
    assert sync(catalog, listing, read, rescan=True) == set()
    assert catalog.generation() == before
    records[-1] = dataclasses.replace(records[-1], upload_time="2030-01-01T00:00:00Z")
    assert sync(catalog, listing, read, rescan=True) == {"other"}
    assert catalog.generation() != before


def test_a_failed_read_rolls_back_every_batch(tmp_path: Path, good: Record) -> None:
    catalog = Catalog(tmp_path / "c.sqlite")
    records = copies(good, 1100)

    def read(wheels: list[str]):  # type: ignore[no-untyped-def]
        for i, record in enumerate(records):
            if i == 1050:
                raise OSError("a worker died")
            yield record.filename, record, None

    with pytest.raises(OSError, match="a worker died"):
        sync(catalog, {r.filename: "key" for r in records}, read)
    assert catalog.count() == 0
    assert catalog.keys() == {}


def test_the_file_check_reads_its_rows_in_order_across_batches(tmp_path: Path, good: Record) -> None:
    catalog = Catalog(tmp_path / "c.sqlite")
    records = copies(good, 1001)
    catalog.apply([("k", r, None) for r in records], ())
    names = sorted(r.filename for r in records)
    got = list(select_in(catalog.db, _QUERY, names))
    assert [row[0] for row in got] == names
    assert got[0][1:] == (good.size, good.sha256, good.metadata_sha256)


def test_a_worker_sends_each_record_whole_and_equal_strings_once(tmp_path: Path) -> None:
    root = tmp_path / "store"
    for version in ("1.1.0", "1.1.2"):
        add_kernel(root, "img2grey", version, CPU)
    folder = root / "files"
    wheels = sorted(p.name[:-5] for p in folder.glob("*.whl.json"))
    sent = _read_in_worker(str(folder), wheels)
    assert [wheel for wheel, *_ in sent] == wheels
    for _wheel, values, text, why in sent:
        assert why is None and text is not None and values is not None
        assert Record(*values) == Record.from_json(text.encode())
        assert values == _VALUES(Record.from_json(text.encode()))
    first, second = sent[0][1], sent[1][1]
    assert first is not None and second is not None
    kind = Record.__slots__.index("kind")
    assert first[kind] == second[kind] == "kernel" and first[kind] is second[kind]


def test_projects_asked_by_name_beyond_one_query(tmp_path: Path, good: Record) -> None:
    catalog = Catalog(tmp_path / "c.sqlite")
    records = [r for i in range(1201) for r in copies(good, 1, f"p{i:04d}")]
    catalog.apply([("k", r, None) for r in records], ())
    wanted = [f"p{i:04d}" for i in range(0, 1201, 2)] + ["absent"]  # 601 projects asked, 500 names a query
    got = list(catalog.projects(reversed(wanted)))
    assert [project for project, _records in got] == wanted[:-1]
    assert [r.filename for _project, (r,) in got] == [records[i].filename for i in range(0, 1201, 2)]


def test_a_catalog_is_changed_when_made_or_written_and_not_when_opened(tmp_path: Path, good: Record) -> None:
    path = tmp_path / "c.sqlite"
    made = Catalog(path)
    assert made.changed is True  # a new file: an S3 store puts it back
    made.close()
    opened = Catalog(path)
    assert opened.changed is False
    opened.apply([("k", good, None)], ())
    assert opened.changed is True
    opened.close()
    assert Catalog.copy_of(path).count() == 1


def test_a_copy_of_a_file_of_another_schema_is_empty(tmp_path: Path, good: Record) -> None:
    path = tmp_path / "c.sqlite"
    catalog = Catalog(path)
    catalog.apply([("k", good, None)], ())
    catalog.db.execute("UPDATE meta SET value='0' WHERE name='schema'")
    catalog.close()
    assert Catalog.copy_of(path).count() == 0
    assert Catalog.copy_of(tmp_path / "none.sqlite").count() == 0
