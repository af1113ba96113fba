"""Two runs on one store at once: the second waits for the lock (or, told not to wait, fails with one line)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import hostile as h
import pytest

VARIANTS = ("torch-universal", "torch-cpu", "torch-cuda", "torch-rocm")


def start(*args: str | Path, wait_s: str = "120") -> subprocess.Popen[str]:
    env = {**os.environ, "KERNEL_FACTORY_LOCK_WAIT": wait_s}
    return subprocess.Popen([sys.executable, "-m", "kernel_factory", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def finish(proc: subprocess.Popen[str]) -> tuple[int, str]:
    _, err = proc.communicate(timeout=300)
    return proc.returncode, err


def wait_for(folder: Path, pattern: str, proc: subprocess.Popen[str]) -> None:
    """Until a file matching ``pattern`` exists under ``folder`` (the first run holds the lock by then)."""
    deadline = time.monotonic() + 60
    while not (folder.is_dir() and any(folder.glob(pattern))):
        assert proc.poll() is None and time.monotonic() < deadline, "the first run ended before it was seen working"
        time.sleep(0.005)


@dataclass
class Kernel:
    repo: Path
    wheels: Path


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> Kernel:
    root = tmp_path_factory.mktemp("concurrency")
    return Kernel(h.big(root, "lockkernel", VARIANTS, 6 << 20, seed=1), h.small_wheels(root / "adopt", 60))


def config(tmp_path: Path, repo: Path) -> tuple[Path, Path]:
    store = tmp_path / "store"
    cfg = tmp_path / "factory.toml"
    cfg.write_text(f'[factory]\nstore = "{store}"\n\n[[kernel]]\nrepo = "{repo}"\ntags = ">=0"\n')
    return cfg, store


def test_second_build_waits(kernel: Kernel, tmp_path: Path) -> None:
    cfg, store = config(tmp_path, kernel.repo)
    first = start("build", "--config", cfg, "--jobs", "2")
    wait_for(store / "files", ".tmp-work-*", first)
    os.kill(first.pid, signal.SIGSTOP)  # holds the lock, paused: the second run cannot miss it on a fast machine
    second = start("build", "--config", cfg, "--jobs", "2")
    assert second.stderr is not None
    seen = second.stderr.readline()
    os.kill(first.pid, signal.SIGCONT)
    (rc1, err1), (rc2, err2) = finish(first), finish(second)
    err2 = seen + err2
    assert (rc1, rc2) == (0, 0), err1 + err2
    assert "waiting for another kernel-factory run" in err2
    assert "built 4 wheels" in err1 and "built 0 wheels, 4 already in the store" in err2
    assert h.check_root(store) == []
    assert len(list((store / "files").glob("*.whl"))) == 4


def test_second_build_told_not_to_wait_fails_clearly(kernel: Kernel, tmp_path: Path) -> None:
    cfg, store = config(tmp_path, kernel.repo)
    first = start("build", "--config", cfg, "--jobs", "2")
    wait_for(store / "files", ".tmp-work-*", first)
    os.kill(first.pid, signal.SIGSTOP)  # paused while holding the lock (still a running process)
    try:
        rc2, err2 = finish(start("build", "--config", cfg, wait_s="0"))
    finally:
        os.kill(first.pid, signal.SIGCONT)
    rc1, err1 = finish(first)
    assert rc1 == 0, err1
    errs = [line for line in err2.splitlines() if line.startswith("error: ")]
    assert rc2 == 2 and errs == [f"error: {store}: another kernel-factory run (PID {first.pid}, running) holds "
                                 ".kernel-factory.lock; wait for it "
                                 "to finish (or raise KERNEL_FACTORY_LOCK_WAIT)"], err2
    assert "Traceback" not in err2
    assert h.check_root(store) == []


def test_index_waits_for_build_and_index(kernel: Kernel, tmp_path: Path) -> None:
    cfg, store = config(tmp_path, kernel.repo)
    build = start("build", "--config", cfg, "--jobs", "2")
    # The build holds the lock from before its plan: starting the index runs then, not once its work folder
    # appears, leaves them the plan and the conversion to start up in (the conversion alone can end first).
    wait_for(store, ".kernel-factory.lock", build)
    first = start("index", "--store", store, "--wheels", kernel.wheels)
    second = start("index", "--store", store, "--wheels", kernel.wheels)
    results = [finish(p) for p in (build, first, second)]
    assert [rc for rc, _ in results] == [0, 0, 0], results
    assert "waiting for another kernel-factory run" in results[1][1]
    assert h.check_root(store) == []
    pages = h.tree(store)
    assert "simple/lockkernel/index.html" in pages and "simple/proj0059/index.html" in pages
    rc, _ = finish(start("index", "--store", store))  # a third run renders the same bytes
    assert rc == 0 and h.tree(store) == pages
