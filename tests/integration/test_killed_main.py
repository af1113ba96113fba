"""`kill -9` of the build's main process alone (not its group): its workers end and the store is not left locked.

The OOM killer and a plain `kill PID` hit one process. Forked workers used to inherit
the store lock and live on, so the next run waited 600 s and failed. Here the main
process is killed while its workers build; the workers must end on their own (the
test waits for their exit, with a generous hang guard), and a rerun told not to wait
at all must take the lock, exit 0 and leave a store identical to an uninterrupted build.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import hostile as h
import pytest
from index_synth import index_pages, records_only

VARIANTS = ("torch-universal", "torch-cpu", "torch-cuda", "torch-rocm", "torch-xpu", "torch-metal")
HANG_GUARD_S = 120  # not a speed check: only how long to wait before calling it a hang


def start(*args: str | Path, wait_s: str = "600", pipes: bool = True, tmp: Path | None = None) -> subprocess.Popen[str]:
    """The CLI in its own session; ``pipes=False`` for a run whose workers might outlive it (and hold the pipes);
    ``tmp``: its TMPDIR (the build's scratch folder)."""
    env = {**os.environ, "KERNEL_FACTORY_LOCK_WAIT": wait_s, **({"TMPDIR": str(tmp)} if tmp else {})}
    out = subprocess.PIPE if pipes else subprocess.DEVNULL
    return subprocess.Popen([sys.executable, "-m", "kernel_factory", *map(str, args)], stdout=out, stderr=out,
                            text=True, env=env, start_new_session=True)


def open_files(pid: int) -> set[str]:
    """What the process's file descriptors point to (from /proc)."""
    found = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            found.add(os.readlink(fd))
        except OSError:
            continue
    return found


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, bytes]]:
    """A kernel big enough that workers are mid-build when the main process dies, and its clean-build store."""
    root = tmp_path_factory.mktemp("killed-main")
    repo = h.big(root, "orphankernel", VARIANTS, 2 << 20, seed=3)
    cfg, store = config(root, repo, "ref")
    proc = start("build", "--config", cfg, "--jobs", "2")
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    return repo, files_of(store)


def config(folder: Path, repo: Path, name: str) -> tuple[Path, Path]:
    store = folder / f"{name}-store"
    cfg = folder / f"{name}.toml"
    cfg.write_text(f'[factory]\nstore = "{store}"\n\n[[kernel]]\nrepo = "{repo}"\ntags = ">=0"\n')
    return cfg, store


def files_of(store: Path) -> dict[str, bytes]:
    return {k: v for k, v in h.tree(store).items() if k.startswith("files/")}


def test_main_killed_alone_workers_end_and_rerun_starts_at_once(
    kernel: tuple[Path, dict[str, bytes]], tmp_path: Path
) -> None:
    repo, expected = kernel
    cfg, store = config(tmp_path, repo, "run")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    main = start("build", "--config", cfg, "--jobs", "2", pipes=False, tmp=tmp)
    deadline = time.monotonic() + 120
    workers: list[int] = []
    while len(workers) < 2 or not any((store / "files").glob(".tmp-work-*/job-*")) or not any(tmp.iterdir()):
        assert main.poll() is None and time.monotonic() < deadline, "the build ended before its workers were seen"
        workers = h.children(main.pid)
        time.sleep(0.01)
    lock = str(store / ".kernel-factory.lock")
    assert lock in open_files(main.pid)
    assert [w for w in workers if lock in open_files(w)] == [], "a worker holds the store lock"
    exits = {w: os.pidfd_open(w) for w in workers}  # readable once that worker has exited
    os.kill(main.pid, signal.SIGKILL)  # the main process only, as the OOM killer does
    main.wait()
    left = [w for w, fd in exits.items() if not select.select([fd], [], [], HANG_GUARD_S)[0] and h.alive(w)]
    for w in left:  # do not leave them behind if the assertion fails
        os.kill(w, signal.SIGKILL)
    for fd in exits.values():
        os.close(fd)
    assert left == [], f"workers {left} outlived the main process (still running {HANG_GUARD_S} s later)"

    assert h.check_root(store) == []
    left_behind = [p.name for p in tmp.iterdir()]  # the killed run's scratch folder
    assert len(left_behind) == 1 and left_behind[0].startswith("kernel-factory-"), left_behind
    rerun = start("build", "--config", cfg, "--jobs", "2", wait_s="0", tmp=tmp)  # a held lock fails at once
    _, err = rerun.communicate(timeout=300)
    assert rerun.returncode == 0, err
    assert "waiting for another" not in err
    assert files_of(store) == expected
    assert [p.name for p in store.rglob(".tmp-*")] == []
    assert list(tmp.iterdir()) == []  # the rerun removed the killed run's scratch folder, then its own


