"""Benchmark the index: 20,000 records (200 projects x 10 versions x 10 variants), records only.

    python scripts/bench_index.py [--projects 200] [--versions 10] [--dir DIR]

Prints the full build, add-one-wheel and no-change times of kernel-factory and,
measured in the same run on the same file names, of dumb-pypi (the baseline,
`pip install dumb-pypi`; `make bench` installs it), with the ratios. dumb-pypi
writes PEP 503 pages only (no PEP 691 JSON, no PEP 658 hashes, no per-variant
indexes), so the comparison flatters it.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kernel_factory.index.build import index_store
from kernel_factory.record import Record
from kernel_factory.variants import parse

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


def dumb_pypi(label: str, names: list[str], previous: list[str] | None, work: Path) -> float | None:
    """One dumb-pypi run (full, or incremental against ``previous``); None if dumb-pypi is not installed."""
    if shutil.which("dumb-pypi") is None and not (Path(sys.executable).parent / "dumb-pypi").exists():
        return None
    exe = shutil.which("dumb-pypi") or str(Path(sys.executable).parent / "dumb-pypi")
    current = work / f"{label.replace(' ', '-')}.txt"
    current.write_text("\n".join(names) + "\n")
    cmd = [exe, "--package-list", str(current), "--output-dir", str(work / "out"), "--packages-url", "../../files/",
           "--no-generate-timestamp"]
    if previous is not None:
        prev = work / f"{label.replace(' ', '-')}.previous.txt"
        prev.write_text("\n".join(previous) + "\n")
        cmd += ["--previous-package-list", str(prev)]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    took = time.perf_counter() - t0
    print(f"{'dumb-pypi ' + label:<22} {took:6.2f} s")
    return took


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
    ours: dict[str, float] = {}
    base: dict[str, float | None] = {}
    work = Path(tempfile.mkdtemp(prefix="bench-dumb-pypi-"))
    try:
        before = sorted(p.name for p in files.glob("*.whl"))
        ours["full build"] = timed("full build", root)
        ours["no change"] = timed("no change", root)
        write_record(files, "kernel-000", "2.0.0", VARIANTS[0])
        after = sorted(p.name for p in files.glob("*.whl"))
        ours["add one"] = timed("add one", root)
        timed("no change", root)
        base["full build"] = dumb_pypi("full build", before, None, work)
        base["no change"] = dumb_pypi("no change", before, before, work)
        base["add one"] = dumb_pypi("add one", after, before, work)
    finally:
        shutil.rmtree(work)
        if args.dir is None:
            shutil.rmtree(root)
    for step, took in ours.items():
        other = base.get(step)
        if other is None:
            print(f"{step:<12} kernel-factory {took:.2f} s (dumb-pypi not installed: no baseline)")
        else:
            print(f"{step:<12} kernel-factory {took:.2f} s, dumb-pypi {other:.2f} s: {other / took:.1f}x faster")


if __name__ == "__main__":
    main()
