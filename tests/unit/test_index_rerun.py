"""Re-running the index: files/ unchanged is not listed, --wheels folders are diffed, nothing is missed."""

from __future__ import annotations

import os
import time
from contextlib import closing
from pathlib import Path
from types import SimpleNamespace

import pytest
from index_synth import add_kernel, make_wheel
from kernel_factory.index.command import index_with_adoption
from kernel_factory.nofollow import write_bytes
from kernel_factory.record import FILES
from kernel_factory.store import local
from kernel_factory.store.catalog import FILES_STATE, Catalog
from kernel_factory.store.local import TICK_NS, LocalStore, folder_state

CPU = "torch213-cxx11-cpu-x86_64-linux"
URL = "http://127.0.0.1:8000"


def age(folder: Path) -> None:
    """Make a folder's last change a second old (as it is when a person reruns a command)."""
    past = time.time_ns() - 1_000_000_000
    os.utime(folder, ns=(past, past))


def run(store: Path, *folders: Path, rescan: bool = False) -> tuple[list[str], list[tuple[Path, object]], int]:
    """One index run: (damaged lines, [(folder, AdoptResult)], records)."""
    done = index_with_adoption(store, store, None, URL, folders, rescan=rescan)
    return done.errors, list(done.adopted), done.count


def refresh(catalog: Catalog, files: Path, rescan: bool = False) -> tuple[dict[str, str] | None, set[str]]:
    """The local store's sync of ``catalog``: (its listing, or None where nothing was listed; projects touched)."""
    synced = LocalStore(files.parent).sync(catalog, rescan)
    return synced.listing, synced.touched


@pytest.fixture
def store(tmp_path: Path) -> Path:
    root = tmp_path / "public"
    for version in ("1.0", "1.1"):
        add_kernel(root, "img2grey", version, CPU)
    LocalStore(root).open_catalog().close()  # the catalog file is made in files/ on the first run
    age(root / FILES)
    return root


def test_folder_state_waits_out_a_fresh_change(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a").write_text("a")
    mtime = tmp_path.stat().st_mtime_ns
    now, slept = [mtime + 5_000_000], []  # a clock of the test's own: 5 ms after the change

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += TICK_NS

    clock = SimpleNamespace(time_ns=lambda: now[0], sleep=sleep)
    monkeypatch.setattr(local, "time", clock)
    state = folder_state(tmp_path)  # changed within a clock tick: a same-tick change would not show, so it waits
    assert slept == [(TICK_NS - 5_000_000) / 1e9]  # out the rest of the tick, then stat'ed again
    assert state == folder_state(tmp_path) and slept == [(TICK_NS - 5_000_000) / 1e9]  # a tick old: no wait
    monkeypatch.undo()
    (tmp_path / "b").write_text("b")
    assert folder_state(tmp_path) != state
    assert folder_state(tmp_path / "missing") is None


def test_unchanged_files_folder_is_not_listed(store: Path) -> None:
    assert run(store)[0] == []
    with closing(LocalStore(store).open_catalog()) as catalog:
        assert catalog.meta(FILES_STATE) == folder_state(store / FILES)
        assert refresh(catalog, store / FILES) == (None, set())  # nothing listed, nothing touched


def test_a_record_renamed_over_is_read_again(store: Path) -> None:
    run(store)
    record = next((store / FILES).glob("*.whl.json"))
    data = record.read_bytes().replace(b"img2grey compute kernel", b"renamed over")
    assert data != record.read_bytes()
    write_bytes(record, data)  # how every writer replaces a record
    age(store / FILES)
    with closing(LocalStore(store).open_catalog()) as catalog:
        listing, touched = refresh(catalog, store / FILES)
        assert listing is not None and touched == {"img2grey"}
        assert any(r.summary == "renamed over" for r in catalog.records())


def test_an_edit_in_place_is_read_on_rescan(store: Path) -> None:
    run(store)
    record = next((store / FILES).glob("*.whl.json"))
    data = record.read_bytes().replace(b"img2grey compute kernel", b"edited in place")
    with open(record, "r+b") as f:  # same inode, same folder entries: files/ keeps its stat
        f.write(data)
        f.truncate()
    with closing(Catalog(store / FILES / ".catalog.sqlite")) as catalog:
        assert refresh(catalog, store / FILES)[0] is None
        assert refresh(catalog, store / FILES, rescan=True)[1] == {"img2grey"}
        assert any(r.summary == "edited in place" for r in catalog.records())


def test_a_damaged_record_is_named_on_every_run(store: Path) -> None:
    record = next((store / FILES).glob("*.whl.json"))
    write_bytes(record, b"{not json")
    age(store / FILES)
    first, _, count = run(store)
    second, _, again = run(store)
    assert len(first) == len(second) == 1 and "damaged" in first[0] and first == second
    assert count == again == 1


def test_wheels_folder_is_diffed_against_the_last_run(store: Path, tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    names = [make_wheel(wheels, "helper", f"1.{n}")[0].name for n in range(3)]
    age(wheels)
    _, [(_, first)], count = run(store, wheels)
    assert sorted(first.adopted) == names and first.present == [] and count == 5  # type: ignore[attr-defined]
    age(wheels)
    _, [(_, second)], _ = run(store, wheels)
    assert second.adopted == [] and sorted(second.present) == names  # type: ignore[attr-defined]
    # a new wheel in the folder: only it is adopted
    new = make_wheel(wheels, "helper", "2.0")[0].name
    age(wheels)
    _, [(_, third)], count = run(store, wheels)
    assert third.adopted == [new] and sorted(third.present) == names and count == 6  # type: ignore[attr-defined]
    # a wheel gone from the store (not from the folder) is adopted again
    for path in (store / FILES).glob(f"{names[0]}*"):
        path.unlink()
    age(store / FILES)
    _, [(_, fourth)], count = run(store, wheels)
    assert fourth.adopted == [names[0]] and count == 6  # type: ignore[attr-defined]


def test_a_refused_wheel_is_reported_on_every_run(store: Path, tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    make_wheel(wheels, "helper", "1.0")
    (wheels / "broken-1.0-py3-none-any.whl").write_bytes(b"not a zip")
    age(wheels)
    for _ in range(2):
        _, [(_, result)], _ = run(store, wheels)
        assert result.refused == ["broken-1.0-py3-none-any.whl"]  # type: ignore[attr-defined]
        age(wheels)
