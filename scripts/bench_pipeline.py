"""Benchmark: a whole mirror run (build from a Hub, index, publish to S3) beside each of its stages alone.

The corpus: one kernel repository of 8 variants, each a 150 MB .so of real machine code (slices of torch's
libtorch_cpu.so, as bench_convert.py makes them), tagged v1.0.0.

The Hub, on 127.0.0.1, is served as the real one is: its API by a Hub server, the file bodies by a CDN that
costs this machine next to nothing. olah answers the API (revision info, tree listings); a front
(hub_cdn.py, its own process) answers every ``/resolve/`` request (HEAD and GET) from a copy on disk of what
olah answered for that URL (its status and headers: ETag, X-Repo-Commit, Content-Length, ...; the body sent
with os.sendfile). A *cold pass* fills that copy before anything is timed: a HEAD and a GET of every file of
v1.0.0 through olah, printed with olah's speed (olah reads each file whole through gitdb: on 2 cores it
serves 20-35 MB/s and spends a core doing it, so a bench against it measured olah, not kernel-factory). Each
timed figure says how many file requests reached olah (none, or the bench fails) and the CPU seconds the Hub
(olah and the front) and S3 (moto) spent while it ran: they stand for other machines, yet share these cores.

Everything the front sends crosses one link of ``--rate`` MB/s (10^6 bytes; 45 is a 400 Mbit link) shared
by every connection; ``--rate 0``: unpaced. The same front serves every contender at a rate, and the download
alone prints the MB/s it achieved.

At each rate, each figure from the same bench run:

- download alone: the same files fetched as the build's fetch workers fetch them (HubSource.snapshot, two
  variants at a time), into an empty cache;
- convert alone: ``kernel-factory to-wheel`` of the same repository as a local folder (read in place);
- the whole run: ``build`` from the Hub into an empty cache and a local store, then ``index``, then ``publish``
  to S3 (moto on 127.0.0.1); each step's seconds, the peak RSS of its largest process and its CPU seconds;
- with ``--s3-store``: ``build`` into an s3:// store, ``index`` it into a local folder of pages, ``publish`` the
  pages into the store's prefix (docs/publish.md: the wheels go up once, during the build).

The build runs with KERNEL_FACTORY_STAGES on (one JSON line per variant: when it was fetched and converted);
the bench prints how long fetching and converting ran at once. Each figure is the fastest of ``--runs``.
Targets: paced, the whole run within 1.15x of the download alone; unpaced, within 1.3x of the convert alone;
every process under 200 MB RSS. The whole run judged is the layout docs/publish.md gives for a scheduled mirror
(the s3:// store) when ``--s3-store`` measures it, else the local store published to S3; both are printed.
A baseline that fails is an error (exit 1), not a skipped row; so is a missed target.

    python scripts/bench_pipeline.py                   # 45 MB/s, then unpaced
    python scripts/bench_pipeline.py --rate 45 --runs 3 --s3-store
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "scripts"), str(ROOT / "tests" / "integration"), str(ROOT / "tests")]

from bench_convert import MB, _tree_rss_kb, cpu_seconds, make_repo, torch_cpu_lib, warm, write_slice  # noqa: E402
from hub_cdn import HubCdn  # noqa: E402
from hub_server import OlahServer, hf_env, serve_repo  # noqa: E402
from servers import moto_server, s3_env  # noqa: E402

BIN = Path(sys.executable).parent
REPO_ID = "bench/pipeline"
LAYOUT = 1  # in the cached repository's name: bump when the corpus changes
PACED_TARGET = 1.15  # the whole run / the download alone, on a paced link
UNPACED_TARGET = 1.3  # the whole run / the convert alone, unpaced
RSS_TARGET_MB = 200

# olah streams a file in 4 KB pieces (olah/mirror/repos.py, stream_wrapper); this joins them into 1 MiB ones.
FAST_OLAH = """
import sys
import olah.mirror.repos as repos
from olah.server import cli

