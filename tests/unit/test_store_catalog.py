"""The catalog: what SQLite's errors on it become (damage, rebuilt from the records, or exit 4 with the cause);
apply and sync take their rows in batches inside one transaction; a checked row is known by its filename and the
digest of its text; the file check's rows are read in batches (select_in)."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from pathlib import Path

import pytest
from index_synth import kernel_record, make_wheel
from kernel_factory.errors import EXIT_UNREACHABLE
from kernel_factory.record import Record
from kernel_factory.store.catalog import Catalog, CatalogDamaged, rebuilt, select_in, sqlite_problem, sync
from kernel_factory.store.filecheck import _QUERY


def test_a_damaged_file_is_damage() -> None:
    for text in ("database disk image is malformed", "file is not a database"):
        problem = sqlite_problem("c.sqlite", sqlite3.DatabaseError(text))
        assert isinstance(problem, CatalogDamaged) and str(problem) == f"c.sqlite: {text}"


def test_a_full_disk_and_a_held_database_exit_4_with_the_fix() -> None:
    full = sqlite_problem("c.sqlite", sqlite3.OperationalError("database or disk is full"))
    locked = sqlite_problem("c.sqlite", sqlite3.OperationalError("database is locked"))
    assert getattr(full, "exit_code", None) == EXIT_UNREACHABLE
    assert str(full) == "c.sqlite: database or disk is full; free space on that file system, then run again"
    assert getattr(locked, "exit_code", None) == EXIT_UNREACHABLE
    assert str(locked) == ("c.sqlite: database is locked; another process holds the catalog open (a reader's "
                           "transaction); end it, then run again")


def test_a_file_that_is_not_a_database_is_named_and_made_again(tmp_path: Path) -> None:
    path = tmp_path / ".catalog.sqlite"
    path.write_bytes(b"not a database, but long enough to be read as a header of one" * 100)
    catalog = Catalog(path)
    try:
        assert catalog.note == f"{path}: file is not a database; not used, rebuilt from the records"
        assert catalog.count() == 0
    finally:
        catalog.close()


def test_damage_found_in_a_run_is_warned_once_and_the_run_made_again(tmp_path: Path) -> None:
    catalog = Catalog(tmp_path / ".catalog.sqlite")
    warned: list[str] = []
    attempts: list[bool] = []

    def attempt(again: bool) -> int:
        attempts.append(again)
        if not again:
            raise sqlite3.DatabaseError("database disk image is malformed")
        return catalog.count()

    try:
        assert rebuilt(catalog, attempt, warned.append) == 0
    finally:
        catalog.close()
    assert attempts == [False, True]
    assert warned == [f"{tmp_path / '.catalog.sqlite'}: database disk image is malformed; the catalog is not "
                      "used, rebuilt from the records"]


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
