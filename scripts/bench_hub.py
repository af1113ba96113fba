"""Benchmark: huggingface_hub fetching a kernel through ``kernel-factory serve --hub`` and through olah.

The corpus is scripts/bench_pipeline.py's: one kernel repository of 8 variants, each a 150 MB .so of real
machine code (slices of torch's libtorch_cpu.so), tagged v1.0.0. ``kernel-factory build`` turns it into a store
(8 wheels); ``serve --hub`` serves that store, and olah (its read size raised from 4 KB to 1 MiB, as
bench_pipeline.py runs it) serves the same repository as a git mirror, each server a process of its own, on
127.0.0.1, in the same run.

The client, a process of its own per fetch: huggingface_hub's ``snapshot_download`` of the whole revision
(``build/``, every variant) into an empty cache, HF_HUB_DISABLE_XET. Each contender is fetched ``--runs`` times,
interleaved: the first fetch after a server's start is *cold* (serve --hub checks each wheel then: its sha256 and
every member against its RECORD), the others warm. Printed: seconds and MB/s of the cold fetch and of the
fastest warm one, the server's peak RSS (VmHWM) and CPU seconds after all its fetches; the bytes fetched are
compared with the repository's. Targets: serve --hub at least as fast as olah (cold and warm), its peak RSS
under 200 MB; a missed target is exit 1.

    python scripts/bench_hub.py
    python scripts/bench_hub.py --variants 2 --mb 50 --runs 2
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "scripts"), str(ROOT / "tests" / "integration"), str(ROOT / "tests")]

from bench_convert import MB, make_repo, torch_cpu_lib, warm, write_slice  # noqa: E402
from bench_pipeline import FAST_OLAH, LAYOUT, REPO_ID, loads  # noqa: E402
from hub_server import OlahServer, free_port, serve_repo  # noqa: E402

BIN = Path(sys.executable).parent
RSS_TARGET_MB = 200
FETCH = """
import sys
from huggingface_hub import snapshot_download
print(snapshot_download(sys.argv[1], repo_type="kernel", revision="v1.0.0", max_workers=8))
"""


def server_stats(pid: int) -> tuple[float, float]:
    """(peak RSS in MB, CPU seconds) of process ``pid``."""
    peak = 0.0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            peak = int(line.split()[1]) / 1024
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return peak, (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def fetch(endpoint: str, cache: Path, work: Path) -> tuple[float, Path]:
    """Seconds of one snapshot_download through ``endpoint`` into ``cache`` (a new process); the snapshot."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update({"HF_ENDPOINT": endpoint, "HF_HUB_CACHE": str(cache), "HF_HUB_DISABLE_XET": "1",
                "HF_HUB_DISABLE_PROGRESS_BARS": "1", "HF_HUB_ETAG_TIMEOUT": "120", "HF_HUB_DOWNLOAD_TIMEOUT": "120"})
    script = work / "fetch.py"
    script.write_text(FETCH)
    started = time.monotonic()
    proc = subprocess.run([sys.executable, str(script), REPO_ID], env=env, capture_output=True, text=True)
    seconds = time.monotonic() - started
    if proc.returncode != 0:
        raise SystemExit(f"error: the fetch through {endpoint} failed:\n{proc.stderr[-3000:]}")
    return seconds, Path(proc.stdout.strip().splitlines()[-1])


def digests(folder: Path) -> dict[str, str]:
    out = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            h = hashlib.sha256()
            with open(path, "rb") as f:
                while chunk := f.read(MB):
                    h.update(chunk)
            out[path.relative_to(folder).as_posix()] = h.hexdigest()
    return out


