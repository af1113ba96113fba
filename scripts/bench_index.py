"""Benchmark the index on small labelled wheels, beside dumb-pypi and simple503 in the same run.

    python scripts/bench_index.py [--projects 200] [--versions 10] [--large-projects 1000] [--dir DIR]

Two corpora of real wheels (tests/index_synth.py): projects x versions x 10
build-variant labels, 20,000 and 100,000 by default, plus a tenth as many
real-shaped wheels (projects // 10 x versions x 10 tag sets: 16-256 KB each,
several compressed tags, extended-timestamp zip fields, half of them written
by `wheel`'s WheelFile, half streamed with data descriptors, Generator lines of
other build tools), on tmpfs (/dev/shm) when there is one. Each kernel-factory
step is one `kernel-factory index --wheels W --store S --out S` process; the
full build starts from the records alone: a fresh store holding copies of
files/ (wheels, .metadata, records) without the catalog, the pages or the
state file, so every record is read. The table shows the
process's wall time (interpreter start included), the time inside `main`, the
CPU time of it and its workers, its peak RSS and the files it wrote; every
step runs three times and the fastest counts (the machine may be shared). The
anchors, on the same wheels: simple503 (`simple503 -e`, PEP 658 files too) for
the first adoption (shown, not checked), dumb-pypi for the full build and, with
`--previous-package-list`, for adding one wheel. The first adoption alternates
with simple503, three runs each, each on a fresh store or a fresh copy of the
wheels (hard links), and the fastest of each counts; on the large corpus, which
has no anchor, it runs once. The full builds of both run three times, each into
a fresh folder, the fastest counts. Ratios use wall times. The floors checked
are issue 35's: a full build from the records at least 2x dumb-pypi; adding
one wheel at most 1 s and at least 5x dumb-pypi's incremental run; nothing
changed at most 0.5 s, writing no file; on the large corpus, adding one at
most 3 s and a peak RSS at most 500 MB. A missing baseline is an error (`make
bench` installs both), and so is a missed floor: the script exits 1 after
printing every line. Every figure is measured; nothing is extrapolated.
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from index_synth import make_wheel  # noqa: E402
from kernel_factory.variants import parse  # noqa: E402

LABELS = (
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
RUN = """
import json, resource, sys, time
t0 = time.perf_counter()
from kernel_factory.cli import main  # the console script's function
t1 = time.perf_counter()
sys.argv[0] = "kernel-factory"
rc = main()
t2 = time.perf_counter()
rss = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
print("BENCH " + json.dumps({"rc": rc, "import": t1 - t0, "main": t2 - t1, "rss_kb": rss}))
"""


def _project_wheels(args: tuple[Path, int, int]) -> int:
    folder, p, versions = args
    for v in range(versions):
        for variant in LABELS:
            target = parse(variant)
            make_wheel(folder, f"kernel-{p:04d}", target.local_version(f"1.{v}.0"), f"py3-none-{target.platform}",
                       summary=f"kernel-{p:04d} compute kernel")  # fmt: skip
    return versions * len(LABELS)


TAG_SETS = tuple(f"cp3{m}-cp3{m}-{plat}" for m in (10, 11, 12, 13, 14) for plat in (
    "manylinux_2_17_x86_64.manylinux2014_x86_64", "musllinux_1_2_x86_64.manylinux_2_28_aarch64"))
GENERATORS = ("setuptools (80.9.0)", "hatchling 1.27.0", "maturin (1.8.3)", "flit 3.12.0", "poetry-core 2.1.3")


class _Stream(io.RawIOBase):
    """A write-only file without seek or tell: zipfile then writes each entry with a data descriptor."""

    def __init__(self, f: io.BufferedWriter) -> None:
        self.f = f

    def writable(self) -> bool:
        return True

    def write(self, b: bytes) -> int:  # type: ignore[override]
        return self.f.write(b)


def _real_wheel(folder: Path, p: int, v: int, t: int) -> None:
    """A wheel shaped like those real build tools make: larger, several tags, extra zip fields, a RECORD."""
    rng = random.Random(p * 1000 + v * 10 + t)
    name, version, tags = f"realpkg-{p:04d}", f"{v}.{t}.0", TAG_SETS[t % len(TAG_SETS)]
    dist, info = f"realpkg_{p:04d}", f"realpkg_{p:04d}-{v}.{t}.0.dist-info"
    gen = GENERATORS[(p + t) % len(GENERATORS)]
    meta = (f"Metadata-Version: 2.4\nName: {name}\nVersion: {version}\nSummary: {name}, real-shaped\n"
            "License-Expression: Apache-2.0\nRequires-Python: >=3.10\nRequires-Dist: numpy>=1.24\n"
            "Requires-Dist: packaging; extra == \"cli\"\nProvides-Extra: cli\n"
            "Classifier: Programming Language :: Python :: 3\nDescription-Content-Type: text/markdown\n\n"
            + f"# {name}\n\n" + "A long description of the project. " * rng.randint(20, 200) + "\n")
    expanded = [f"{py}-{abi}-{plat}" for py, abi, plats in [tags.split("-")] for plat in plats.split(".")]
    files = {f"{dist}/__init__.py": b"from ._core import *\n", f"{dist}/_util.py": b"def f():\n    return 1\n" * 40,
             f"{dist}/_core.cpython-3{10 + t % 5}-x86_64-linux-gnu.so": rng.randbytes(rng.randint(16, 256) << 10),
             f"{info}/METADATA": meta.encode(), f"{info}/licenses/LICENSE": b"Apache License 2.0\n" * 50,
             f"{info}/entry_points.txt": f"[console_scripts]\n{name} = {dist}:main\n".encode(),
             f"{info}/WHEEL": ("Wheel-Version: 1.0\nGenerator: " + gen + "\nRoot-Is-Purelib: false\n"
                               + "".join(f"Tag: {x}\n" for x in expanded)).encode()}
    path = folder / f"{dist}-{version}-{tags}.whl"
    if t % 2 == 0:  # `wheel`'s own writer: it hashes every entry into RECORD
        from wheel.wheelfile import WheelFile

        with WheelFile(path, "w") as wf:
            for arc, data in files.items():
                wf.writestr(arc, data)
        return
    stamp = int(1_767_225_600 + p)
    extra = (0x5455).to_bytes(2, "little") + (5).to_bytes(2, "little") + b"\x01" + stamp.to_bytes(4, "little")
    record = "".join(f"{arc},sha256={_b64(data)},{len(data)}\n" for arc, data in files.items()) + f"{info}/RECORD,,\n"
    with open(path, "wb") as raw, zipfile.ZipFile(_Stream(raw), "w", zipfile.ZIP_DEFLATED) as zf:
        for arc, data in [*files.items(), (f"{info}/RECORD", record.encode())]:
            zi = zipfile.ZipInfo(arc, (2026, 1, 1, 0, 0, 0))
            zi.extra, zi.compress_type = extra, zipfile.ZIP_DEFLATED
            zf.writestr(zi, data)


def _b64(data: bytes) -> str:
    import base64
    import hashlib

    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _real_project_wheels(args: tuple[Path, int, int]) -> int:
    folder, p, versions = args
    for v in range(versions):
        for t in range(len(TAG_SETS)):
            _real_wheel(folder, p, v, t)
    return versions * len(TAG_SETS)


def make_corpus(folder: Path, projects: int, versions: int) -> tuple[int, int]:
    """(small labelled wheels, real-shaped wheels) written into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    with ProcessPoolExecutor() as pool:
        small = sum(pool.map(_project_wheels, [(folder, p, versions) for p in range(projects)], chunksize=8))
        real = sum(pool.map(_real_project_wheels, [(folder, p, versions) for p in range(max(1, projects // 10))]))
    return small, real


def records_only(store: Path, fresh: Path) -> None:
    """``fresh``: a store holding only copies of ``store``'s wheels, .metadata and records; no catalog, no
    pages, no state file: an index run there reads every record, as a first index of a store built elsewhere.
    (Copies, not hard links: a link changes the ctime of ``store``'s files, and its next run would hash every
    wheel again.)"""
    shutil.rmtree(fresh, ignore_errors=True)
    shutil.copytree(store / "files", fresh / "files", ignore=shutil.ignore_patterns(".*"))  # no catalog, locks


def files_newer(root: Path, since_ns: int) -> int:
    """Files under ``root`` changed at or after ``since_ns`` (what a step wrote)."""
    count = 0
    for folder, _dirs, names in os.walk(root):
        for name in names:
            try:
                if os.stat(os.path.join(folder, name)).st_mtime_ns >= since_ns:
                    count += 1
            except FileNotFoundError:
                continue
    return count


def cpu_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def ours(args: list[str], watch: Path) -> dict[str, float]:
    """One kernel-factory process: wall, main, CPU (all its processes), peak RSS (MB), files written in ``watch``."""
    start_ns = time.time_ns()
    cpu0 = cpu_children()
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", RUN, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=watch
    )  # no factory.toml there: the flags alone say what to do
    out, err = proc.communicate()
    wall = time.perf_counter() - t0
    cpu = cpu_children() - cpu0
    if proc.returncode != 0:
        sys.exit(f"kernel-factory {' '.join(args)} failed ({proc.returncode}): {err.decode()[-2000:]}")
    line = next(x for x in out.decode().splitlines() if x.startswith("BENCH "))
    data = json.loads(line[6:])
    summary = next((x for x in out.decode().splitlines() if x.startswith("index:")), "")
    rss = data["rss_kb"] / 1024  # the process or its largest adoption worker
    return {"wall": wall, "main": data["main"], "cpu": cpu, "rss": rss, "written": files_newer(watch, start_ns),
            "line": summary}  # fmt: skip


def best(runs: list[dict[str, float]]) -> dict[str, float]:
    """The fastest of repeated runs (the machine may be shared)."""
    return min(runs, key=lambda r: r["wall"])


def timed(cmd: list[str]) -> tuple[float, float]:
    """(wall, CPU) of one baseline process."""
    cpu0 = cpu_children()
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, cwd=tempfile.gettempdir())
    return time.perf_counter() - t0, cpu_children() - cpu0


TOOLS = {"dumb-pypi": "dumb_pypi.main", "simple503": "simple503.__main__"}


def tool(name: str) -> list[str]:
    """The command that runs a baseline (its console script's function, in this interpreter)."""
    module = TOOLS[name]
    if importlib.util.find_spec(module.split(".")[0]) is None:
        sys.exit(f"error: {name} is not installed: the bench needs it as a baseline; run `make bench` "
                 f"(pip install '.[bench]')")  # fmt: skip
    return [sys.executable, "-c", f"import sys; from {module} import main; sys.exit(main())"]


def dumb_pypi(names: list[str], previous: list[str] | None, work: Path, out: Path) -> tuple[float, float]:
    current = work / "packages.txt"
    current.write_text("\n".join(names) + "\n")
    cmd = [*tool("dumb-pypi"), "--package-list", str(current), "--output-dir", str(out),
           "--packages-url", "../../files/", "--no-generate-timestamp"]  # fmt: skip
    if previous is not None:
        prev = work / "previous.txt"
        prev.write_text("\n".join(previous) + "\n")
        cmd += ["--previous-package-list", str(prev)]
    return timed(cmd)


def simple503(wheels: Path, copy: Path) -> tuple[float, float]:
    """simple503 on a fresh copy of ``wheels`` (hard links; it writes its index among them)."""
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(wheels, copy, copy_function=os.link)
    return timed([*tool("simple503"), "-e", str(copy)])


def corpus_run(base: Path, projects: int, versions: int, baselines: bool) -> dict[str, dict[str, float]]:
    wheels, store = base / "wheels", base / "store"
    t0 = time.perf_counter()
    count, real = make_corpus(wheels, projects, versions)
    print(f"\n== {count} wheels ({projects} projects x {versions} versions x {len(LABELS)} labels) and {real} "
          f"real-shaped ones, made in {time.perf_counter() - t0:.1f} s, in {base}")  # fmt: skip
    idx = ["index", "--wheels", str(wheels), "--store", str(store)]
    res: dict[str, dict[str, float]] = {}
    adoptions: list[dict[str, float]] = []
    anchors: list[tuple[float, float]] = []
    for _ in range(3 if baselines else 1):  # ours and simple503 in turn, each from scratch: the fastest counts
        shutil.rmtree(store, ignore_errors=True)
        adoptions.append(ours([*idx, "--out", str(store)], base))
        if baselines:
            anchors.append(simple503(wheels, base / "simple503"))
    res["first adoption"] = best(adoptions)  # the last run's store serves the steps below
    if anchors:
        res["first adoption"]["base"], res["first adoption"]["base_cpu"] = min(anchors)
    full = []
    for _ in range(3):  # from the records alone each time (no catalog, pages or state file): the fastest counts
        records_only(store, base / "fresh")
        full.append(ours(["index", "--store", str(base / "fresh")], base / "fresh"))
    shutil.rmtree(base / "fresh")
    res["full build"] = best(full)
    res["nothing changed"] = best([ours([*idx, "--out", str(store)], base) for _ in range(3)])
    added = []
    for n in range(3):  # three wheels added one at a time: the fastest counts
        make_wheel(wheels, "kernel-0000", f"9.0.{n}+torch27cu128cxx11", "py3-none-linux_x86_64")
        added.append(ours([*idx, "--out", str(store)], base))
    res["add one wheel"] = best(added)
    res["nothing changed again"] = best([ours([*idx, "--out", str(store)], base) for _ in range(3)])
    if baselines:
        names = sorted(n for n in os.listdir(wheels) if n.endswith(".whl"))
        before = [n for n in names if not n.startswith("kernel_0000-9.0.")]
        work = base / "dumb"
        work.mkdir()
        runs = []
        for _ in range(3):  # a fresh output each time: the fastest counts, as for kernel-factory
            shutil.rmtree(work / "out", ignore_errors=True)
            runs.append(dumb_pypi(before, None, work, work / "out"))
        res["full build"]["base"], res["full build"]["base_cpu"] = min(runs)
        incremental = [dumb_pypi(before + [f], before, work, work / "out") for f in sorted(set(names) - set(before))]
        res["add one wheel"]["base"], res["add one wheel"]["base_cpu"] = min(incremental)
    for step, r in res.items():
        base_t = r.get("base")
        ratio = f"{base_t:6.2f} s {r['base_cpu']:6.2f} s {base_t / r['wall']:5.1f}x" if base_t is not None else ""
        print(f"{step:<22} {r['wall']:6.2f} s {r['main']:6.2f} s {r['cpu']:6.2f} s {r['rss']:6.0f} MB "
              f"{int(r['written']):6d}  {ratio}")  # fmt: skip
        print(f"{'':<22} {r['line']}")
    return res


def ratio(res: dict[str, dict[str, float]], step: str) -> float:
    """The baseline's wall time over ours for ``step``; a missing baseline is an error, never a pass."""
    if "base" not in res[step]:
        sys.exit(f"error: no baseline figure for {step!r}: the bench needs dumb-pypi (`make bench`)")
    return res[step]["base"] / res[step]["wall"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--projects", type=int, default=200)
    ap.add_argument("--versions", type=int, default=10)
    ap.add_argument("--large-projects", type=int, default=1000, help="projects of the large corpus (0: none)")
    ap.add_argument("--dir", type=Path, help="work folder (default: a temporary one on /dev/shm, removed after)")
    args = ap.parse_args()
    tool("dumb-pypi")
    tool("simple503")
    shm = Path("/dev/shm")
    where = shm if shm.is_dir() else None
    parent = args.dir.resolve() if args.dir else Path(tempfile.mkdtemp(prefix="bench-index-", dir=where))
    print(f"machine: {os.cpu_count()} cores; work folder {parent}")
    print(f"{'step':<22} {'wall':>8} {'main':>8} {'CPU':>8} {'RSS':>9} {'files':>6}  baseline wall, CPU, ratio")
    try:
        small = corpus_run(parent / "small", args.projects, args.versions, True)
        shutil.rmtree(parent / "small")
        large = corpus_run(parent / "large", args.large_projects, args.versions, False) if args.large_projects else {}
    finally:
        if args.dir is None:
            shutil.rmtree(parent, ignore_errors=True)
    checks = [  # issue 35's floors; the ratios are dumb-pypi's wall time over ours, both measured here
        ("full build from the records >= 2x dumb-pypi", ratio(small, "full build") >= 2),
        ("add one <= 1 s", small["add one wheel"]["wall"] <= 1),
        ("add one >= 5x dumb-pypi --previous-package-list", ratio(small, "add one wheel") >= 5),
        *((f"{step} <= 0.5 s, 0 files written", small[step]["wall"] <= 0.5 and small[step]["written"] == 0)
          for step in ("nothing changed", "nothing changed again")),
    ]  # fmt: skip
    if large:
        checks += [
            ("large: add one <= 3 s", large["add one wheel"]["wall"] <= 3),
            ("large: peak RSS <= 500 MB", max(r["rss"] for r in large.values()) <= 500),
        ]
    print()
    for what, ok in checks:
        print(f"{'met   ' if ok else 'MISSED'} {what}")
    missed = [what for what, ok in checks if not ok]
    if missed:
        sys.exit(f"error: {len(missed)} target(s) missed: {'; '.join(missed)}")


if __name__ == "__main__":
    main()
