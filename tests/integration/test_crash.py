"""`kill -9` of build, index and publish at many points, then a rerun: never a half-written or dangling result.

After every kill: every record's wheel and .metadata are whole (hashes match), every
link of every page resolves to a file with the hash the page names. After the rerun:
the store and index equal those of an uninterrupted run, byte for byte, and the
`.tmp-` leftovers of the killed run are gone from the store.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import hostile as h
import pytest

VARIANTS = ("torch-universal", "torch-cpu", "torch-cuda", "torch-rocm", "torch-xpu", "torch-metal")


def factory(*args: str | Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "kernel_factory", *map(str, args)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True, env=env)


def finish(proc: subprocess.Popen[bytes]) -> int:
    """Wait for the run and close its stderr pipe; its exit code."""
    proc.communicate(timeout=300)
    return proc.returncode


def timed(*args: str | Path) -> float:
    start = time.monotonic()
    proc = factory(*args)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err.decode()
    return time.monotonic() - start


def kill_after(seconds: float, *args: str | Path) -> int | None:
    """Run the command, SIGKILL its whole process group (workers too) after ``seconds``; its exit code if it ended."""
    proc = factory(*args)
    try:
        proc.wait(seconds)
        return proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return None
    finally:
        assert proc.stderr is not None
        proc.stderr.close()


def kill_when(folder: Path, pattern: str, n: int, *args: str | Path) -> int | None:
    """Run the command, SIGKILL its process group once ``n`` files match ``folder/pattern`` (polled every 2 ms)."""
    proc = factory(*args)
    try:
        while proc.poll() is None:
            if folder.is_dir() and sum(1 for _ in folder.glob(pattern)) >= n:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                return None
            time.sleep(0.002)
        return proc.returncode
    finally:
        assert proc.stderr is not None
        proc.stderr.close()


def tmp_leftovers(root: Path) -> list[str]:
    return sorted(p.name for folder in (root, root / "files") if folder.is_dir() for p in folder.iterdir()
                  if p.name.startswith(".tmp-"))


@dataclass
class Reference:
    repo: Path
    config: Path
    store: Path  # after an uninterrupted build + index
    wheels: Path  # small wheels to adopt
    build_s: float
    index_s: float


@pytest.fixture(scope="module")
def ref(tmp_path_factory: pytest.TempPathFactory) -> Reference:
    root = tmp_path_factory.mktemp("crash")
    repo = h.big(root, "bigkernel", VARIANTS, 6 << 20)
    wheels = h.small_wheels(root / "adopt", 100)
    store = root / "ref-store"
    config = root / "factory.toml"
    config.write_text(f'[factory]\nstore = "{store}"\n\n[[kernel]]\nrepo = "{repo}"\ntags = ">=0"\n')
    build_s = timed("build", "--config", config, "--jobs", "2")
    index_s = timed("index", "--store", store, "--wheels", wheels)
    assert h.check_root(store) == []
    return Reference(repo, config, store, wheels, build_s, index_s)


def test_build_killed_then_rerun(ref: Reference, tmp_path: Path) -> None:
    expected = {k: v for k, v in h.tree(ref.store).items() if k.startswith("files/bigkernel")}
    # Kill points by observed progress, each with at least two of the six variants still to build: every one
    # must find the run still going (a run that ended first would not have been killed at that point).
    points = ["work", "wheel:1", "record:1", "wheel:2", "record:2", "wheel:3", "record:3", "record:4"]
    for i, point in enumerate(points):
        store = tmp_path / f"store{i}"
        args = ("build", "--config", ref.config, "--store", store, "--jobs", "2")
        if point == "work":  # a wheel is being written in the scratch folder
            ended = kill_when(store / "files", ".tmp-work-*/job-*/*.whl", 1, *args)
        else:
            kind, n = str(point).split(":")
            pattern = "*.whl" if kind == "wheel" else "*.whl.json"
            ended = kill_when(store / "files", pattern, int(n), *args)
        assert ended is None, f"the build ended (exit {ended}) before kill point {point}"
        assert h.check_root(store) == [], f"kill at {point}"
        rerun = factory(*args)
        _, err = rerun.communicate(timeout=300)
        assert rerun.returncode == 0, err.decode()
        assert tmp_leftovers(store) == [], f"kill at {point}"
        assert {k: v for k, v in h.tree(store).items() if k.startswith("files/")} == expected


def test_index_killed_then_rerun(ref: Reference, tmp_path: Path) -> None:
    expected = h.tree(ref.store)
    # Kill points by observed progress; all but the landing page (the run's last write) leave work to do, so
    # the run must still be going there. At the landing page the run may end first: the rerun checks still hold.
    points = ["adopted:1", "adopted:40", "adopted:99", "pages:2", "pages:20", "pages:120", "landing"]
    for i, point in enumerate(points):
        store = tmp_path / f"store{i}"
        shutil.copytree(ref.store / "files", store / "files",
                        ignore=lambda d, names: [n for n in names if n.startswith("proj") or n.startswith(".")])
        args = ("index", "--store", store, "--wheels", ref.wheels)
        if point == "landing":
            kill_when(store, "index.html", 1, *args)
        else:
            kind, n = str(point).split(":")
            folder, pattern = (store / "files", "proj*.json") if kind == "adopted" else (store / "simple", "*/index.*")
            ended = kill_when(folder, pattern, int(n), *args)
            assert ended is None, f"the index run ended (exit {ended}) before kill point {point}"
        assert h.check_root(store) == [], f"kill at {point}"
        assert finish(factory(*args)) == 0
        assert h.check_root(store) == []
        assert tmp_leftovers(store) == []
        assert [p for p in store.rglob(".tmp-*")] == []
        assert h.tree(store) == expected


@pytest.fixture
def other_fs(tmp_path: Path) -> Iterator[Path]:
    """A folder on another file system where there is one (publish then copies instead of linking)."""
    base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else str(tmp_path)
    folder = Path(tempfile.mkdtemp(prefix="kf-crash-", dir=base))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_publish_killed_then_rerun(ref: Reference, other_fs: Path) -> None:
    expected = h.tree(ref.store)
    # Kill points by observed progress (files/, then the pages, the landing page last): all but the landing
    # page leave work to do, so the run must still be going there.
    points = ["wheels:1", "wheels:2", "wheels:50", "metadata:10", "pages:2", "pages:50", "landing"]
    for i, point in enumerate(points):
        dest = other_fs / f"dest{i}"
        args = ("publish", "--store", ref.store, "--to", dest)
        if point == "landing":
            kill_when(dest, "index.html", 1, *args)
        else:
            kind, n = str(point).split(":")
            folder, pattern = {"wheels": (dest / "files", "*.whl"), "metadata": (dest / "files", "*.metadata"),
                               "pages": (dest / "simple", "*/index.*")}[kind]
            ended = kill_when(folder, pattern, int(n), *args)
            assert ended is None, f"the publish run ended (exit {ended}) before kill point {point}"
        if dest.exists():
            assert h.check_root(dest) == [], f"kill at {point}"
        assert finish(factory(*args)) == 0
        assert h.check_root(dest) == []
        assert h.tree(dest) == expected
        stray = [p.name for p in dest.rglob("*") if p.is_file() and p.relative_to(dest).as_posix() not in expected]
        assert all(n.startswith(".") for n in stray), stray  # only hidden .tmp- leftovers, never linked
