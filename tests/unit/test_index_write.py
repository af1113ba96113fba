"""Writing the index incrementally, the records cache, and adopting wheels (no network, no processes)."""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path
from typing import Any

import pytest
from index_synth import add_kernel, adopt, make_wheel
from kernel_factory.config import Flags
from kernel_factory.errors import UsageError
from kernel_factory.index.command import (
    IndexArgs,
    index_with_adoption,
    remove_stale,
    resolve_paths,
    run_index,
)
from kernel_factory.index.state import STATE_FILE
from kernel_factory.nofollow import write_bytes
from kernel_factory.record import Record
from kernel_factory.store import check, load_records
from kernel_factory.store.catalog import CATALOG_FILE

CU = "torch27-cxx11-cu128-x86_64-linux"
CPU = "torch213-cxx11-cpu-x86_64-linux"


@pytest.fixture
def store(tmp_path: Path) -> Path:
    root = tmp_path / "public"
    for version in ("1.1.0", "1.1.2"):
        for variant in (CU, CPU, "torch-universal"):
            add_kernel(root, "img2grey", version, variant)
    return root


def ns(**kw: Any) -> IndexArgs:
    """IndexArgs with the options' flags (store, out, base_url, templates) given by their names."""
    renamed = {"out": "index_out"}
    given = {renamed.get(k, k): kw.pop(k) for k in ("store", "out", "base_url", "templates") if kw.get(k)}
    return IndexArgs(flags=Flags(given=given), **kw)


def test_incremental_build(store: Path) -> None:
    first = index_with_adoption(str(store), store, None, "http://127.0.0.1:8000").result
    assert first.written == first.pages > 0 and first.removed == 0
    again = index_with_adoption(str(store), store, None, "http://127.0.0.1:8000").result
    assert (again.written, again.unchanged, again.removed) == (0, again.pages, 0)
    mtimes = {p: p.stat().st_mtime_ns for p in (store / "simple").rglob("index.*")}
    add_kernel(store, "img2grey", "1.2.0", CPU)
    added = index_with_adoption(str(store), store, None, "http://127.0.0.1:8000").result
    # simple/img2grey (2), variants/torch213cpucxx11/simple/img2grey (2), projects/img2grey, the landing page
    assert added.written == 6
    changed = [p for p, m in mtimes.items() if p.stat().st_mtime_ns != m]
    assert sorted(p.relative_to(store).as_posix() for p in changed) == [
        "simple/img2grey/index.html",
        "simple/img2grey/index.json",
    ]
    # a different base URL changes the pages with pip commands only
    other = index_with_adoption(str(store), store, None, "https://kernels.example.com").result
    assert other.written == 2


def test_lost_state_renders_every_page(store: Path) -> None:
    index_with_adoption(str(store), store, None, "x")
    page = store / "simple/img2grey/index.html"
    page.write_bytes(b"")
    (store / STATE_FILE).unlink()  # as after a run killed before it wrote the state
    assert index_with_adoption(str(store), store, None, "x").result.written == 1
    assert page.read_bytes().startswith(b"<!DOCTYPE html>")


def test_stale_pages_removed(store: Path) -> None:
    add_kernel(store, "gone", "1.0", CU)
    index_with_adoption(str(store), store, None, "x")
    assert (store / "simple/gone/index.html").is_file()
    (store / "files" / "gone-1.0+torch27cu128cxx11-py3-none-linux_x86_64.whl").unlink()
    result = index_with_adoption(str(store), store, None, "x").result
    assert result.removed == 5  # simple/gone, variants/torch27cu128cxx11/simple/gone, projects/gone
    assert not (store / "simple/gone").exists()
    assert b"gone" not in (store / "simple/index.html").read_bytes()
    # a variant that no longer exists loses its whole tree
    for f in (store / "files").glob("*torch27cu128cxx11*"):
        f.unlink()
    index_with_adoption(str(store), store, None, "x")
    assert not (store / "variants/torch27cu128cxx11").exists()


def test_remove_stale_keeps_listed(tmp_path: Path) -> None:
    for name in ("a", "b"):
        (tmp_path / "simple" / name).mkdir(parents=True)
        (tmp_path / "simple" / name / "index.html").write_text(name)
    (tmp_path / "simple/b/notes.txt").write_text("user file")
    assert remove_stale(tmp_path, {"simple/a/index.html"}) == 1
    assert (tmp_path / "simple/b/notes.txt").exists()


def on_disk(store: Path) -> list[Record]:
    """The store's records as their files say (check.parse of each), sorted by file name."""
    files = store / "files"
    return [check.parse((files / n).read_bytes(), n.removesuffix(".json"), str(files / n))
            for n in sorted(os.listdir(files)) if n.endswith(".whl.json")]