_get_file = repos.LocalMirrorRepo.get_file

def get_file(self, commit_hash, path):
    pieces = _get_file(self, commit_hash, path)
    if pieces is None:
        return None
    def joined():
        buf, size = [], 0
        for piece in pieces:
            buf.append(piece)
            size += len(piece)
            if size >= 1 << 20:
                yield b"".join(buf)
                buf, size = [], 0
        if buf:
            yield b"".join(buf)
    return joined()

repos.LocalMirrorRepo.get_file = get_file
sys.exit(cli())
"""


@dataclass
class Step:
    seconds: float
    max_proc_mb: float  # the largest single process of the step's tree (sampled every 20 ms)
    cpu: float = 0.0  # user + system seconds of the step's whole process tree
    hub_cpu: float = 0.0  # of the Hub (olah and its CDN front) while the step ran
    s3_cpu: float = 0.0  # of moto while the step ran
    misses: int = 0  # file requests the front passed to olah while the step ran (0 once warm)
    started: float = 0.0  # wall clock (time.time()) when the process started and ended
    ended: float = 0.0

    def __add__(self, other: Step) -> Step:
        """Two steps one after the other: their seconds and CPU added, the larger process."""
        return Step(self.seconds + other.seconds, max(self.max_proc_mb, other.max_proc_mb), self.cpu + other.cpu,
                    self.hub_cpu + other.hub_cpu, self.s3_cpu + other.s3_cpu, self.misses + other.misses)


@dataclass
class Servers:
    """The processes that stand for other machines: the Hub (olah, its CDN front) and S3 (moto)."""

    olah: OlahServer
    s3: str
    moto_pid: int
    cdn: HubCdn | None = None

    def hub_cpu(self) -> float:
        assert self.olah.proc is not None
        return cpu_seconds(self.olah.proc.pid) + (cpu_seconds(self.cdn.proc.pid) if self.cdn else 0.0)

    def misses(self) -> int:
        return self.cdn.misses() if self.cdn else 0


SERVERS: list[Servers] = []  # the bench's servers, once started (run() charges their CPU to each step)


def run(cmd: list[str], env: dict[str, str], what: str) -> Step:
    """Run ``cmd`` as one process tree: its wall time, its largest process's peak RSS, its CPU and the servers'
    CPU while it ran; an error if it fails."""
    import resource

    servers = SERVERS[0] if SERVERS else None
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    hub0 = servers.hub_cpu() if servers else 0.0
    s30 = cpu_seconds(servers.moto_pid) if servers else 0.0
    miss0 = servers.misses() if servers else 0
    t, started = time.perf_counter(), time.time()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = [0]

    def sample() -> None:
        while proc.poll() is None:
            peak[0] = max(peak[0], _tree_rss_kb(proc.pid)[1])
            time.sleep(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    _, err = proc.communicate()
    seconds, ended = time.perf_counter() - t, time.time()
    sampler.join()
    if proc.returncode != 0:
        raise SystemExit(f"error: {what} failed ({proc.returncode}): {err.decode(errors='replace')[-2000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    if servers is None:
        return Step(seconds, peak[0] / 1024, cpu, started=started, ended=ended)
    return Step(seconds, peak[0] / 1024, cpu, servers.hub_cpu() - hub0, cpu_seconds(servers.moto_pid) - s30,
                servers.misses() - miss0, started, ended)


def download_job(repo_id: str, variants: list[str]) -> int:
    """The download alone (run in its own process, HF_* from the environment): every variant as the fetch
    workers download it, two at a time."""
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(2) as pool:
        list(pool.map(partial(_snapshot, repo_id), variants))
    return 0


def _snapshot(repo_id: str, variant: str) -> None:
    from kernel_factory.sources.hub import HubSource

    src = HubSource(repo_id)
    src.snapshot(src.resolve("v1.0.0"), variant)


def overlap(stages: Path, build: Step) -> str:
    """How long the build fetched and converted at once, from its KERNEL_FACTORY_STAGES timeline, and how long
    its process ran before the first fetch (start, plan) and after the last wheel (uploads, exit)."""
    rows = [json.loads(line) for line in stages.read_text().splitlines()] if stages.is_file() else []
    if not rows or "convert_start" not in rows[0]:
        return "  (no timeline recorded)"
    t0 = min(r["fetch_start"] for r in rows)

    def union(kind: str) -> list[tuple[float, float]]:
        spans = sorted((r[f"{kind}_start"] - t0, r[f"{kind}_end"] - t0) for r in rows)
        merged: list[tuple[float, float]] = []
        for a, b in spans:
            if merged and a <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], b))
            else:
                merged.append((a, b))
        return merged

    fetch, conv = union("fetch"), union("convert")
    both = sum(max(0.0, min(b, d) - max(a, c)) for a, b in fetch for c, d in conv)
    busy = sum(b - a for a, b in fetch)
    order = "  ".join(f"{r['variant'].split('-')[0]} fetched {r['fetch_start'] - t0:5.1f}-{r['fetch_end'] - t0:5.1f} "
                      f"converted {r['convert_start'] - t0:5.1f}-{r['convert_end'] - t0:5.1f}"
                      for r in sorted(rows, key=lambda r: r["fetch_start"]))
    return (f"  timeline: fetching {busy:.1f} s, converting {sum(b - a for a, b in conv):.1f} s, "
            f"both at once {both:.1f} s; first wheel at {min(r['convert_end'] for r in rows) - t0:.1f} s; "
            f"the process ran {t0 - build.started:.1f} s before the first fetch and "
            f"{build.ended - max(r['convert_end'] for r in rows):.1f} s after the last wheel\n"
            f"  {order}")


@contextmanager
def link(servers: Servers, rate: float, work: Path) -> Iterator[str]:
    """The Hub's address: its CDN front (hub_cdn.py), paced to ``rate`` MB/s (0: unpaced), for as long as the
    context lasts; every rate shares one copy of the files (``work``/cdn)."""
    assert servers.olah.proc is not None
    servers.cdn = HubCdn(servers.olah.port, work / "cdn", rate * 1e6, work / "cdn.log")
    try:
        yield servers.cdn.url
    finally:
        servers.cdn.close()
        servers.cdn = None


def config(work: Path, store: str, jobs: int) -> Path:
    cfg = work / "factory.toml"
    cfg.write_text(f'[factory]\nstore = "{store}"\njobs = {jobs}\nscratch = "{work / "scratch"}"\n'
                   f'allow-orgs = ["bench"]\n\n[[kernel]]\nrepo = "{REPO_ID}"\nversions = [\"1.0.0\"]\n')
    return cfg


def bucket(endpoint: str, name: str) -> None:
    import boto3

    boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="testing", aws_secret_access_key="testing",
                 region_name="us-east-1").create_bucket(Bucket=name)


def hub_env(endpoint: str, home: Path) -> dict[str, str]:
    """huggingface_hub pointed at the bench's Hub; the tests' 5 s timeouts are too short for a loaded machine."""
    return {**hf_env(endpoint, home), "HF_HUB_ETAG_TIMEOUT": "60", "HF_HUB_DOWNLOAD_TIMEOUT": "60"}


def loads() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load averages {one:.2f} {five:.2f} {fifteen:.2f}"


def row(name: str, step: Step, total_in: int = 0) -> str:
    """One figure: seconds, the MB/s it moved (``total_in`` bytes), its largest process, its CPU and the
    servers' CPU while it ran."""
    rate = f" ({total_in / 1e6 / step.seconds:5.1f} MB/s)" if total_in else " " * 13
    missed = f", {step.misses} files from olah" if step.misses else ""
    return (f"{name:18s} {step.seconds:6.1f} s{rate}  largest process {step.max_proc_mb:4.0f} MB  "
            f"cpu {step.cpu:5.1f} s  Hub cpu {step.hub_cpu:4.1f} s  S3 cpu {step.s3_cpu:4.1f} s{missed}")


