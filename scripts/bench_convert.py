"""Benchmark: variant folders -> wheels, kernel-factory against wheel.wheelfile.WheelFile.

Makes N variant folders, each with one large .so of realistic content (a real
ELF header, slices of real machine code from torch's libtorch_cpu.so or the
system's libraries, and a low-entropy pseudo-random "fatbin" part; all
deterministic), then converts them

- with kernel-factory's ``convert`` (digest check, audit, wheel) in parallel
  processes, one per core, and
- with the baseline: ``wheel.wheelfile.WheelFile`` at its default compression,
  one process, writing the same files,

and prints throughput, speedup, wheel sizes and peak RSS; then converts one
large (1 GB by default) .so alone for peak RSS.

    python scripts/bench_convert.py                   # 8 x 300 MB, then 1 x 1024 MB
    python scripts/bench_convert.py --size-mb 50 --variants 4 --big-mb 200   # quick
"""

from __future__ import annotations

import argparse
import glob
import json
import multiprocessing
import os
import random
import resource
import shutil
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kernel_factory import variants
from kernel_factory.verify import digest
from kernel_factory.wheel.convert import WheelInput, convert

MB = 1 << 20
SPAWN = multiprocessing.get_context("spawn")
HEADER_ELF = Path("/usr/lib/x86_64-linux-gnu/libz.so.1")


def machine_code_pool() -> bytes:
    """Real machine code to sample from: libtorch_cpu.so when installed, else the system's libraries."""
    torch_lib = Path(sys.prefix) / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    candidates = sorted(torch_lib.glob("torch/lib/libtorch_cpu.so"))
    if candidates:
        with open(candidates[0], "rb") as f:
            return f.read(256 * MB)
    pool = bytearray()
    for path in sorted(glob.glob("/usr/lib/x86_64-linux-gnu/*.so*")):
        if os.path.isfile(path) and not os.path.islink(path):
            pool += Path(path).read_bytes()
        if len(pool) > 128 * MB:
            break
    return bytes(pool)


def low_entropy(n: int, seed: int) -> bytes:
    """Fatbin-like bytes: a skewed 16-symbol alphabet (about 4 bits of entropy a byte)."""
    table = bytes((b * 37) % 16 * (1 if b % 3 else 16) for b in range(256))
    return random.Random(seed).randbytes(n).translate(table)


def write_so(path: Path, size: int, pool: bytes, seed: int) -> None:
    rng = random.Random(seed)
    with open(path, "wb") as f:
        written = f.write(HEADER_ELF.read_bytes())
        fatbin_share = int(size * 0.3)
        while written < size - fatbin_share:
            n = min(rng.randrange(1, 8) * MB, size - fatbin_share - written)
            start = rng.randrange(0, max(1, len(pool) - n))
            written += f.write(pool[start : start + n])
        while written < size:
            written += f.write(low_entropy(min(16 * MB, size - written), rng.randrange(1 << 30)))


def make_variant(root: Path, variant: str, size: int, pool: bytes, seed: int) -> Path:
    vdir = root / "build" / variant
    (vdir / "bench").mkdir(parents=True)
    (vdir / "__init__.py").write_text("from ._ops import ops\n")
    (vdir / "_ops.py").write_text("ops = None\n")
    (vdir / "bench" / "__init__.py").write_text("from .. import *\n")
    so = vdir / "_bench_0123abc.abi3.so"
    write_so(so, size, pool, seed)
    so.chmod(0o755)
    meta = {"name": "bench", "id": "_bench_0123abc", "version": 1, "license": "Apache-2.0", "python-depends": [],
            "backend": {"type": "cpu", "archs": []},
            "digest": {"algorithm": "sha256", "files": digest.compute(vdir)}}
    (vdir / "metadata.json").write_text(json.dumps(meta))
    return vdir


def peak_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def factory_job(vdir: str, out: str) -> tuple[int, float, float]:
    cpu = cpu_seconds()
    inp = WheelInput(
        variant_dir=Path(vdir), target=variants.parse(Path(vdir).name), kernel_version="1.0.0",
        repo_name="bench", repo_id="bench/bench", source="bench/bench", revision="0" * 40, ref="v1",
        commit_time=1_767_225_600, readme="# bench\n\nA benchmark kernel.\n",
    )
    whl, _, record = convert(inp, Path(out))
    return record.size, peak_rss_mb(), cpu_seconds() - cpu