def start_hub(store: Path, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    out = open(log, "wb")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen([str(BIN / "kernel-factory"), "serve", "--hub", "--store", str(store), "--port",
                             str(port), "--allow-org", "bench"], stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(f"{url}/api/organizations/bench/overview", timeout=2).close()
            return proc, url
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise SystemExit(f"error: serve --hub did not start:\n{log.read_text()[-2000:]}") from None
            time.sleep(0.2)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variants", type=int, default=8, help="variants (default 8)")
    ap.add_argument("--mb", type=int, default=150, help="size of each variant's .so in MiB (default 150)")
    ap.add_argument("--runs", type=int, default=2, help="fetches per contender; the first is cold (default 2)")
    ap.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "kernel-factory-bench",
                    help="where the corpus repository is kept between runs")
    args = ap.parse_args(argv)
    names = [f"torch2{10 + i}-cxx11-cpu-x86_64-linux" for i in range(args.variants)]
    fill = partial(write_slice, lib=torch_cpu_lib(), size=args.mb * MB, count=args.variants)
    repo = make_repo(args.cache / f"pipeline-{args.variants}x{args.mb}-v{LAYOUT}", names, fill)
    expected = digests(repo / "build")
    total = sum((repo / "build" / rel).stat().st_size for rel in expected)
    print(f"{os.cpu_count()} cores, {loads()} at the start; {len(names)} variants, {len(expected)} files, "
          f"{total / 1e6:.0f} MB")
    with tempfile.TemporaryDirectory(prefix="bench-hub-") as tmp:
        work = Path(tmp)
        (work / "factory.toml").write_text(
            f'[factory]\nstore = "{work / "store"}"\nallow-orgs = ["bench"]\n\n'
            f'[[kernel]]\nrepo = "{repo}"\nrepo-id = "{REPO_ID}"\ntags = ">=1"\n')
        started = time.monotonic()
        subprocess.run([str(BIN / "kernel-factory"), "build", "--config", str(work / "factory.toml"), "-q"],
                       check=True)
        print(f"store built in {time.monotonic() - started:.1f} s (not timed below)")
        mirror = serve_repo(repo, work / "mirrors", REPO_ID)
        subprocess.run(["git", "-C", str(mirror), "-c", "pack.compression=1", "repack", "-a", "-d", "-F",
                        "--window=0", "--depth=0"], check=True, capture_output=True)
        (work / "fast_olah.py").write_text(FAST_OLAH)
        warm(repo)
        olah = OlahServer(work / "mirrors", work / "olah", command=[sys.executable, str(work / "fast_olah.py")])
        olah.start()
        hub, hub_url = start_hub(work / "store", work / "hub.log")
        results: dict[str, list[float]] = {"serve --hub": [], "olah": []}
        try:
            for n in range(args.runs):
                for name, url in (("serve --hub", hub_url), ("olah", olah.url)):
                    seconds, snapshot = fetch(url, work / f"cache-{name.split()[0]}-{n}", work)
                    got = digests(snapshot / "build")
                    if got != expected:
                        raise SystemExit(f"error: {name} served other files or bytes than the repository's")
                    results[name].append(seconds)
            assert olah.proc is not None
            stats = {"serve --hub": server_stats(hub.pid), "olah": server_stats(olah.proc.pid)}
        finally:
            hub.terminate()
            hub.wait(10)
            olah.stop()
    print(f"huggingface_hub snapshot_download of {REPO_ID} v1.0.0 ({total / 1e6:.0f} MB), {args.runs} fetches each, "
          "interleaved:")
    for name, times in results.items():
        warm_best = min(times[1:]) if len(times) > 1 else float("nan")
        peak, cpu = stats[name]
        print(f"  {name:12} cold {times[0]:6.1f} s ({total / 1e6 / times[0]:6.1f} MB/s)  warm {warm_best:6.1f} s "
              f"({total / 1e6 / warm_best:6.1f} MB/s)  server peak RSS {peak:5.0f} MB, CPU {cpu:5.1f} s")
    hub_t, olah_t = results["serve --hub"], results["olah"]
    ok = hub_t[0] <= olah_t[0] and (len(hub_t) < 2 or min(hub_t[1:]) <= min(olah_t[1:])) \
        and stats["serve --hub"][0] < RSS_TARGET_MB
    print(f"  target: serve --hub at least as fast as olah (cold and warm), peak RSS < {RSS_TARGET_MB} MB: "
          f"{'met' if ok else 'MISSED'}")
    print(f"{loads()} at the end (other work on the machine slows every figure)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
