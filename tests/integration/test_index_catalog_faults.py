"""The catalog (files/.catalog.sqlite) under faults: a kill at any instant of its rewrite, a full disk, a reader.

The catalog is a cache of the records. SIGTERM (docker stop, a cancelled CI job) or kill -9 of the main process
alone while it writes thousands of rows must leave a store that a plain rerun indexes (exit 0, the pages
byte-identical to those of an uninterrupted run), with no hand repair. A catalog that SQLite finds damaged is
named in one warning and rebuilt in the same run. A full disk while it is written, and another process holding
a read transaction, give exit 4 and one line naming the cause.
"""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import hostile as h
import pytest
from index_synth import index_pages, records_only
from support import tmpfs_at

WHEELS = 1000  # fewer than index/command.py's PARALLEL_RECORDS: the main process writes every row
KILLS = 3  # of each signal: early, middle and late in the rows
CATALOG = "files/.catalog.sqlite"


def start(*args: str | Path) -> subprocess.Popen[str]:
    env = {**os.environ, "KERNEL_FACTORY_LOCK_WAIT": "0"}
    return subprocess.Popen([sys.executable, "-m", "kernel_factory", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)


def run(*args: str | Path) -> tuple[int, str]:
    proc = start(*args)
    _, err = proc.communicate(timeout=600)
    return proc.returncode, err


def errors(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("error: ")]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, bytes], int]:
    """A store of WHEELS adopted wheels, its pages as an uninterrupted run renders them, and its catalog's size."""
    root = tmp_path_factory.mktemp("catalog-faults")
    wheels = h.small_wheels(root / "wheels", WHEELS)
    store = root / "store"
    code, err = run("index", "--store", store, "--wheels", wheels)
    assert code == 0, err
    fresh = root / "fresh"
    records_only(store, fresh)
    code, err = run("index", "--store", fresh)
    assert code == 0, err
    return store, index_pages(fresh), (fresh / CATALOG).stat().st_size


def kill_during_rewrite(store: Path, sig: int, at: int) -> tuple[subprocess.Popen[str], bool]:
    """Start a first index of a records-only store; once its catalog file holds ``at`` bytes (its rows are being
    written), send ``sig`` to the main process alone. (the process, whether it was still running then)."""
    proc = start("index", "--store", store)
    catalog = store / CATALOG
    deadline = time.monotonic() + 300
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            size = catalog.stat().st_size
        except FileNotFoundError:
            size = 0
        if size >= at:
            os.kill(proc.pid, sig)
            return proc, True
        time.sleep(0.0005)
    return proc, False


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "kill-9"])
def test_killed_during_catalog_rewrite_then_a_plain_run_renders_the_same_pages(
    reference: tuple[Path, dict[str, bytes], int], tmp_path: Path, sig: int
) -> None:
    store, expected, full = reference
    for i in range(KILLS):
        out = tmp_path / f"out{i}"
        records_only(store, out)
        at = 8192 + i * (full - 8192) // KILLS  # from the first rows to most of them
        proc, killed = kill_during_rewrite(out, sig, at)
        _, err = proc.communicate(timeout=300)
        assert killed, f"the index ended before its catalog held {at} bytes: {err}"
        if sig == signal.SIGTERM and proc.returncode != 0:  # it may have finished the rows meanwhile
            assert proc.returncode == 143 and err.splitlines()[-1] == "terminated", err
        code, err = run("index", "--store", out)
        assert code == 0, f"kill {i} at {at} bytes: {err}"
        assert "bug" not in err
        assert index_pages(out) == expected, f"kill {i} at {at} bytes"
        shutil.rmtree(out)


def test_damaged_catalog_is_named_once_and_rebuilt_in_the_same_run(
    reference: tuple[Path, dict[str, bytes], int], tmp_path: Path
) -> None:
    store, expected, _ = reference
    out = tmp_path / "out"
    records_only(store, out)
    code, err = run("index", "--store", out)
    assert code == 0, err
    catalog = out / CATALOG
    data = bytearray(catalog.read_bytes())
    data[4096 * 3 : 4096 * 6] = os.urandom(4096 * 3)  # pages of rows, as a torn write leaves them
    catalog.write_bytes(bytes(data))
    (out / "files" / f"{sorted(p.name for p in (out / 'files').glob('*.whl'))[0]}.json").touch()  # a change to sync
    code, err = run("index", "--store", out, "--rescan")
    assert code == 0, err
    warnings = [line for line in err.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 1 and str(catalog) in warnings[0] and "rebuilt from the records" in warnings[0], err
    assert index_pages(out) == expected
    code, err = run("index", "--store", out)
    assert code == 0 and "warning" not in err, err


def test_catalog_held_by_a_reader_exits_4_naming_it(
    reference: tuple[Path, dict[str, bytes], int], tmp_path: Path
) -> None:
    store, _, _ = reference
    out = tmp_path / "out"
    records_only(store, out)
    code, err = run("index", "--store", out)
    assert code == 0, err
    wheel = sorted((out / "files").glob("*.whl"))[0]
    for path in (wheel, Path(f"{wheel}.json"), Path(f"{wheel}.metadata")):
        path.unlink()  # a row to remove: the run writes the catalog
    reader = subprocess.Popen(
        [sys.executable, "-c", "import sqlite3, sys, time; db = sqlite3.connect(sys.argv[1], isolation_level=None); "
         "db.execute('BEGIN'); db.execute('SELECT COUNT(*) FROM records').fetchone(); print('held', flush=True); "
         "time.sleep(120)", str(out / CATALOG)], stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert reader.stdout is not None and reader.stdout.readline() == "held\n"
        code, err = run("index", "--store", out)
    finally:
        reader.kill()
        reader.communicate()
    assert code == 4, err
    assert errors(err) == [f"error: {out / CATALOG}: database is locked; another process holds the catalog open "
                           "(a reader's transaction); end it, then run again"], err
    code, err = run("index", "--store", out)
    assert code == 0, err
    assert wheel.name not in (out / "simple" / "index.html").read_text()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    with tmpfs_at(tmp_path / "tmpfs", "256m") as path:
        yield path


def test_full_disk_while_the_catalog_is_written_exits_4_and_a_rerun_completes(
    reference: tuple[Path, dict[str, bytes], int], small_disk: Path
) -> None:
    store, expected, full = reference
    out = small_disk / "store"
    records_only(store, out)
    filler = small_disk / "filler"
    free = os.statvfs(small_disk).f_bavail * os.statvfs(small_disk).f_frsize
    with open(filler, "wb") as f:  # what is left holds the start of the catalog, not all of its rows
        f.write(b"\0" * (free - full // 2))
    code, err = run("index", "--store", out)
    assert code == 4, err
    assert len(errors(err)) == 1 and errors(err)[0].startswith(f"error: {out / CATALOG}: database or disk is full; "
                                                               "free space"), err  # fmt: skip
    assert "bug" not in err
    filler.unlink()
    code, err = run("index", "--store", out)
    assert code == 0, err
    with sqlite3.connect(out / CATALOG) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert db.execute("SELECT COUNT(*) FROM records").fetchone() == (WHEELS,)
    assert index_pages(out) == expected
