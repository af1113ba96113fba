"""The file check's first look at a wheel, taken from another process of the run (index/shards.py's workers
compare each wheel's size with its record as they read it): ``check_local`` takes a wheel's stat from
``first`` only for a wheel no check saw before, whose row still has the record key the worker read, and whose
``.metadata`` the listing shows; every other wheel is checked as in any run."""

from __future__ import annotations

import os
from contextlib import closing
from pathlib import Path

from index_synth import add_kernel
from kernel_factory.record import FILES
from kernel_factory.store.catalog import Catalog, local_catalog, record_key, refresh
from kernel_factory.store.filecheck import check_local

CPU = "torch213-cxx11-cpu-x86_64-linux"


def store(tmp_path: Path) -> tuple[Path, str]:
    root = tmp_path / "public"
    return root, add_kernel(root, "img2grey", "1.0", CPU).filename


def first_look(root: Path, catalog: Catalog, name: str, row_key: str | None = None) -> dict[str, tuple[str, str]]:
    """What a worker sends: the wheel's stat now, and the record key it read."""
    return {name: (record_key(os.stat(root / FILES / name)), row_key or catalog.keys()[name])}


def grow(wheel: Path) -> None:
    with open(wheel, "ab") as f:
        f.write(b"\0")


def test_a_first_look_is_taken_and_the_next_run_checks_the_wheel_again(tmp_path: Path) -> None:
    root, name = store(tmp_path)
    with closing(local_catalog(root)) as catalog:
        refresh(catalog, root / FILES)
        first = first_look(root, catalog, name)  # the worker saw the wheel whole
        grow(root / FILES / name)  # changed after that look
        found = check_local(root, catalog, first=first)
        assert (found.errors, found.notes, found.touched) == ([], [], set())
        again = check_local(root, catalog)  # its stat is not the one taken: looked at again
    size = (root / FILES / name).stat().st_size
    assert again.errors == [
        f"{root / FILES / name}: {size} bytes where its record says {size - 1}, not the wheel its record "
        f"{name}.json describes (changed outside kernel-factory); it is left out of the pages: put back the wheel "
        "the record describes, or run `kernel-factory index --repair` to record this wheel as it is"
    ]
    assert again.touched == {"img2grey"}


def test_a_wheel_a_check_saw_before_is_not_taken_from_a_first_look(tmp_path: Path) -> None:
    root, name = store(tmp_path)
    wheel = root / FILES / name
    with closing(local_catalog(root)) as catalog:
        refresh(catalog, root / FILES)
        assert check_local(root, catalog).errors == []  # seen, at its size
        wheel.write_bytes(bytes(reversed(wheel.read_bytes())))  # the same size, other bytes
        found = check_local(root, catalog, first=first_look(root, catalog, name))
    assert [line.split(": ", 1)[1].split(",")[0] for line in found.errors] == [
        "its sha256 differs from its record's"
    ]


def test_a_first_look_at_another_record_is_not_taken(tmp_path: Path) -> None:
    root, name = store(tmp_path)
    with closing(local_catalog(root)) as catalog:
        refresh(catalog, root / FILES)
        grow(root / FILES / name)
        found = check_local(root, catalog, first=first_look(root, catalog, name, row_key="1:2:3:4"))
    assert len(found.errors) == 1 and found.errors[0].startswith(f"{root / FILES / name}: ")
    assert "bytes where its record says" in found.errors[0]


def test_a_first_look_does_not_stand_for_a_missing_metadata(tmp_path: Path) -> None:
    root, name = store(tmp_path)
    metadata = root / FILES / f"{name}.metadata"
    kept = metadata.read_bytes()
    metadata.unlink()
    with closing(local_catalog(root)) as catalog:
        refresh(catalog, root / FILES)
        found = check_local(root, catalog, first=first_look(root, catalog, name))
    assert (found.errors, found.notes) == ([], [f"{metadata} was missing: written again from its wheel"])
    assert metadata.read_bytes() == kept
