"""Benchmark: a tagged git repository of build variants -> wheels, `kernel-factory to-wheel` against a baseline.

Corpora (each: N variant folders committed to a git repository and tagged v1.0.0):

- cpu: real CPU machine code, slices of torch's libtorch_cpu.so (the torch in this venv);
- cuda: real CUDA fatbins, slices of libcublasLt.so.13 from the `nvidia-cublas` wheel
  (downloaded once with `pip download` into the cache folder, outside git);
- synthetic: the older mix (machine code plus a low-entropy pseudo-random "fatbin" part).

Each .so is a small real ELF file (libz.so.1) followed by its slice, so the audit reads a
valid ELF; the slices start at different offsets, so every variant differs.

Contenders, each one process tree timed the same way (wall clock, peak RSS of the whole tree
and of its largest process, sampled from /proc every 20 ms):

- kernel-factory: `kernel-factory to-wheel REPO 1.0.0` (reads the tag, verifies the digests,
  audits, writes the wheels), one worker per core;
- baseline: `wheel.wheelfile.WheelFile` at its default compression (zlib 6), one process,
  writing the same files from the checked-out tag.

Each contender runs three times, interleaved (kernel-factory, baseline, kernel-factory, ...), every
run alike; each run's wall and CPU time (user + system of the whole tree) is printed, and every
figure of a contender (wall, CPU, peak RSS, wheel size) comes from one run, its fastest. CPU is
printed beside wall for both: the baseline is one process, kernel-factory uses every core. Every
kernel-factory run must give the same bytes.

Then a single 1 GB .so alone (peak RSS). A missing baseline is a failure, not a skipped row.
kernel-factory's per-stage breakdown and bytes per codec come from one more run with
KERNEL_FACTORY_STAGES on (docs/convert.md), counted in no figure.

    python scripts/bench_convert.py                       # cpu, cuda, synthetic; then 1 GB
    python scripts/bench_convert.py --corpus cuda --big-mb 0
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

MB = 1 << 20
HEADER_ELF = Path("/usr/lib/x86_64-linux-gnu/libz.so.1")
CUBLAS = "nvidia-cublas==13.10.0.20"
CUBLAS_LIB = "libcublasLt.so.13"
COMMIT_DATE = "2026-01-01T00:00:00Z"
LAYOUT = 2  # in the cached repositories' names: bump when make_repo writes something else
BIN = Path(sys.executable).parent
RUNS = 3  # each contender runs this many times, interleaved; the fastest counts
STAGES = ("fetch", "verify", "hash", "compress", "wait", "write", "audit")


def torch_cpu_lib() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("torch")  # the CPU build `make .venv/.torch` installs; not imported
    path = Path(spec.origin if spec and spec.origin else "torch").parent / "lib" / "libtorch_cpu.so"
    if not path.is_file():
        raise SystemExit(f"error: {path} is missing; install torch 2.13 CPU (make .venv/.torch)")
    return path


def cublas_lib(cache: Path) -> Path:
    """libcublasLt.so.13 from the nvidia-cublas wheel, fetched once into ``cache`` with pip."""
    lib = cache / CUBLAS_LIB
    if lib.is_file():
        return lib
    cache.mkdir(parents=True, exist_ok=True)
    wheels = sorted(cache.glob("nvidia_cublas-*.whl"))
    if not wheels:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", CUBLAS, "-d", str(cache)],
                       check=True)
        wheels = sorted(cache.glob("nvidia_cublas-*.whl"))
    with zipfile.ZipFile(wheels[-1]) as zf:
        member = next(n for n in zf.namelist() if n.endswith("/" + CUBLAS_LIB))
        with zf.open(member) as src, open(f"{lib}.part", "wb") as dst:
            shutil.copyfileobj(src, dst, MB)
    os.replace(f"{lib}.part", lib)
    return lib


def low_entropy(n: int, seed: int) -> bytes:
    """Fatbin-like bytes: a skewed 16-symbol alphabet (about 4 bits of entropy a byte)."""
    table = bytes((b * 37) % 16 * (1 if b % 3 else 16) for b in range(256))
    return random.Random(seed).randbytes(n).translate(table)


def write_slice(dest: Path, index: int, *, lib: Path, size: int, count: int) -> None:
    """libz.so.1, then ``size`` bytes of ``lib`` starting where variant ``index`` of ``count`` starts."""
    total = lib.stat().st_size
    start = (total - size) * index // max(1, count - 1) if total > size else 0
    with open(dest, "wb") as out, open(lib, "rb") as src:
        written = out.write(HEADER_ELF.read_bytes())
        src.seek(start)
        while written < size:
            chunk = src.read(min(16 * MB, size - written)) or (src.seek(0), src.read(min(16 * MB, size - written)))[1]
            written += out.write(chunk)


def write_synthetic(dest: Path, index: int, *, pool_lib: Path, size: int, offset: int = 0) -> None:
    rng = random.Random(index + offset)
    pool_size = pool_lib.stat().st_size
    with open(dest, "wb") as f, open(pool_lib, "rb") as pool:
        written = f.write(HEADER_ELF.read_bytes())
        fatbin_share = int(size * 0.3)
        while written < size - fatbin_share:
            n = min(rng.randrange(1, 8) * MB, size - fatbin_share - written)
            pool.seek(rng.randrange(0, max(1, pool_size - n)))
            written += f.write(pool.read(n))
        while written < size:
            written += f.write(low_entropy(min(16 * MB, size - written), rng.randrange(1 << 30)))


def git(repo: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_DATE": COMMIT_DATE, "GIT_COMMITTER_DATE": COMMIT_DATE,
           "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@example.org",
           "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@example.org"}
    subprocess.run(["git", "-C", str(repo), *args], check=True, env=env, stdout=subprocess.DEVNULL)


def make_repo(repo: Path, names: list[str], fill: Callable[[Path, int], None]) -> Path:
    """A git repository with one variant folder per name (``fill(path, index)`` writes its .so), tagged v1.0.0."""
    if (repo / ".done").is_file():
        return repo
    from kernel_factory.verify import digest

    shutil.rmtree(repo, ignore_errors=True)
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / "README.md").write_text("# bench\n\nA benchmark kernel.\n")
    for i, name in enumerate(names):
        vdir = repo / "build" / name
        (vdir / "bench").mkdir(parents=True)
        (vdir / "__init__.py").write_text("from ._ops import ops\n")
        (vdir / "_ops.py").write_text("ops = None\n")
        (vdir / "bench" / "__init__.py").write_text("from .. import *\n")
        so = vdir / "_bench_0123abc.abi3.so"
        fill(so, i)
        so.chmod(0o755)
        meta = {"name": "bench", "id": "_bench_0123abc", "version": 1, "license": "Apache-2.0",
                "python-depends": [], "backend": {"type": "cpu", "archs": []},
                "digest": {"algorithm": "sha256", "files": digest.compute(vdir)}}
        (vdir / "metadata.json").write_text(json.dumps(meta))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "bench")
    git(repo, "tag", "v1.0.0")
    (repo / ".git" / "info" / "exclude").write_text(".done\n")
    (repo / ".done").write_text("")
    return repo


@dataclass
class Run:
    seconds: float
    wheel_bytes: int
    tree_rss_mb: float  # peak of the summed RSS of the process tree (sampled)
    max_proc_mb: float  # the largest single process (sampled)
    tree_pss_mb: float  # peak of the summed PSS of the tree (sampled)
    cpu_seconds: float  # user + system time of the whole tree (RUSAGE_CHILDREN)


def process_tree(root: int) -> Iterator[int]:
    """``root`` and its living descendants (each thread's /proc ``children`` file); one that ended meanwhile is
    left out with its own."""
    todo = [root]
    while todo:
        pid = todo.pop()
        try:
            for task in os.listdir(f"/proc/{pid}/task"):
                todo.extend(int(c) for c in Path(f"/proc/{pid}/task/{task}/children").read_text().split())
        except (FileNotFoundError, ProcessLookupError, ValueError):
            continue
        yield pid


def _tree_rss_kb(root: int) -> tuple[int, int, int]:
    """(summed RSS of ``root`` and all its descendants, the largest one's RSS, summed PSS), in KiB.

    The RSS sum counts pages that forked workers share with their parent once per process; PSS
    splits them among the processes that share them."""
    total, largest, pss = 0, 0, 0
    for pid in process_tree(root):
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
                    largest = max(largest, int(line.split()[1]))
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    pss += int(line.split()[1])
        except (FileNotFoundError, ProcessLookupError, ValueError):
            continue
    return total, largest, pss


def cpu_seconds(root: int) -> float:
    """User + system CPU seconds of process ``root`` and its living descendants, and of the children they
    reaped."""
    total, tick = 0.0, os.sysconf("SC_CLK_TCK")
    for pid in process_tree(root):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        total += sum(int(x) for x in fields[11:15]) / tick  # utime stime cutime cstime
    return total


def timed(cmd: list[str], out: Path, env: dict[str, str] | None = None) -> Run:
    """Run ``cmd`` (writing wheels into ``out``) as one process tree; wall time, peak tree RSS."""
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = usage.ru_utime + usage.ru_stime
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = [0, 0, 0]

    def sample() -> None:
        while proc.poll() is None:
            total, largest, pss = _tree_rss_kb(proc.pid)
            peak[0], peak[1], peak[2] = max(peak[0], total), max(peak[1], largest), max(peak[2], pss)
            time.sleep(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    _, err = proc.communicate()
    seconds = time.perf_counter() - t
    sampler.join()
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = usage.ru_utime + usage.ru_stime - cpu
    if proc.returncode != 0:
        raise SystemExit(f"error: {' '.join(cmd[:3])} failed ({proc.returncode}): {err.decode()[-2000:]}")
    wheels = sorted(out.glob("*.whl"))
    if not wheels:
        raise SystemExit(f"error: {' '.join(cmd[:3])} wrote no wheel")
    return Run(seconds, sum(w.stat().st_size for w in wheels), peak[0] / 1024, peak[1] / 1024, peak[2] / 1024, cpu)


def baseline_main(repo: str, out: str) -> int:
    """The baseline contender: every variant folder -> a wheel with wheel.WheelFile (zlib 6)."""
    from wheel.wheelfile import WheelFile

    for i, vdir in enumerate(sorted((Path(repo) / "build").iterdir())):
        path = Path(out) / f"bench-1.0.0+v{i}-cp39-abi3-linux_x86_64.whl"
        with WheelFile(path, "w") as wf:
            for root, _dirs, files in sorted(os.walk(vdir)):
                for name in sorted(files):
                    full = os.path.join(root, name)
                    wf.write(full, "bench/" + os.path.relpath(full, vdir))
    return 0


def stage_table(path: Path) -> str:
    rows = [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []
    if not rows:
        return "  (no stage timings recorded)"
    sums = {s: sum(r.get(s, 0.0) for r in rows) for s in STAGES}
    total = sum(sums.values()) or 1.0
    cells = "  ".join(f"{s} {sums[s]:5.2f} s ({sums[s] / total:4.0%})" for s in STAGES)
    keys = sorted({k for r in rows for k in r if k.startswith("bytes ")})
    codecs = {k.removeprefix("bytes "): sum(r.get(k, 0) for r in rows) for k in keys}
    everything = sum(codecs.values()) or 1
    shares = "  ".join(f"{k} {v / MB:.0f} MB ({v / everything:.0%})" for k, v in codecs.items())
    return f"  stages, summed over {len(rows)} jobs: {cells}\n  bytes of large files per codec: {shares or '-'}"


def kf_cmd(repo: Path, out: Path, jobs: int) -> list[str]:
    return [str(BIN / "kernel-factory"), "to-wheel", str(repo), "1.0.0", "-o", str(out), "--jobs", str(jobs)]


def warm(repo: Path) -> None:
    """Read the repository's files once, so that neither contender pays for the disk."""
    for path in sorted(repo.rglob("*")):
        if path.is_file():
            with open(path, "rb") as f:
                while f.read(16 * MB):
                    pass


def bench_corpus(label: str, repo: Path, work: Path, jobs: int, total_in: int) -> dict[str, float]:
    warm(repo)
    stages = work / f"stages-{label}.jsonl"
    stages.unlink(missing_ok=True)
    env = {**os.environ, "KERNEL_FACTORY_STAGES": str(stages)}
    base_cmd = [sys.executable, __file__, "--baseline-job", str(repo), str(work / "base")]
    kfs: list[Run] = []
    bases: list[Run] = []
    first: dict[str, bytes] = {}
    same = True
    for n in range(RUNS):  # interleaved, all alike; the fastest run of each counts (the machine may be shared)
        kfs.append(timed(kf_cmd(repo, work / "kf", jobs), work / "kf"))
        wheels = {w.name: w.read_bytes() for w in sorted((work / "kf").glob("*.whl"))}
        if n == 0:
            first = wheels
        same = same and wheels == first  # reproducibility: the same bytes every time
        del wheels
        bases.append(timed(base_cmd, work / "base"))
    # The stage breakdown comes from one more run with KERNEL_FACTORY_STAGES on, counted in no figure.
    timed(kf_cmd(repo, work / "kf", jobs), work / "kf", env)
    same = same and {w.name: w.read_bytes() for w in sorted((work / "kf").glob("*.whl"))} == first
    del first
    # Every figure of a contender (wall, CPU, RSS, size) comes from the same run: its fastest.
    kf, base = min(kfs, key=lambda r: r.seconds), min(bases, key=lambda r: r.seconds)
    speed = base.seconds / kf.seconds
    size = kf.wheel_bytes / base.wheel_bytes

    def each(runs: list[Run]) -> str:
        return ", ".join(f"{r.seconds:.1f} s (CPU {r.cpu_seconds:.1f} s)" for r in runs)

    print(f"{label:9s} {total_in / MB:5.0f} MB  baseline {each(bases)}  kernel-factory {each(kfs)}")
    print(f"  fastest of each: baseline {base.seconds:.1f} s wall, {base.cpu_seconds:.1f} s CPU; kernel-factory "
          f"{kf.seconds:.1f} s wall, {kf.cpu_seconds:.1f} s CPU ({jobs} workers): {speed:5.2f}x wall, "
          f"{base.cpu_seconds / kf.cpu_seconds:5.2f}x CPU  size {size:.3f}  "
          f"peak RSS tree {kf.tree_rss_mb:4.0f} MB (PSS {kf.tree_pss_mb:4.0f} MB, largest process "
          f"{kf.max_proc_mb:4.0f} MB; baseline {base.tree_rss_mb:4.0f} MB)  reproducible {'yes' if same else 'NO'}")
    print(stage_table(stages))
    shutil.rmtree(work / "kf")
    shutil.rmtree(work / "base")
    if not same:
        raise SystemExit(f"error: {label}: two conversions gave different wheels")
    return {"speedup": speed, "size": size, "rss": kf.tree_rss_mb}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", action="append", choices=("cpu", "cuda", "synthetic"),
                    help="which corpora (default: all three)")
    ap.add_argument("--variants", type=int, default=4, help="variants per corpus (default 4)")
    ap.add_argument("--cpu-mb", type=int, default=150, help="size of each CPU variant's .so (default 150)")
    ap.add_argument("--cuda-mb", type=int, default=130, help="size of each CUDA variant's .so (default 130)")
    ap.add_argument("--synthetic-mb", type=int, default=150, help="size of each synthetic .so (default 150)")
    ap.add_argument("--big-mb", type=int, default=1024, help="size of the single-.so peak-RSS run; 0 to skip")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes (default: cores)")
    ap.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "kernel-factory-bench",
                    help="where the corpora's repositories and the cuBLAS wheel are kept between runs")
    ap.add_argument("--dir", type=Path, default=None, help="work folder (default: a temporary one, removed)")
    ap.add_argument("--baseline-job", nargs=2, metavar=("REPO", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.baseline_job:
        return baseline_main(*args.baseline_job)

    corpora = args.corpus or ["cpu", "cuda", "synthetic"]
    work = Path(args.dir or tempfile.mkdtemp(prefix="bench-convert-"))
    work.mkdir(parents=True, exist_ok=True)
    n = args.variants
    try:
        print(f"{os.cpu_count()} cores, {args.jobs} workers, load average {os.getloadavg()[0]:.1f} at the start")
        for corpus in corpora:
            fill: Callable[[Path, int], None]
            if corpus == "cpu":
                size, arch = args.cpu_mb * MB, "cpu"
                fill = partial(write_slice, lib=torch_cpu_lib(), size=size, count=n)
            elif corpus == "cuda":
                size, arch = args.cuda_mb * MB, "cu130"
                fill = partial(write_slice, lib=cublas_lib(args.cache), size=size, count=n)
            else:
                size, arch = args.synthetic_mb * MB, "cpu"
                fill = partial(write_synthetic, pool_lib=torch_cpu_lib(), size=size)
            names = [f"torch2{10 + i}-cxx11-{arch}-x86_64-linux" for i in range(n)]
            repo = make_repo(args.cache / f"{corpus}-{n}x{size // MB}-v{LAYOUT}", names, fill)
            total_in = sum(f.stat().st_size for f in (repo / "build").rglob("*") if f.is_file())
            bench_corpus(corpus, repo, work, args.jobs, total_in)
        print(f"load average {os.getloadavg()[0]:.1f} at the end (other work on the machine slows both contenders)")
        if args.big_mb:
            lib = torch_cpu_lib()
            repo = make_repo(args.cache / f"big-{args.big_mb}-v{LAYOUT}", ["torch213-cxx11-cpu-x86_64-linux"],
                             partial(write_synthetic, pool_lib=lib, size=args.big_mb * MB, offset=99))
            run = timed(kf_cmd(repo, work / "big", args.jobs), work / "big")
            print(f"one {args.big_mb} MB .so: {run.seconds:.1f} s, wheel {run.wheel_bytes / MB:.0f} MB, "
                  f"peak RSS tree {run.tree_rss_mb:.0f} MB (PSS {run.tree_pss_mb:.0f} MB, "
                  f"largest process {run.max_proc_mb:.0f} MB)")
    finally:
        if args.dir is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
