"""The file check's rules for a missing ``.metadata`` (store/filecheck.py): written again only from the METADATA
its record names, an error line where the store cannot be written, and found again on the next run after a
check kept its state."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from index_synth import add_kernel
from kernel_factory.index.command import index_with_adoption
from kernel_factory.nofollow import write_bytes
from kernel_factory.record import FILES

CPU = "torch213-cxx11-cpu-x86_64-linux"
URL = "http://127.0.0.1:8000"


def age(folder: Path) -> None:
    past = time.time_ns() - 1_000_000_000
    os.utime(folder, ns=(past, past))


def run(store: Path) -> tuple[list[str], list[str]]:
    """One index run: (its error lines, its notes)."""
    done = index_with_adoption(store, store, None, URL)
    return done.errors, done.notes


@pytest.fixture
def store(tmp_path: Path) -> tuple[Path, Path]:
    """A store of one kernel wheel, indexed once; (the store, the wheel's .metadata)."""
    root = tmp_path / "public"
    record = add_kernel(root, "img2grey", "1.0", CPU)
    age(root / FILES)
    assert run(root) == ([], [])
    return root, root / FILES / f"{record.filename}.metadata"


def test_missing_metadata_whose_record_names_another_is_not_written_from_the_wheel(store: tuple[Path, Path]) -> None:
    root, meta = store
    record_path = meta.with_name(meta.name.removesuffix(".metadata") + ".json")
    record = json.loads(record_path.read_bytes())
    record["metadata_sha256"] = "ab" * 32  # not the wheel's METADATA
    write_bytes(record_path, json.dumps(record).encode())  # renamed into place, as every writer does
    meta.unlink()
    damaged, notes = run(root)
    assert damaged == [f"{meta} is missing, and the wheel's METADATA is not the one its record names; run "
                       "`kernel-factory index --repair`"]
    assert notes == []
    assert not meta.exists()


def test_missing_metadata_in_a_store_that_cannot_be_written_is_one_error_line(
    store: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, meta = store
    meta.unlink()
    real = os.access
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: False if mode & os.W_OK else real(path, mode, **kw))
    damaged, notes = run(root)  # read-only: the catalog in memory, nothing written in files/
    assert damaged == [f"{meta} is missing (pip gets a 404 for it); the store is read-only here: run "
                       "`kernel-factory` where the store can be written"]
    assert not meta.exists()


def test_metadata_deleted_after_a_check_kept_its_state_is_found_next_run(store: tuple[Path, Path]) -> None:
    root, meta = store
    data = meta.read_bytes()
    assert run(root) == ([], [])  # a run that changed nothing: the check keeps files/'s state
    meta.unlink()
    age(root / FILES)
    damaged, notes = run(root)
    assert damaged == []
    assert notes == [f"{meta} was missing: written again from its wheel"]
    assert meta.read_bytes() == data
    assert run(root) == ([], [])