def test_catalog(store: Path) -> None:
    first = load_records(store)
    catalog = store / "files" / CATALOG_FILE
    assert catalog.is_file()
    assert load_records(store) == first == on_disk(store)
    # a record replaced the way every writer does it (renamed over) is read again
    path = store / "files" / f"{first[0].filename}.json"
    raw = json.loads(path.read_bytes())
    raw["summary"] = "changed summary, longer than before"
    write_bytes(path, json.dumps(raw).encode())
    assert load_records(store)[0].summary == "changed summary, longer than before"
    # one edited in place leaves files/ as it was: a rescan reads it
    raw["summary"] = "edited in place"
    path.write_text(json.dumps(raw))
    assert load_records(store, rescan=True)[0].summary == "edited in place"
    # a damaged catalog is rebuilt from the records
    catalog.write_text("not a database")
    assert load_records(store)[0].summary == "edited in place"
    assert load_records(store) == on_disk(store)


def test_a_readers_catalog_is_a_copy_that_is_never_written(store: Path) -> None:
    """plan and build read through the catalog (load_records(readonly=True)): an in-memory copy of the file,
    brought up to date with the store, the file left as it was (a no-op build writes nothing)."""
    catalog = store / "files" / CATALOG_FILE
    assert load_records(store, readonly=True) == on_disk(store) and not catalog.exists()  # none: read all
    first = load_records(store)  # the index's way: the file made
    before = (catalog.read_bytes(), catalog.stat().st_mtime_ns)
    path = store / "files" / f"{first[0].filename}.json"
    raw = json.loads(path.read_bytes())
    raw["summary"] = "changed since the catalog was written"
    write_bytes(path, json.dumps(raw).encode())
    assert load_records(store, readonly=True)[0].summary == "changed since the catalog was written"
    assert (catalog.read_bytes(), catalog.stat().st_mtime_ns) == before
    catalog.write_text("not a database")  # a copy of a damaged file: empty, every record read
    assert load_records(store, readonly=True) == on_disk(store)


def test_record_without_wheel_not_listed(store: Path) -> None:
    before = len(load_records(store))
    wheel = next((store / "files").glob("*.whl"))
    wheel.unlink()
    assert len(load_records(store)) == before - 1


def test_nothing_changed_writes_nothing(store: Path) -> None:
    assert run_index(ns(store=str(store))) == 0
    before = {p: p.stat().st_mtime_ns for p in store.rglob("*") if p.is_file()}
    assert run_index(ns(store=str(store))) == 0
    assert {p: p.stat().st_mtime_ns for p in store.rglob("*") if p.is_file()} == before  # the lock file too


def test_leftovers_removed_after_an_unfinished_run(store: Path) -> None:
    assert run_index(ns(store=str(store))) == 0
    leftover = store / "simple/img2grey/.tmp-1-index.html"
    leftover.write_bytes(b"half")
    os.utime(leftover, (1, 1))
    assert run_index(ns(store=str(store))) == 0
    assert leftover.exists()  # the last run finished: the store is not walked
    (store / ".kernel-factory.lock").write_text("12345\n")  # the PID a killed run leaves in it
    assert run_index(ns(store=str(store))) == 0
    assert not leftover.exists()
    assert (store / ".kernel-factory.lock").read_text() == ""