def test_lock_held_by_a_dead_run_says_so(kernel: tuple[Path, dict[str, bytes]], tmp_path: Path) -> None:
    """The holder PID is in the lock file; when that process is gone the message says so and how to fix it."""
    repo, _ = kernel
    cfg, store = config(tmp_path, repo, "held")
    store.mkdir()
    lock = store / ".kernel-factory.lock"
    dead = subprocess.Popen(["true"])
    dead.wait()
    holder = subprocess.Popen(  # holds the lock as an orphaned worker of a killed run did, the dead PID written in it
        [sys.executable, "-c", "import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT); "
         "fcntl.flock(fd, fcntl.LOCK_EX); os.write(fd, sys.argv[2].encode()); print('held', flush=True); "
         "time.sleep(120)", str(lock), f"{dead.pid}\n"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        proc = start("build", "--config", cfg, wait_s="0")
        _, err = proc.communicate(timeout=60)
    finally:
        holder.kill()
        holder.communicate()
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert proc.returncode == 2 and errors == [
        f"error: {store}: another kernel-factory run (PID {dead.pid}, no longer running: a process it started still "
        f"holds the lock) holds .kernel-factory.lock; end the processes that hold {lock} (`fuser -v {lock}` lists "
        "them), then run again"
    ], err
    assert not (store / "files").exists()


# -- index: adoption's and the full render's pools (issue 27 item 2) -----------------------------------------
KILLS = 4  # spread over the same range of each pool's work (was 20, then 6: CI time for no new point)
ADOPT_WHEELS = 1100  # three batches of store/adopt.py's 512: a pool of two workers on two cores
RENDER_WHEELS = 5000  # index/command.py's PARALLEL_RECORDS: a full build this big renders in a pool
RENDER_VERSIONS = 10  # of each project: 500 projects, 1,500 pages
HANG_GUARD_S = 120  # only so that a hang fails instead of blocking the suite; the workers go at once


def seen(folder: Path, suffix: str) -> int:
    """The entries of ``folder`` whose name ends with ``suffix`` (one listing: the poll must not take the cores
    the run needs)."""
    try:
        return sum(1 for name in os.listdir(folder) if name.endswith(suffix))
    except FileNotFoundError:
        return 0


def kill_when_seen(folder: Path, suffix: str, n: int, *args: str | Path) -> tuple[list[int], bool]:
    """Start the CLI; once ``n`` entries of ``folder`` end with ``suffix``, SIGKILL its main process alone. (the
    workers it had then, whether it was still running)."""
    main = start(*args, pipes=False)
    workers: set[int] = set()
    deadline = time.monotonic() + 300
    while main.poll() is None and time.monotonic() < deadline:
        workers.update(h.children(main.pid))
        if seen(folder, suffix) >= n:
            workers.update(h.children(main.pid))
            running = sorted(w for w in workers if h.alive(w))  # before the kill: with it, they go at once
            os.kill(main.pid, signal.SIGKILL)  # the main process only, as the OOM killer does
            main.wait()
            return running, True
        time.sleep(0.005)
    main.wait()
    return [], False


def wait_gone(workers: list[int]) -> list[int]:
    """The workers still running after the hang guard (and then killed, so that none is left behind)."""
    deadline = time.monotonic() + HANG_GUARD_S
    while any(h.alive(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = [w for w in workers if h.alive(w)]
    for w in left:
        os.kill(w, signal.SIGKILL)
    return left


def rerun_at_once(*args: str | Path) -> None:
    """A rerun that may not wait for the lock: a lock still held fails it (exit 2) at once."""
    rerun = start(*args, wait_s="0")
    _, err = rerun.communicate(timeout=600)
    assert rerun.returncode == 0, err
    assert "waiting for another" not in err


@pytest.fixture(scope="module")
def wheel_folders(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("killed-index")
    return h.small_wheels(root / "adopt", ADOPT_WHEELS), h.small_wheels(root / "render", RENDER_WHEELS,
                                                                         RENDER_VERSIONS)


def test_index_adoption_main_killed_alone_workers_end_and_rerun_matches(
    wheel_folders: tuple[Path, Path], tmp_path: Path
) -> None:
    wheels, _ = wheel_folders
    fresh = tmp_path / "fresh"
    rerun_at_once("index", "--store", fresh, "--wheels", wheels)
    expected = h.tree(fresh)
    with_workers = 0
    for i in range(KILLS):
        store = tmp_path / f"store{i}"
        at = 1 + i * 400 // KILLS  # .metadata files written when the main process is killed: both workers busy
        workers, killed = kill_when_seen(store / "files", ".whl.metadata", at, "index", "--store", store,
                                         "--wheels", wheels)  # fmt: skip
        assert killed, f"adoption ended before {at} .metadata files were written"
        with_workers += bool(workers)
        assert wait_gone(workers) == [], f"kill {i} at {at} .metadata files: workers outlived the main process"
        rerun_at_once("index", "--store", store, "--wheels", wheels)
        assert h.tree(store) == expected, f"kill {i} at {at} .metadata files"
        assert [p.name for p in store.rglob(".tmp-*")] == []
        shutil.rmtree(store)
    assert with_workers >= KILLS - 2, f"workers were running at only {with_workers} of {KILLS} kills"


def test_index_render_main_killed_alone_workers_end_and_rerun_matches(
    wheel_folders: tuple[Path, Path], tmp_path: Path
) -> None:
    """Every other kill hits the first index of a store of records made elsewhere (no catalog: its records are
    read, then rendered by the full render's pool); the others a full render from the catalog."""
    _, wheels = wheel_folders
    store = tmp_path / "store"
    rerun_at_once("index", "--store", store, "--wheels", wheels)
    rerun_at_once("index", "--store", store, "--out", tmp_path / "fresh")  # a fresh render of the same records
    expected = index_pages(tmp_path / "fresh")
    with_workers = 0
    for i in range(KILLS):
        out = tmp_path / "out"
        args: tuple[str | Path, ...] = ("index", "--store", store, "--out", out)
        if i % 2:
            records_only(store, out)
            args = ("index", "--store", out)
        at = 1 + i * 450 // KILLS  # project pages written when the main process is killed: the workers busy
        workers, killed = kill_when_seen(out / "simple", "", at, *args)  # a project's folder: its pages next
        assert killed, f"the render ended before {at} project pages were written"
        with_workers += len(workers) >= 2
        assert wait_gone(workers) == [], f"kill {i} at {at} pages: workers outlived the main process"
        rerun_at_once(*args)
        assert index_pages(out) == expected, f"kill {i} at {at} pages"
        assert [p.name for p in out.rglob(".tmp-*")] == []
        shutil.rmtree(out)
    assert with_workers >= KILLS - 2, f"two workers or more were running at only {with_workers} of {KILLS} kills"
