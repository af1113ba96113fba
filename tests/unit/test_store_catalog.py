"""What SQLite's errors on the catalog become: damage (rebuilt from the records) or exit 4 with the cause."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from kernel_factory.errors import EXIT_UNREACHABLE
from kernel_factory.store.catalog import Catalog, CatalogDamaged, rebuilt, sqlite_problem


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
