"""Benchmark: prune a realistic store, a `v1` branch of 50 commits with 26 variants each (1,300 wheels).

Every commit is a `1.0.K` with one wheel per variant; the wheels have the sizes of real kernel builds (CUDA and
ROCm tens of MB, CPU a few MB), written as sparse files (the index and prune read sizes, never the bytes), so the
store takes little disk. Prints the store's size, then the time and bytes of `prune --dry-run` and of
`prune --keep-per-major 10` (which keeps the 10 newest commits), each run as a user runs it (a new process).

    python scripts/bench_prune.py [--commits 50] [--keep 10] [--work DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from index_synth import kernel_record, make_wheel  # noqa: E402
from kernel_factory.nofollow import write_bytes  # noqa: E402
from kernel_factory.variants import parse  # noqa: E402

MB = 1_000_000
TORCH = ("28", "29", "210")
# 26 variants, as a kernel on the Hub builds them: CUDA (x86_64 and aarch64), ROCm, CPU
VARIANTS = (
    [f"torch{t}-cxx11-{cu}-{arch}-linux" for t in TORCH for cu in ("cu126", "cu128", "cu130")
     for arch in ("x86_64", "aarch64")]
    + [f"torch{t}-cxx11-rocm64-x86_64-linux" for t in TORCH]
    + [f"torch{t}-cxx11-cpu-x86_64-linux" for t in TORCH]
    + ["torch29-cxx11-cpu-aarch64-linux", "torch210-cxx11-cpu-aarch64-linux"]
)  # fmt: skip


def size_of(variant: str, commit: int) -> int:
    """A build's size: CUDA ~60 MB (aarch64 a little less), ROCm ~85 MB, CPU ~3 MB; a few % between commits."""
    base = 85 * MB if "rocm" in variant else 3 * MB if "cpu" in variant else 60 * MB
    if "aarch64" in variant:
        base = base * 9 // 10
    jitter = int(hashlib.sha256(f"{variant}{commit}".encode()).hexdigest()[:4], 16) % 5
    return base + base * jitter // 100


def synthesize(store: Path, commits: int) -> int:
    """The store of ``commits`` commits x 26 variants; its wheels' total size."""
    files = store / "files"
    files.mkdir(parents=True)
    work = Path(tempfile.mkdtemp(dir=files, prefix=".tmp-bench-"))
    total = 0
    for k in range(commits):
        version = f"1.0.{k}"
        when = f"2026-{1 + k // 28:02d}-{1 + k % 28:02d}T12:00:00Z"
        revision = hashlib.sha1(version.encode()).hexdigest()
        for variant in VARIANTS:
            target = parse(variant)
            wheel, meta = make_wheel(work, "activation", target.local_version(version), f"cp39-abi3-{target.platform}")
            record = kernel_record(wheel, meta, "activation", version, variant, repo_id="kernels-community/activation",
                                   upload_time=when)  # fmt: skip
            size = size_of(variant, k)
            dest = files / wheel.name
            os.replace(wheel, dest)
            os.truncate(dest, size)  # sparse: the size of a real build, without the disk
            data = json.loads(record.to_json())
            data.update(size=size, revision=revision, ref="v1")
            write_bytes(files / f"{wheel.name}.metadata", meta)
            write_bytes(files / f"{wheel.name}.json", (json.dumps(data, sort_keys=True) + "\n").encode())
            total += size
    shutil.rmtree(work)
    return total


def timed(*args: str) -> tuple[float, str]:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "kernel_factory", *args], capture_output=True, text=True)
    took = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{args} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return took, proc.stdout


def apparent(store: Path) -> int:
    return sum(p.stat().st_size for p in (store / "files").iterdir() if p.is_file() and not p.name.startswith("."))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--commits", type=int, default=50)
    p.add_argument("--keep", type=int, default=10)
    p.add_argument("--work", type=Path, default=None)
    args = p.parse_args()
    assert len(VARIANTS) == 26, len(VARIANTS)
    work = Path(tempfile.mkdtemp(prefix="bench-prune-", dir=args.work))
    try:
        store = work / "public"
        wheels = synthesize(store, args.commits)
        took, _ = timed("index", "--store", str(store), "-q")
        before = apparent(store)
        print(f"store: {args.commits} commits x {len(VARIANTS)} variants = {args.commits * len(VARIANTS)} wheels, "
              f"{wheels / 1e9:.2f} GB of wheels, {before / 1e9:.2f} GB in files/; first index {took:.2f} s")
        took, out = timed("prune", "--keep-per-major", str(args.keep), "--store", str(store), "--dry-run", "--json",
                          "-q")  # fmt: skip
        doc = json.loads(out)
        print(f"prune --dry-run: {len(doc['removed'])} wheels, {doc['bytes'] / 1e9:.2f} GB would go; {took:.2f} s")
        took, out = timed("prune", "--keep-per-major", str(args.keep), "--store", str(store), "--json", "-q")
        doc = json.loads(out)
        after = apparent(store)
        print(f"prune --keep-per-major {args.keep}: removed {len(doc['removed'])} wheels, freed "
              f"{(before - after) / 1e9:.2f} GB (reported {doc['bytes'] / 1e9:.2f} GB); {took:.2f} s; "
              f"{after / 1e9:.2f} GB left")
        took, _ = timed("index", "--store", str(store), "-q")
        print(f"index after the prune (nothing to do): {took:.2f} s")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
