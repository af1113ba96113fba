"""Pages after any sequence of adds, removals and yanks are byte-identical to a full rebuild (a property test)."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import replace
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from index_synth import index_pages, write_records
from kernel_factory.index.command import index_with_adoption
from kernel_factory.record import Record
from kernel_factory.store.catalog import CATALOG_FILE
from kernel_factory.variants import parse

VARIANTS = (
    "torch27-cxx11-cu128-x86_64-linux",
    "torch213-cxx11-cpu-x86_64-linux",
    "torch210-cxx11-rocm70-x86_64-linux",
    "torch-cuda",
    "torch-universal",
    None,  # an adopted wheel
)


def record(project: str, version: str, variant: str | None) -> Record:
    if variant is None:
        fields: dict[str, object] = {"kind": "adopted"}
        full, tag = version, "py3-none-any"
    else:
        t = parse(variant)
        full, tag = t.local_version(version), t.tag
        fields = {"kind": "kernel", "kernel_version": version, "label": t.label, "variant": variant,
                  "backend": t.backend, "backend_version": t.backend_version, "framework": t.framework,
                  "framework_version": t.framework_version, "os": t.os, "arch": t.arch}  # fmt: skip
    return Record(
        filename=f"{project}-{full}-{tag}.whl", name=project, version=full, sha256="a" * 64, size=1,
        metadata_sha256="b" * 64, requires_python=None, upload_time="2026-01-02T03:04:05Z",
        summary=f"{project} {version}", **fields,  # type: ignore[arg-type]
    )  # fmt: skip


wheel = st.builds(
    record, st.sampled_from(["alpha", "beta", "gamma"]), st.sampled_from(["1.0", "1.1", "2.0"]),
    st.sampled_from(VARIANTS),
)  # fmt: skip
# add a wheel, or remove / yank / unyank the n-th wheel there (modulo how many there are)
step = st.tuples(st.sampled_from(["add", "add", "remove", "yank", "unyank"]), wheel, st.integers(0, 99))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(st.lists(step, min_size=1, max_size=4), min_size=1, max_size=5))
def test_incremental_equals_full_rebuild(steps: list[list[tuple[str, Record, int]]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store, fresh = Path(tmp) / "store", Path(tmp) / "fresh"
        files = store / "files"
        files.mkdir(parents=True)
        index_with_adoption(str(store), store, None, "http://h")
        for batch in steps:  # each batch of changes, then an incremental run
            for action, r, n in batch:
                there = sorted(files.glob("*.whl"))
                if action != "add" and there:
                    r = Record.from_json((files / f"{there[n % len(there)].name}.json").read_bytes())
                if action == "add":
                    write_records(store, [r])
                elif action == "remove":
                    (files / r.filename).unlink(missing_ok=True)
                    (files / f"{r.filename}.json").unlink(missing_ok=True)
                elif (files / f"{r.filename}.json").exists():
                    old = Record.from_json((files / f"{r.filename}.json").read_bytes())
                    new = replace(old, yanked="bad build" if action == "yank" else False)
                    tmp_record = files / f".tmp-{r.filename}.json"
                    tmp_record.write_bytes(new.to_json())
                    tmp_record.replace(files / f"{r.filename}.json")  # records are renamed into place
            index_with_adoption(str(store), store, None, "http://h")
            # a full rebuild from the records alone: no catalog, a fresh index root
            shutil.rmtree(fresh, ignore_errors=True)
            fresh.mkdir()
            shutil.copytree(files, fresh / "files", ignore=shutil.ignore_patterns(CATALOG_FILE))
            index_with_adoption(str(fresh), fresh, None, "http://h")
            assert index_pages(store) == index_pages(fresh)
