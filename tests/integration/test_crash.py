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

FRACTIONS = (0.2, 0.45, 0.7, 0.95)  # of an uninterrupted run's duration
VARIANTS = ("torch-universal", "torch-cpu", "torch-cuda", "torch-rocm", "torch-xpu", "torch-metal")


def factory(*args: str | Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "kernel_factory", *map(str, args)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True, env=env)


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
    killed = 0
    points: list[str | float] = [*FRACTIONS, "work", "wheel:1", "record:1", "wheel:3", "record:4"]
    for i, point in enumerate(points):
        store = tmp_path / f"store{i}"
        args = ("build", "--config", ref.config, "--store", store, "--jobs", "2")
        if isinstance(point, float):
            ended = kill_after(ref.build_s * point, *args)
        elif point == "work":  # a wheel is being written in the scratch folder
            ended = kill_when(store / "files", ".tmp-work-*/job-*/*.whl", 1, *args)
        else:
            kind, n = str(point).split(":")
            pattern = "*.whl" if kind == "wheel" else "*.whl.json"
            ended = kill_when(store / "files", pattern, int(n), *args)
        killed += ended is None
        assert h.check_root(store) == [], f"kill at {point}"
        rerun = factory(*args)
        _, err = rerun.communicate(timeout=300)
        assert rerun.returncode == 0, err.decode()
        assert tmp_leftovers(store) == [], f"kill at {point}"
        assert {k: v for k, v in h.tree(store).items() if k.startswith("files/")} == expected
    print(f"build: {len(points)} kill points, {killed} killed mid-run, {ref.build_s:.1f} s a run")
    assert killed >= 5


def test_index_killed_then_rerun(ref: Reference, tmp_path: Path) -> None:
    expected = h.tree(ref.store)
    killed = 0
    points: list[str | float] = [*FRACTIONS, "adopted:40", "pages:20", "pages:200", "landing"]
    for i, point in enumerate(points):
        store = tmp_path / f"store{i}"
        shutil.copytree(ref.store / "files", store / "files",
                        ignore=lambda d, names: [n for n in names if n.startswith("proj") or n.startswith(".")])
        args = ("index", "--store", store, "--wheels", ref.wheels)
        if isinstance(point, float):
            ended = kill_after(ref.index_s * point, *args)
        elif point == "landing":
            ended = kill_when(store, "index.html", 1, *args)
        else:
            kind, n = str(point).split(":")
            folder, pattern = (store / "files", "proj*.json") if kind == "adopted" else (store / "simple", "*/index.*")
            ended = kill_when(folder, pattern, int(n), *args)
        killed += ended is None
        assert h.check_root(store) == [], f"kill at {point}"
        assert factory(*args).wait(300) == 0
        assert h.check_root(store) == []
        assert tmp_leftovers(store) == []
        assert [p for p in store.rglob(".tmp-*")] == []
        assert h.tree(store) == expected
    print(f"index: {len(points)} kill points, {killed} killed mid-run, {ref.index_s:.1f} s a run")
    assert killed >= 5


@pytest.fixture
def other_fs(tmp_path: Path) -> Iterator[Path]:
    """A folder on another file system where there is one (publish then copies instead of linking)."""
    base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else str(tmp_path)
    folder = Path(tempfile.mkdtemp(prefix="kf-crash-", dir=base))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_publish_killed_then_rerun(ref: Reference, other_fs: Path) -> None:
    expected = h.tree(ref.store)
    publish_s = timed("publish", "--store", ref.store, "--to", other_fs / "timing")
    killed = 0
    points: list[str | float] = [*FRACTIONS, "wheels:2", "metadata:10", "pages:50", "landing"]
    for i, point in enumerate(points):
        dest = other_fs / f"dest{i}"
        args = ("publish", "--store", ref.store, "--to", dest)
        if isinstance(point, float):
            ended = kill_after(publish_s * point, *args)
        elif point == "landing":
            ended = kill_when(dest, "index.html", 1, *args)
        else:
            kind, n = str(point).split(":")
            folder, pattern = {"wheels": (dest / "files", "*.whl"), "metadata": (dest / "files", "*.metadata"),
                               "pages": (dest / "simple", "*/index.*")}[kind]
            ended = kill_when(folder, pattern, int(n), *args)
        killed += ended is None
        if dest.exists():
            assert h.check_root(dest) == [], f"kill at {point}"
        assert factory(*args).wait(300) == 0
        assert h.check_root(dest) == []
        assert h.tree(dest) == expected
        stray = [p.name for p in dest.rglob("*") if p.is_file() and p.relative_to(dest).as_posix() not in expected]
        assert all(n.startswith(".") for n in stray), stray  # only hidden .tmp- leftovers, never linked
    print(f"publish: {len(points)} kill points, {killed} killed mid-run, {publish_s:.1f} s a run")
    assert killed >= 5