def baseline_job(vdirs: list[str], out: str) -> tuple[int, float, float]:
    from wheel.wheelfile import WheelFile

    cpu = cpu_seconds()
    total = 0
    for i, vdir in enumerate(vdirs):
        path = Path(out) / f"bench-1.0.0+v{i}-cp39-abi3-linux_x86_64.whl"
        with WheelFile(path, "w") as wf:
            for root, _dirs, files in sorted(os.walk(vdir)):
                for name in sorted(files):
                    full = os.path.join(root, name)
                    wf.write(full, "bench/" + os.path.relpath(full, vdir))
        total += path.stat().st_size
    return total, peak_rss_mb(), cpu_seconds() - cpu


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=int, default=300, help="size of each variant's .so (default 300)")
    ap.add_argument("--variants", type=int, default=8, help="number of variant folders (default 8)")
    ap.add_argument("--big-mb", type=int, default=1024, help="size of the single-.so peak-RSS run; 0 to skip")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes (default: cores)")
    ap.add_argument("--dir", type=Path, default=None, help="work folder (default: a temporary one, removed)")
    ap.add_argument("--skip-baseline", action="store_true", help="only run kernel-factory")
    args = ap.parse_args(argv)

    work = Path(args.dir or tempfile.mkdtemp(prefix="bench-convert-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        pool = machine_code_pool()
        names = [f"torch2{10 + i}-cxx11-cpu-x86_64-linux" for i in range(args.variants)]
        t = time.perf_counter()
        vdirs = [make_variant(work / "src", name, args.size_mb * MB, pool, seed=i) for i, name in enumerate(names)]
        big = (make_variant(work / "big", "torch213-cxx11-cpu-x86_64-linux", args.big_mb * MB, pool, seed=99)
               if args.big_mb else None)
        del pool  # workers are spawned, not forked: their RSS is their own
        total_in = sum(f.stat().st_size for v in vdirs for f in v.rglob("*") if f.is_file())
        print(f"made {len(vdirs)} variants, {total_in / MB:.0f} MB in {time.perf_counter() - t:.1f} s "
              f"({args.jobs} workers, {os.cpu_count()} cores)")

        (work / "kf").mkdir()
        t = time.perf_counter()
        with ProcessPoolExecutor(args.jobs, mp_context=SPAWN) as ex:
            results = list(ex.map(factory_job, map(str, vdirs), [str(work / "kf")] * len(vdirs)))
        kf_time = time.perf_counter() - t
        kf_size = sum(r[0] for r in results)
        kf_rss = max(r[1] for r in results)
        kf_cpu = sum(r[2] for r in results)
        print(f"kernel-factory: {kf_time:6.1f} s  {total_in / MB / kf_time:7.1f} MB/s  "
              f"wheels {kf_size / MB:7.1f} MB  peak RSS/worker {kf_rss:5.0f} MB  CPU {kf_cpu:6.1f} s")

        if not args.skip_baseline:
            (work / "base").mkdir()
            t = time.perf_counter()
            with ProcessPoolExecutor(1, mp_context=SPAWN) as ex:
                base_size, base_rss, base_cpu = ex.submit(
                    baseline_job, list(map(str, vdirs)), str(work / "base")).result()
            base_time = time.perf_counter() - t
            print(f"WheelFile:      {base_time:6.1f} s  {total_in / MB / base_time:7.1f} MB/s  "
                  f"wheels {base_size / MB:7.1f} MB  peak RSS        {base_rss:5.0f} MB  CPU {base_cpu:6.1f} s")
            print(f"speedup {base_time / kf_time:.2f}x wall, {base_cpu / kf_cpu:.2f}x per CPU second "
                  f"(on {args.jobs} idle cores about {base_cpu / kf_cpu * min(args.jobs, len(vdirs)):.1f}x wall); "
                  f"size ratio {kf_size / base_size:.3f}; load average {os.getloadavg()[0]:.1f}")
            shutil.rmtree(work / "base")
        shutil.rmtree(work / "kf")
        shutil.rmtree(work / "src")

        if big is not None:
            t = time.perf_counter()
            with ProcessPoolExecutor(1, mp_context=SPAWN) as ex:
                size, rss, _cpu = ex.submit(factory_job, str(big), str(work / "big-out")).result()
            dt = time.perf_counter() - t
            print(f"one {args.big_mb} MB .so: {dt:.1f} s, wheel {size / MB:.0f} MB, peak RSS {rss:.0f} MB")
    finally:
        if args.dir is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
