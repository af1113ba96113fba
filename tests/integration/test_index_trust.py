"""The index believes what is on disk, not what it remembers (its catalog, its state file).

Each test changes the store or the output behind the tool's back, runs the installed tool again, and checks
the result twice: the pages byte for byte against a fresh render of the same records (a copy of the store's
files/ without catalog or state, indexed into an empty folder), and real pip against a served copy.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest
from index_synth import add_kernel, index_pages, make_wheel
from kernel_factory.store.catalog import CATALOG_FILE
from support import cached_venv, clean_env, http_server, kf, run

pytestmark = pytest.mark.integration

CPU = "torch213-cxx11-cpu-x86_64-linux"
CU = "torch27-cxx11-cu128-x86_64-linux"
CPU_LABEL = "torch213cpucxx11"
HELPER = "helper_lib-1.0-py3-none-any.whl"


def make_site(tmp: Path) -> tuple[Path, Path]:
    """A store (its own index root) of kernel builds and of wheels adopted from a folder; (store, folder)."""
    store = tmp / "public"
    for version in ("1.1.0", "1.1.2"):
        for variant in (CPU, CU):
            add_kernel(store, "img2grey", version, variant)
    wheels = tmp / "wheels"
    make_wheel(wheels, "helper-lib", "1.0", summary="a helper")
    make_wheel(wheels, "helper-lib", "0.9", summary="a helper")
    done = kf("index", "--wheels", wheels, "--store", store, "--out", store, cwd=tmp)
    assert done.returncode == 0, done.stderr
    return store, wheels


def fresh_render(store: Path, tmp: Path) -> dict[str, bytes]:
    """The pages a first run makes from the store's wheels, .metadata and records alone."""
    copy = tmp / "fresh"
    shutil.rmtree(copy, ignore_errors=True)
    (copy / "files").mkdir(parents=True)
    for path in (store / "files").iterdir():
        if not path.name.startswith("."):
            shutil.copy2(path, copy / "files" / path.name)
    done = kf("index", "--store", copy, "--out", copy, cwd=tmp)
    assert done.returncode == 0, done.stderr
    return index_pages(copy)


def pip_download(tmp: Path, root: Path, requirement: str, index: str = "simple") -> list[str]:
    """The files real pip downloads for ``requirement`` from ``root`` served over HTTP (hashes checked)."""
    python = cached_venv("pip", "pip>=26")
    dest = tmp / "dl"
    shutil.rmtree(dest, ignore_errors=True)
    with http_server(root) as url:
        run(python, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-d", dest,
            "--index-url", f"{url}/{index}/", requirement, env=clean_env())  # fmt: skip
    return sorted(p.name for p in dest.iterdir())


def summary(done: subprocess.CompletedProcess[str]) -> str:
    return next(line for line in done.stdout.splitlines() if line.startswith("index:"))


