"""A first index of many records reads and checks them in worker processes (store/local.py, ``PARALLEL_READ``):
the same records and the same lines as one process, a variant kernels does not define refused by its parser."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from index_synth import write_records
from kernel_factory.record import Record
from kernel_factory.store import local
from kernel_factory.store.local import LocalStore
from kernel_factory.variants import parse

pytestmark = pytest.mark.integration
LABELS = ("torch27-cxx11-cu128-x86_64-linux", "torch213-cxx11-cpu-x86_64-linux", "torch-cuda")


def record(project: int, version: int, variant: str) -> Record:
    t = parse(variant)
    full = t.local_version(f"1.{version}.0")
    return Record(
        filename=f"k{project:03d}-{full}-{t.tag}.whl", name=f"k{project:03d}", version=full, sha256="a" * 64, size=0,
        metadata_sha256="b" * 64, requires_python=None, upload_time="2026-01-02T03:04:05Z", kind="kernel",
        kernel_version=f"1.{version}.0", label=t.label, variant=variant, backend=t.backend,
        backend_version=t.backend_version, framework=t.framework, framework_version=t.framework_version,
        os=t.os, arch=t.arch,
    )  # fmt: skip


def read(store: Path) -> tuple[list[Record], list[tuple[str, str]]]:
    opened = LocalStore(store)
    catalog = opened.open_catalog(readonly=True)
    try:
        synced = opened.sync(catalog)
        return catalog.records(), synced.errors
    finally:
        catalog.close()


def test_records_read_by_workers_are_those_one_process_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    records = [record(p, v, lab) for p in range(12) for v in range(3) for lab in LABELS]
    bad = dataclasses.replace(records[0], variant="torch27-cxx11-cu999-x86_64-linux")  # not its label's variant
    write_records(tmp_path, [bad, *records[1:]])
    monkeypatch.setattr(local, "READ_BATCH", 10)
    one = read(tmp_path)
    monkeypatch.setattr(local, "PARALLEL_READ", 20)  # 108 records, in 11 batches over the workers
    monkeypatch.setattr("os.cpu_count", lambda: 4)
    many = read(tmp_path)
    assert many == one
    assert one[0] == sorted(records[1:], key=lambda r: r.filename)
    [(wheel, line)] = one[1]
    assert wheel == bad.filename
    assert "not a valid record (label 'torch27cu128cxx11' is not the label of variant " \
           "'torch27-cxx11-cu999-x86_64-linux')" in line, line  # the parser's answer: the workers check shapes only
