"""Benchmark the index: 20,000 records (200 projects x 10 versions x 10 variants), records only.

    python scripts/bench_index.py [--projects 200] [--versions 10] [--dir DIR]

Prints the full build, add-one-wheel and no-change times. Anchors on a
2-core machine (FACTS.md): dumb-pypi full 8-18 s, add one 9-10 s, no change 1.8 s.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import tempfile
import time
from pathlib import Path

from factory.index import index_store
from factory.store import Record
from factory.variants import parse

VARIANTS = (
    "torch27-cxx11-cu128-x86_64-linux",
    "torch28-cxx11-cu128-x86_64-linux",
    "torch29-cxx11-cu130-x86_64-linux",
    "torch210-cxx11-cu130-x86_64-linux",
    "torch29-cxx11-cu130-aarch64-linux",
    "torch210-cxx11-rocm70-x86_64-linux",
    "torch210-cxx11-cpu-x86_64-linux",
    "torch29-cxx11-xpu20252-x86_64-linux",
    "torch210-metal-aarch64-darwin",
    "torch-cuda",
)


def write_record(files: Path, project: str, version: str, variant: str) -> None:
    target = parse(variant)
    full = target.local_version(version)
    filename = f"{project.replace('-', '_')}-{full}-{target.tag}.whl"
    digest = hashlib.sha256(filename.encode()).hexdigest()
    record = Record(
        filename=filename, name=project, version=full, sha256=digest, size=1000,
        metadata_sha256=digest, requires_python=">=3.9", upload_time="2026-01-02T03:04:05Z",
        summary=f"{project} compute kernel", kind="kernel", kernel_version=version, label=target.label,
        variant=variant, repo_id=f"kernels-community/{project}", backend=target.backend,
        backend_version=target.backend_version, framework=target.framework,
        framework_version=target.framework_version, os=target.os, arch=target.arch,
        archs=("8.0", "9.0") if target.backend == "cuda" else (), license="Apache-2.0",
    )  # fmt: skip
    (files / filename).write_bytes(b"")
    (files / f"{filename}.metadata").write_bytes(b"")
    (files / f"{filename}.json").write_bytes(record.to_json())


def timed(label: str, root: Path) -> float:
    t0 = time.perf_counter()
    count, result = index_store(str(root), root, None, "http://127.0.0.1:8000")
    t2 = time.perf_counter()
    print(
        f"{label:<12} {t2 - t0:6.2f} s  ({count} records, "
        f"{result.pages} pages: {result.written} written, {result.unchanged} unchanged, {result.removed} removed)"
    )
    return t2 - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--projects", type=int, default=200)
    ap.add_argument("--versions", type=int, default=10)
    ap.add_argument("--dir", type=Path, help="work folder (default: a temporary one, removed after)")
    args = ap.parse_args()
    root = args.dir or Path(tempfile.mkdtemp(prefix="bench-index-"))
    files = root / "files"
    files.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    for p in range(args.projects):
        for v in range(args.versions):
            for variant in VARIANTS:
                write_record(files, f"kernel-{p:03d}", f"1.{v}.0", variant)
    print(
        f"store of {args.projects * args.versions * len(VARIANTS)} records written in {time.perf_counter() - t0:.1f} s"
    )
    try:
        timed("full build", root)
        timed("no change", root)
        write_record(files, "kernel-000", "2.0.0", VARIANTS[0])
        timed("add one", root)
        timed("no change", root)
    finally:
        if args.dir is None:
            shutil.rmtree(root)


if __name__ == "__main__":
    main()