def test_resolve_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no factory.toml here
    for var in ("KERNEL_FACTORY_STORE", "KERNEL_FACTORY_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    opts = resolve_paths(ns())
    assert opts.store.local is not None
    assert opts.store.local.resolve() == opts.out.resolve() == (tmp_path / "public").resolve()
    assert opts.base_url == "INDEX_URL"  # none given: the pages say so and fill in their own address
    opts = resolve_paths(ns(store=str(tmp_path), out=str(tmp_path / "o"), base_url="https://h/x/"))
    assert opts.out == tmp_path / "o" and opts.base_url == "https://h/x"
    with pytest.raises(UsageError, match="--out"):
        resolve_paths(ns(store="s3://bucket/prefix"))
    with pytest.raises(UsageError, match="--templates"):
        resolve_paths(ns(templates=str(tmp_path / "missing")))
    with pytest.raises(UsageError, match="--wheels"):
        resolve_paths(ns(wheels=(str(tmp_path / "missing"),)))


def test_deterministic_bytes(tmp_path: Path, store: Path) -> None:
    index_with_adoption(str(store), store, None, "x")
    other = tmp_path / "copy"
    (store / "files" / CATALOG_FILE).unlink()
    index_with_adoption(str(store), other, None, "x")
    for page in (store / "simple").rglob("index.*"):
        assert page.read_bytes() == (other / page.relative_to(store)).read_bytes()


# --- adoption -------------------------------------------------------------------------------------------------------


def test_adopt(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wheels = tmp_path / "wheels"
    make_wheel(wheels, "Helper_Lib", "2.0.1", summary="A helper", requires_python=">=3.10", requires_dist=["numpy"])
    make_wheel(wheels, "other", "1.0")
    (wheels / "not-a-wheel.whl").write_bytes(b"junk")
    (wheels / "broken-1.0-py3-none-any.whl").write_bytes(b"not a zip")
    store = tmp_path / "public"
    code = run_index(ns(store=str(store), wheels=(str(wheels),)))
    assert code == 3
    err = capsys.readouterr().err
    assert "not-a-wheel.whl: not a valid wheel file name" in err
    assert "broken-1.0-py3-none-any.whl: not a readable zip file" in err
    records = {r.filename: r for r in load_records(store)}
    r = records["helper_lib-2.0.1-py3-none-any.whl"]
    assert (r.kind, r.name, r.version, r.summary) == ("adopted", "Helper_Lib", "2.0.1", "A helper")
    assert r.requires_python == ">=3.10" and r.requires_dist == ("numpy",)
    assert r.upload_time.endswith("Z") and r.size == (wheels / r.filename).stat().st_size
    files = store / "files"
    copy = files / r.filename  # a copy, never a hard link: a write to wheels/ must not change the store
    assert copy.read_bytes() == (wheels / r.filename).read_bytes() and not os.path.samefile(copy, wheels / r.filename)
    assert copy.stat().st_mtime == (wheels / r.filename).stat().st_mtime  # the record's upload time, kept
    with zipfile.ZipFile(wheels / r.filename) as zf:
        assert (files / f"{r.filename}.metadata").read_bytes() == zf.read("helper_lib-2.0.1.dist-info/METADATA")
    assert (store / "simple/helper-lib/index.html").is_file()
    # adopting again does nothing
    (wheels / "not-a-wheel.whl").unlink()
    (wheels / "broken-1.0-py3-none-any.whl").unlink()
    again = adopt(store, wheels)
    assert again.adopted == [] and sorted(again.present) == sorted(records)


def test_wheels_into_a_file_url_store_as_into_its_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A ``file://`` store is the folder it names: --wheels adopts into it, the index lands in it (one parse)."""
    wheels = tmp_path / "wheels"
    make_wheel(wheels, "helper", "2.0.1")
    trees = []
    for name, given in (("folder", str(tmp_path / "folder")), ("url", (tmp_path / "url").as_uri())):
        assert run_index(ns(store=given, wheels=(str(wheels),))) == 0
        assert capsys.readouterr().out.startswith("adopted 1 wheel(s) from")
        root = tmp_path / name
        trees.append({p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
                      if p.is_file() and not p.name.startswith(".")})
    assert trees[0] == trees[1] and "simple/helper/index.html" in trees[0]
    assert "files/helper-2.0.1-py3-none-any.whl.json" in trees[0]


def test_adopt_refuses_mismatched_metadata(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wheels = tmp_path / "wheels"
    path, _ = make_wheel(wheels, "pkg", "1.0")
    path.rename(wheels / "pkg-1.1-py3-none-any.whl")
    result = adopt(tmp_path / "store", wheels)
    assert result.refused == ["pkg-1.1-py3-none-any.whl"]
    assert "METADATA Version '1.0' does not match" in capsys.readouterr().err
    assert not (tmp_path / "store/files/pkg-1.1-py3-none-any.whl.json").exists()


def test_adopt_refuses_different_file_of_same_name(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    make_wheel(a, "pkg", "1.0", summary="one")
    make_wheel(b, "pkg", "1.0", summary="two")
    store = tmp_path / "store"
    assert adopt(store, a).adopted == ["pkg-1.0-py3-none-any.whl"]
    (store / "files/pkg-1.0-py3-none-any.whl.json").unlink()  # the wheel stays, its record is gone
    assert adopt(store, b).refused == ["pkg-1.0-py3-none-any.whl"]


def test_index_of_a_missing_store_is_a_usage_error_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A mistyped --store used to give an empty index and exit 0; now one line, exit 2, and no folder made."""
    from kernel_factory.cli import main

    missing = tmp_path / "no-such-store"
    assert main(["index", "--store", str(missing)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"error: no store at {missing}: run `kernel-factory build` first, check --store (or `store` in the "
        "config), or pass --wheels DIR to index a folder of wheels"
    ]
    assert list(tmp_path.iterdir()) == []
