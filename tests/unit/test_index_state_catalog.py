"""The state file and the catalog are caches anyone may have written: each is checked before use."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from index_synth import add_kernel
from kernel_factory.index.command import build_index
from kernel_factory.index.state import STATE_FILE, parse, read_state
from kernel_factory.store.catalog import CATALOG_FILE, Catalog, CatalogDamaged
from kernel_factory.store.local import LocalStore

CPU = "torch213-cxx11-cpu-x86_64-linux"


@pytest.fixture
def site(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    store = tmp_path / "public"
    add_kernel(store, "img2grey", "1.1.2", CPU)
    catalog = Catalog(store / "files" / CATALOG_FILE)
    before = catalog.generation()
    touched = LocalStore(store).sync(catalog).touched
    build_index(store, catalog, None, "http://127.0.0.1:8000", before, touched)
    catalog.close()
    return store, json.loads((store / STATE_FILE).read_bytes())


def test_the_state_the_index_writes_passes(site: tuple[Path, dict[str, Any]]) -> None:
    store, state = site
    parsed = parse(state)
    assert parsed is not None and list(parsed.projects) == ["img2grey"]
    assert set(parsed.pages) == set(parsed.owners()) and len(parsed.pages) == 10
    assert read_state(store)[1] is None


@pytest.mark.parametrize(("change", "why"), [
    (lambda s: s["projects"]["img2grey"]["labels"].append("../../x"), "in a variant index the state does not name"),
    (lambda s: s["labels"].update({"../../x": "cpu"}), "label '../../x' is not a build variant's label"),
    (lambda s: s["projects"].update({"../x": s["projects"]["img2grey"]}), "project '../x' is not a normalised"),
    (lambda s: s["projects"]["img2grey"]["summary"].update(summary="a\x1b[8m"), "holds a text no record may hold"),
    (lambda s: s["projects"]["img2grey"]["summary"].update(wheels="1"), "wheels count that is not a whole"),
    (lambda s: s["pages"].update({"../../etc/passwd": [1, 2]}), "pages are not the ones its projects"),
    (lambda s: s["pages"].update({"index.html": [1, -2]}), "are not two whole numbers"),
    (lambda s: s.update(generation="a b"), "generation is not one a catalog gives"),
    (lambda s: s.update(fingerprint=5), "fingerprint is not a sha256"),
])  # fmt: skip
def test_a_hostile_state_is_refused_with_one_line(site: tuple[Path, dict[str, Any]], change: Any, why: str) -> None:
    store, state = site
    change(state)
    with pytest.raises(ValueError, match=why.replace("[", r"\[")):
        parse(state)
    (store / STATE_FILE).write_text(json.dumps(state))
    got, line = read_state(store)
    assert got is None and line is not None and line.startswith(f"{store / STATE_FILE}: not a valid ")
    assert line.endswith("; dropped, every page is rendered again")


def test_a_state_of_another_schema_is_dropped_without_a_word(site: tuple[Path, dict[str, Any]]) -> None:
    store, state = site
    (store / STATE_FILE).write_text(json.dumps({**state, "schema": 3}))
    assert read_state(store) == (None, None)


def test_a_catalog_with_a_trigger_or_a_view_is_made_again(tmp_path: Path) -> None:
    path = tmp_path / CATALOG_FILE
    Catalog(path).close()
    db = sqlite3.connect(path)
    db.execute("CREATE TRIGGER t AFTER INSERT ON records BEGIN UPDATE records SET label = '../' || new.label; END")
    db.execute("CREATE VIEW v AS SELECT * FROM records")
    db.commit()
    db.close()
    catalog = Catalog(path)
    assert catalog.note == f"{path}: holds triggers and views that no catalog holds; not used, rebuilt from the records"
    kinds = {kind for (kind,) in catalog.db.execute("SELECT type FROM sqlite_master")}
    assert kinds == {"table", "index"}
    catalog.close()
    assert Catalog(path).note is None  # the catalog made again is used as it is


def test_a_row_changed_behind_the_catalog_is_refused(tmp_path: Path) -> None:
    store = tmp_path / "public"
    record = add_kernel(store, "img2grey", "1.1.2", CPU)
    catalog = Catalog(store / "files" / CATALOG_FILE)
    LocalStore(store).sync(catalog)
    assert [r for _, rs in catalog.projects() for r in rs] == [record]
    catalog.close()
    db = sqlite3.connect(store / "files" / CATALOG_FILE)
    db.execute("UPDATE records SET label = '../../../x'")
    db.commit()
    db.close()
    catalog = Catalog(store / "files" / CATALOG_FILE)
    with pytest.raises(CatalogDamaged, match="a row's label '../../../x' or backend is not one a record may hold"):
        catalog.label_backends()
    with pytest.raises(CatalogDamaged, match="names another label or backend than its record"):
        list(catalog.projects())
    catalog.close()


def test_the_labels_of_rows_are_those_the_catalog_gives_once_it_holds_them() -> None:
    """Catalog.label_backends: an arch wheel's backend wins, else the least of the noarch ones; in label order."""
    def row(n: int, label: str | None, backend: str | None, noarch: int) -> tuple[Any, ...]:
        return (f"p-1.{n}-py3-none-any.whl", "p", f"k{n}", label, backend, noarch, "{}")

    rows = [
        row(0, "torch27cu128cxx11", None, 1), row(1, "torch27cu128cxx11", "rocm", 0),  # an arch wheel's wins
        row(2, "torch210cpucxx11", "cuda", 1), row(3, "torch210cpucxx11", "cpu", 1),  # the least of noarch ones
        row(4, "torch29xpu20252cxx11", None, 0), row(5, "torch29xpu20252cxx11", "xpu", 0),
        row(6, "cuda", None, 1), row(7, None, "cuda", 0),
    ]  # fmt: skip
    catalog = Catalog()
    catalog.apply_rows(rows, ())
    expected = {"cuda": None, "torch210cpucxx11": "cpu", "torch27cu128cxx11": "rocm", "torch29xpu20252cxx11": "xpu"}
    assert catalog.label_backends() == expected
    assert list(catalog.label_backends()) == sorted(expected)