def cold_pass(servers: Servers, work: Path, total_in: int) -> None:
    """The front's copy of every file of v1.0.0, filled once through olah, unpaced: a HEAD and a GET of each, two
    at a time (timed: olah's own speed on this machine, for comparison; no target is judged on it).

    By URL, as a CDN keys them: huggingface_hub fetches a blob once per etag, so that a download of the
    variants leaves the URLs of the same small files (``__init__.py``) unfetched in one run or another."""
    from concurrent.futures import ThreadPoolExecutor
    from urllib.request import Request, urlopen

    def get(url: str, method: str = "GET") -> bytes:
        with urlopen(Request(url, method=method), timeout=600) as answer:
            return bytes(answer.read())

    with link(servers, 0, work) as endpoint:
        misses, hub = servers.misses(), servers.hub_cpu()
        t = time.perf_counter()
        sha = json.loads(get(f"{endpoint}/api/kernels/{REPO_ID}/revision/v1.0.0"))["sha"]
        tree = json.loads(get(f"{endpoint}/api/kernels/{REPO_ID}/tree/{sha}?recursive=true"))
        files = [e["path"] for e in tree if e["type"] == "file"]

        def fill(path: str) -> int:
            url = f"{endpoint}/kernels/{REPO_ID}/resolve/{sha}/{path}"
            get(url, "HEAD")
            return len(get(url))

        with ThreadPoolExecutor(2) as pool:
            moved = sum(pool.map(fill, files))
        seconds = time.perf_counter() - t
        step = Step(seconds, 0, hub_cpu=servers.hub_cpu() - hub, misses=servers.misses() - misses)
    print(f"cold pass: olah serves each of the {len(files)} files of v1.0.0 once, a HEAD and a GET, 2 at a time, "
          f"unpaced; the front keeps a copy\n  {seconds:6.1f} s ({moved / 1e6 / seconds:5.1f} MB/s)  "
          f"olah + front cpu {step.hub_cpu:4.1f} s  requests to olah {step.misses}")
    assert moved >= total_in