def test_pages_deleted_or_edited_by_hand_are_written_again(tmp_path: Path) -> None:
    store, _ = make_site(tmp_path)
    before = index_pages(store)
    count = len(before)
    for top in ("simple", "variants"):
        shutil.rmtree(store / top)
    (store / "index.html").unlink()
    done = kf("index", "--store", store, "--out", store, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    gone = sum(1 for path in before if not path.startswith("projects/"))  # projects/ was left
    assert f"{count} page(s): {gone} written, {count - gone} unchanged, 0 removed" in summary(done)
    assert index_pages(store) == before == fresh_render(store, tmp_path)

    (store / "simple" / "img2grey" / "index.html").unlink()  # one page gone
    page = store / "variants" / CPU_LABEL / "simple" / "img2grey" / "index.html"
    text = page.read_text()
    page.write_text("\n".join(line for line in text.splitlines() if "1.1.2" not in line))  # a link dropped
    done = kf("index", "--store", store, "--out", store, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"{count} page(s): 2 written, {count - 2} unchanged, 0 removed" in summary(done)
    assert index_pages(store) == before
    assert pip_download(tmp_path, store, f"img2grey==1.1.2+{CPU_LABEL}") == [
        f"img2grey-1.1.2+{CPU_LABEL}-py3-none-linux_x86_64.whl"]  # fmt: skip
    assert pip_download(tmp_path, store, "img2grey", f"variants/{CPU_LABEL}/simple") == [
        f"img2grey-1.1.2+{CPU_LABEL}-py3-none-linux_x86_64.whl"]  # fmt: skip


def test_a_record_edited_in_place_with_its_mtime_restored_is_read_by_rescan(tmp_path: Path) -> None:
    store, _ = make_site(tmp_path)
    record = store / "files" / f"img2grey-1.1.2+{CPU_LABEL}-py3-none-linux_x86_64.whl.json"
    st = record.stat()
    data = record.read_bytes()
    yanked = data.replace(b'"yanked": false', b'"yanked": true ').replace(b'"yanked":false', b'"yanked":true ')
    assert yanked != data and len(yanked) == len(data)
    with open(record, "r+b") as f:  # the same inode, the same size
        f.write(yanked)
    os.utime(record, ns=(st.st_atime_ns, st.st_mtime_ns))  # and the same mtime (a restore from a backup)
    done = kf("index", "--store", store, "--out", store, "--rescan", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "data-yanked" in (store / "variants" / CPU_LABEL / "simple" / "img2grey" / "index.html").read_text()
    assert index_pages(store) == fresh_render(store, tmp_path)
    # pip leaves a yanked release out unless it is pinned: the variant root now gives 1.1.0
    assert pip_download(tmp_path, store, "img2grey", f"variants/{CPU_LABEL}/simple") == [
        f"img2grey-1.1.0+{CPU_LABEL}-py3-none-linux_x86_64.whl"]  # fmt: skip


def test_a_wheel_whose_record_was_deleted_is_named_and_repair_makes_it(tmp_path: Path) -> None:
    store, _ = make_site(tmp_path)
    before = index_pages(store)
    (store / "files" / f"{HELPER}.json").unlink()
    done = kf("index", "--store", store, "--out", store, cwd=tmp_path)
    assert done.returncode == 3
    assert f"error: {store / 'files' / HELPER}: the wheel {HELPER} has no record, so the index leaves it out; run " \
           "`kernel-factory index --repair` to make its record from the wheel, or delete the wheel" \
           in done.stderr.splitlines()
    done = kf("index", "--store", store, "--out", store, "--repair", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "repaired 1 record(s)" in done.stdout.splitlines()
    assert index_pages(store) == before == fresh_render(store, tmp_path)
    assert pip_download(tmp_path, store, "helper-lib==1.0") == [HELPER]


def test_adopting_a_deleted_wheel_again_heals_the_store_without_an_error(tmp_path: Path) -> None:
    store, wheels = make_site(tmp_path)
    before = index_pages(store)
    (store / "files" / HELPER).unlink()
    done = kf("index", "--wheels", wheels, "--store", store, "--out", store, cwd=tmp_path)
    assert (done.returncode, done.stderr) == (0, "")
    assert f"adopted 1 wheel(s) from {wheels}, 1 already in the store" in done.stdout.splitlines()
    assert index_pages(store) == before == fresh_render(store, tmp_path)
    assert pip_download(tmp_path, store, "helper-lib==1.0") == [HELPER]


def test_a_catalog_with_a_trigger_is_rebuilt_and_nothing_is_written_outside(tmp_path: Path) -> None:
    store, _ = make_site(tmp_path)
    outside = sorted(p.name for p in tmp_path.iterdir())
    db = sqlite3.connect(store / "files" / ".catalog.sqlite")
    db.execute("CREATE TRIGGER t AFTER INSERT ON records BEGIN UPDATE records SET label = '../../../..' || "
               "new.label, project = '../../x' WHERE filename = new.filename; END")  # fmt: skip
    db.commit()
    db.close()
    make_wheel(tmp_path / "more", "helper-lib", "1.1", summary="a helper")  # a new row: the trigger fires
    done = kf("index", "--wheels", tmp_path / "more", "--store", store, "--out", store, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"warning: {store / 'files' / '.catalog.sqlite'}: holds triggers that no catalog holds; not used, " \
           "rebuilt from the records" in done.stderr.splitlines()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "more") == outside
    assert index_pages(store) == fresh_render(store, tmp_path)
    assert pip_download(tmp_path, store, "helper-lib==1.1") == ["helper_lib-1.1-py3-none-any.whl"]


def test_a_catalog_row_that_fails_the_record_checks_is_not_used(tmp_path: Path) -> None:
    store, _ = make_site(tmp_path)
    before = index_pages(store)
    db = sqlite3.connect(store / "files" / ".catalog.sqlite")
    row = json.loads(db.execute("SELECT row FROM records WHERE project = 'img2grey' LIMIT 1").fetchone()[0])
    hostile = {k: ("../../x-1.0" if isinstance(v, str) and v.startswith("1.1.") and "+" in v else v)
               for k, v in row.items()}  # fmt: skip
    assert hostile != row
    db.execute("UPDATE records SET row = ? WHERE project = 'img2grey'", (json.dumps(hostile),))
    db.commit()
    db.close()
    (store / ".index-state.json").unlink()  # every project is read from the catalog again
    done = kf("index", "--store", store, "--out", store, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"warning: {store / 'files' / '.catalog.sqlite'}: the row of 'img2grey-")
    assert "is not a valid record (version '../../x-1.0' is not a valid version (PEP 440))" in line
    assert line.endswith("; the catalog is not used, rebuilt from the records")
    assert index_pages(store) == before == fresh_render(store, tmp_path)
    assert pip_download(tmp_path, store, f"img2grey==1.1.2+{CPU_LABEL}") == [
        f"img2grey-1.1.2+{CPU_LABEL}-py3-none-linux_x86_64.whl"]  # fmt: skip


def test_a_hostile_state_file_is_dropped_and_nothing_outside_is_removed(tmp_path: Path) -> None:
    store, _ = make_site(tmp_path)
    before = index_pages(store)
    victim = tmp_path / "victim" / "simple" / "img2grey" / "index.html"
    victim.parent.mkdir(parents=True)
    victim.write_text("keep me")
    state_path = store / ".index-state.json"
    state = json.loads(state_path.read_bytes())
    state["projects"]["img2grey"]["labels"].append("../../victim")  # variants/../../victim = outside the root
    state["labels"]["../../victim"] = "cpu"
    state_path.write_text(json.dumps(state))
    record = store / "files" / f"img2grey-1.1.2+{CPU_LABEL}-py3-none-linux_x86_64.whl.json"
    data = record.read_bytes()
    record.unlink()
    record.write_bytes(data)  # a new inode: the record changed, its project is rendered again
    done = kf("index", "--store", store, "--out", store, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [f"warning: {state_path}: not a valid index state (label '../../victim' is "
                                        "not a build variant's label); dropped, every page is rendered again"]
    assert victim.read_text() == "keep me"
    assert index_pages(store) == before == fresh_render(store, tmp_path)
    assert pip_download(tmp_path, store, f"img2grey==1.1.0+{CPU_LABEL}") == [
        f"img2grey-1.1.0+{CPU_LABEL}-py3-none-linux_x86_64.whl"]  # fmt: skip


def test_an_s3_stores_index_out_folder_and_catalog_object_are_checked(tmp_path: Path, s3: Any) -> None:
    local, _ = make_site(tmp_path)
    expected = index_pages(local)
    s3.create_bucket(Bucket="trust")
    for path in sorted((local / "files").iterdir()):
        if not path.name.startswith("."):
            s3.put_object(Bucket="trust", Key=f"p/files/{path.name}", Body=path.read_bytes())
    out = tmp_path / "out"
    done = kf("index", "--store", "s3://trust/p", "--out", out, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert index_pages(out) == expected

    (out / "simple" / "img2grey" / "index.html").unlink()  # a page of the index-out folder gone
    done = kf("index", "--store", "s3://trust/p", "--out", out, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert ": 1 written," in summary(done)
    assert index_pages(out) == expected

    # another writer of the bucket replaces the catalog object: rows keyed by the records' real ETags
    catalog = tmp_path / "catalog.sqlite"
    catalog.write_bytes(s3.get_object(Bucket="trust", Key=f"p/files/{CATALOG_FILE}")["Body"].read())
    db = sqlite3.connect(catalog)
    db.execute("UPDATE records SET label = '../../../../x', project = '../../../x' WHERE project = 'img2grey'")
    db.commit()
    db.close()
    s3.put_object(Bucket="trust", Key=f"p/files/{CATALOG_FILE}", Body=catalog.read_bytes())
    (out / ".index-state.json").unlink()
    done = kf("index", "--store", "s3://trust/p", "--out", out, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("warning: ") and line.endswith("; the catalog is not used, rebuilt from the records")
    assert not (tmp_path.parent / "x").exists() and not (tmp_path / "x").exists()
    assert index_pages(out) == expected
    shutil.copytree(local / "files", out / "files", ignore=shutil.ignore_patterns(".*"))
    assert pip_download(tmp_path, out, f"img2grey==1.1.2+{CPU_LABEL}") == [
        f"img2grey-1.1.2+{CPU_LABEL}-py3-none-linux_x86_64.whl"]  # fmt: skip
