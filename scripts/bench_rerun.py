"""Benchmark: a no-op rerun of `kernel-factory build` on an unchanged fleet of 10 Hub kernels.

Serves 10 kernel repositories (2 revisions x 3 variants each) from olah on 127.0.0.1
behind a counting proxy, builds them once into a store, then times reruns that have
nothing to do. Prints the rerun time (median of 3), the bytes the Hub served during
the reruns (API answers: refs and trees), and the bytes the download cache grew by
(must be 0). Target: under 2 s, zero bytes downloaded. A missed target exits 1.

Each kernel has noarch variants and binary ones (x86_64 CPU and CUDA, whose .so is a real ELF
file of this machine), so a rerun that re-audited or re-fetched binaries would show.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "integration"))
sys.path.insert(0, str(ROOT / "tests"))

import syslibs  # noqa: E402
from hub_server import hf_env, hub, make_kernel_repo, serve_repo  # noqa: E402

VARIANTS = ("torch-universal", "torch-cuda", "torch213-cxx11-cpu-x86_64-linux", "torch27-cxx11-cu128-x86_64-linux")


def tree_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--kernels", type=int, default=10)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    if syslibs.LIBZ is None:
        print("error: no libz.so.1 on the dynamic linker's path: the binary variants need a real ELF file",
              file=sys.stderr)
        return 1
    elf = syslibs.LIBZ.read_bytes()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        mirrors = work / "mirrors"
        lines = ["[factory]", f'store = "{work / "store"}"', 'allow-orgs = ["bench"]', ""]
        for i in range(args.kernels):
            src = work / "src" / f"k{i}"
            make_kernel_repo(src, module=f"k{i}", variants=VARIANTS, elf=elf)
            serve_repo(src, mirrors, f"bench/k{i}")
            lines += ["[[kernel]]", f'repo = "bench/k{i}"', "versions = [1, 2]", ""]
        cfg = work / "factory.toml"
        cfg.write_text("\n".join(lines))
        with hub(mirrors, work / "olah") as (_server, proxy):
            env = {**os.environ, **hf_env(proxy.url, work / "hf")}
            cmd = [sys.executable, "-m", "kernel_factory", "build", "--config", str(cfg), "--allow-no-digest"]
            t0 = time.perf_counter()
            first = subprocess.run(cmd, env=env, capture_output=True, text=True)
            first_s = time.perf_counter() - t0
            if first.returncode != 0:
                print(first.stderr, file=sys.stderr)
                return 1
            wheels = len(list((work / "store" / "files").glob("*.whl")))
            cache = work / "hf"
            cache_before = tree_bytes(cache)
            proxy.reset()
            times = []
            for _ in range(args.runs):
                t0 = time.perf_counter()
                rerun = subprocess.run(cmd, env=env, capture_output=True, text=True)
                times.append(time.perf_counter() - t0)
                if rerun.returncode != 0 or "0 to build" not in rerun.stderr:  # not assert: python -O drops it
                    print(f"error: the rerun was not a no-op (exit {rerun.returncode}):\n{rerun.stderr}",
                          file=sys.stderr)
                    return 1
            api_bytes = proxy.bytes_served // args.runs
            grown = tree_bytes(cache) - cache_before
    median = statistics.median(times)
    print(f"fleet: {args.kernels} kernels, {wheels} wheels; first build {first_s:.2f} s")
    print(f"no-op rerun: median {median:.2f} s over {args.runs} runs (target < 2 s): "
          f"{'OK' if median < 2 else 'MISSED'}")
    print(f"bytes downloaded into the cache by reruns: {grown} (target 0): {'OK' if grown == 0 else 'MISSED'}")
    print(f"Hub API bytes per rerun (refs, trees): {api_bytes}")
    if median >= 2 or grown != 0:
        print("error: a target was missed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