def one_rate(rate: float, args: argparse.Namespace, repo: Path, variants: list[str], servers: Servers,
             work: Path, total_in: int) -> bool:
    kf = str(BIN / "kernel-factory")
    s3 = servers.s3
    best: dict[str, Step] = {}
    build_steps: dict[str, Step] = {}
    timelines: list[tuple[float, Path, Step]] = []
    start_loads = loads()

    def keep(name: str, step: Step) -> Step:
        if name not in best or step.seconds < best[name].seconds:
            best[name] = step
        return step

    for n in range(args.runs):
        tag = f"{rate:g}-{n}"
        with link(servers, rate, work) as endpoint:
            # Every contender starts with what it reads in the page cache: the cold pass and the downloads
            # write gigabytes, which can push the corpus out (a convert alone then read the disk: 18 s, not 12).
            warm(work / "cdn")
            dl_env = {**os.environ, **hub_env(endpoint, work / f"hf-dl-{tag}")}
            keep("download alone", run([sys.executable, __file__, "--download-job", REPO_ID, *variants], dl_env,
                                       "the download alone"))
            shutil.rmtree(work / f"hf-dl-{tag}")
            out = work / f"wheels-{tag}"
            warm(repo)
            keep("convert alone", run([kf, "to-wheel", str(repo), "1.0.0", "-o", str(out), "--jobs",
                                       str(args.jobs)], dict(os.environ), "the convert alone"))
            shutil.rmtree(out)
            # the whole run: build from the Hub, index, publish to S3
            store = work / f"store-{tag}"
            stages = work / f"stages-{tag}.jsonl"
            cfg = config(work, str(store), args.jobs)
            env = {**os.environ, **hub_env(endpoint, work / f"hf-{tag}"), **s3_env(s3),
                   "KERNEL_FACTORY_STAGES": str(stages)}
            bucket(s3, f"site-{n}-{int(rate)}")
            warm(work / "cdn")
            steps = {
                "build": run([kf, "build", "--config", str(cfg)], env, "build"),
                "index": run([kf, "index", "--store", str(store)], env, "index"),
                "publish": run([kf, "publish", "--store", str(store), "--to", f"s3://site-{n}-{int(rate)}/idx"],
                               env, "publish"),
            }
            whole = steps["build"] + steps["index"] + steps["publish"]
            if keep("whole run", whole) is best["whole run"]:
                build_steps = steps
            timelines.append((steps["build"].seconds, stages, steps["build"]))
            shutil.rmtree(store)
            shutil.rmtree(work / f"hf-{tag}")
            if args.s3_store:
                bucket(s3, f"store-{n}-{int(rate)}")
                s3_cfg = config(work, f"s3://store-{n}-{int(rate)}/public", args.jobs)
                s3_stages = work / f"stages-s3-{tag}.jsonl"
                env = {**env, **hub_env(endpoint, work / f"hf-s3-{tag}"), "KERNEL_FACTORY_STAGES": str(s3_stages)}
                where = f"s3://store-{n}-{int(rate)}/public"
                pages = work / f"pages-{tag}"
                warm(work / "cdn")
                s3_steps = [
                    run([kf, "build", "--config", str(s3_cfg)], env, "build into S3"),
                    run([kf, "index", "--store", where, "--out", str(pages)], env, "index of the S3 store"),
                    run([kf, "publish", "--store", str(pages), "--to", where], env, "publish of the pages"),
                ]
                for name, step in zip(("build", "index", "publish"), s3_steps, strict=True):
                    keep(f"s3 store: {name}", step)
                if keep("s3 store: whole", s3_steps[0] + s3_steps[1] + s3_steps[2]) is best["s3 store: whole"]:
                    best_s3_stages = (s3_stages, s3_steps[0])
                shutil.rmtree(pages)
                shutil.rmtree(work / f"hf-s3-{tag}")
    shown = f"{rate:g} MB/s" if rate > 0 else "unpaced"
    print(f"\n{shown}: {len(variants)} variants, {total_in / 1e6:.0f} MB in, --jobs {args.jobs}, "
          f"fastest of {args.runs}; {start_loads} at the start of this rate, {loads()} at its end")
    print("  " + row("download alone", best["download alone"], total_in))
    print("  " + row("convert alone", best["convert alone"]))
    print("  " + row("whole run", best["whole run"]))
    for name, step in build_steps.items():
        print("    " + row(name, step))
    for name in ("s3 store: build", "s3 store: index", "s3 store: publish", "s3 store: whole"):
        if name in best:
            print("  " + row(name, best[name]))
    fastest = min(timelines, key=lambda t: t[0])
    print("  local store build " + overlap(fastest[1], fastest[2]).lstrip())
    if args.s3_store:
        print("  s3 store build " + overlap(*best_s3_stages).lstrip())
    floor, target = ("download alone", PACED_TARGET) if rate > 0 else ("convert alone", UNPACED_TARGET)
    slowest = max(("download alone", "convert alone"), key=lambda name: best[name].seconds)
    for layout in ("whole run", "s3 store: whole"):
        if layout in best:
            print(f"  {layout} / {floor}: {best[layout].seconds / best[floor].seconds:.2f}x; / the slowest stage "
                  f"alone ({slowest}): {best[layout].seconds / best[slowest].seconds:.2f}x")
    # The target is the scheduled mirror's, in the layout docs/publish.md gives for it: the s3:// store when
    # measured (--s3-store), else the local store published to S3.
    judged = "s3 store: whole" if "s3 store: whole" in best else "whole run"
    ratio = best[judged].seconds / best[floor].seconds
    largest = max(s.max_proc_mb for s in best.values())
    missed = sum(s.misses for s in best.values())
    if missed:
        print(f"  error: {missed} file requests reached olah during the timed runs (the cold pass missed them):")
        for line in sorted(set((work / "cdn.log").read_text().splitlines())):
            print(f"    {line}")
    ok = ratio <= target and largest < RSS_TARGET_MB and not missed
    print(f"  target: {judged} / {floor}: {ratio:.2f}x (target {target}x); largest process {largest:.0f} MB "
          f"(target < {RSS_TARGET_MB} MB): {'met' if ok else 'MISSED'}")
    return ok


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=float, action="append",
                    help="MB/s (10^6 bytes) of the paced link; 0: unpaced (default: 45, then 0)")
    ap.add_argument("--variants", type=int, default=8, help="variants (default 8)")
    ap.add_argument("--mb", type=int, default=150, help="size of each variant's .so in MiB (default 150)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="conversion workers (default: cores)")
    ap.add_argument("--runs", type=int, default=1, help="runs of each figure; the fastest counts (default 1)")
    ap.add_argument("--s3-store", action="store_true", help="also build into an s3:// store and index it there")
    ap.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "kernel-factory-bench",
                    help="where the corpus repository is kept between runs")
    ap.add_argument("--download-job", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.download_job:
        return download_job(args.download_job[0], args.download_job[1:])

    names = [f"torch2{10 + i}-cxx11-cpu-x86_64-linux" for i in range(args.variants)]
    fill = partial(write_slice, lib=torch_cpu_lib(), size=args.mb * MB, count=args.variants)
    repo = make_repo(args.cache / f"pipeline-{args.variants}x{args.mb}-v{LAYOUT}", names, fill)
    total_in = sum(f.stat().st_size for f in (repo / "build").rglob("*") if f.is_file())
    warm(repo)
    print(f"{os.cpu_count()} cores, {loads()} at the start")
    ok = True
    with tempfile.TemporaryDirectory(prefix="bench-pipeline-") as tmp:
        work = Path(tmp)
        mirror = serve_repo(repo, work / "mirrors", REPO_ID)
        # olah reads each file whole through gitdb before it sends a byte: a blob stored as a delta of another
        # slice takes gitdb many seconds (past the client's read timeout); stored whole, a fraction of one.
        subprocess.run(["git", "-C", str(mirror), "-c", "pack.compression=1", "repack", "-a", "-d", "-F",
                        "--window=0", "--depth=0"], check=True, capture_output=True)
        (work / "fast_olah.py").write_text(FAST_OLAH)
        olah = OlahServer(work / "mirrors", work / "olah", command=[sys.executable, str(work / "fast_olah.py")])
        olah.start()
        try:
            with moto_server(work) as s3:
                SERVERS.append(Servers(olah, s3, child_pid("moto.server")))
                cold_pass(SERVERS[0], work, total_in)
                for rate in args.rate or [45.0, 0.0]:
                    ok = one_rate(rate, args, repo, names, SERVERS[0], work, total_in) and ok
        finally:
            olah.stop()
    print(f"{loads()} at the end (other work on the machine slows every figure)")
    return 0 if ok else 1


def child_pid(word: str) -> int:
    """The pid of this process's child whose command line holds ``word``."""
    for task in os.listdir(f"/proc/{os.getpid()}/task"):
        for pid in Path(f"/proc/{os.getpid()}/task/{task}/children").read_text().split():
            if word in Path(f"/proc/{pid}/cmdline").read_text():
                return int(pid)
    raise SystemExit(f"error: no child process runs {word}")


if __name__ == "__main__":
    raise SystemExit(main())
