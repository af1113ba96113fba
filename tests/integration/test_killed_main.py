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
import signal
import subprocess
import sys
import time
from pathlib import Path

import hostile as h
import pytest

VARIANTS = ("torch-universal", "torch-cpu", "torch-cuda", "torch-rocm", "torch-xpu", "torch-metal")
HANG_GUARD_S = 120  # not a speed check: only how long to wait before calling it a hang


def start(*args: str | Path, wait_s: str = "600", pipes: bool = True) -> subprocess.Popen[str]:
    """The CLI in its own session; ``pipes=False`` for a run whose workers might outlive it (and hold the pipes)."""
    env = {**os.environ, "KERNEL_FACTORY_LOCK_WAIT": wait_s}
    out = subprocess.PIPE if pipes else subprocess.DEVNULL
    return subprocess.Popen([sys.executable, "-m", "kernel_factory", *map(str, args)], stdout=out, stderr=out,
                            text=True, env=env, start_new_session=True)


def children(pid: int) -> list[int]:
    """PIDs whose parent is ``pid`` (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(entry.name))
    return found


def open_files(pid: int) -> set[str]:
    """What the process's file descriptors point to (from /proc)."""
    found = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            found.add(os.readlink(fd))
        except OSError:
            continue
    return found


def alive(pid: int) -> bool:
    """Running (a zombie waiting to be reaped by init counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


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
    main = start("build", "--config", cfg, "--jobs", "2", pipes=False)
    deadline = time.monotonic() + 120
    workers: list[int] = []
    while len(workers) < 2 or not any((store / "files").glob(".tmp-work-*/job-*")):
        assert main.poll() is None and time.monotonic() < deadline, "the build ended before its workers were seen"
        workers = children(main.pid)
        time.sleep(0.01)
    lock = str(store / ".kernel-factory.lock")
    assert lock in open_files(main.pid)
    assert [w for w in workers if lock in open_files(w)] == [], "a worker holds the store lock"
    exits = {w: os.pidfd_open(w) for w in workers}  # readable once that worker has exited
    os.kill(main.pid, signal.SIGKILL)  # the main process only, as the OOM killer does
    main.wait()
    left = [w for w, fd in exits.items() if not select.select([fd], [], [], HANG_GUARD_S)[0] and alive(w)]
    for w in left:  # do not leave them behind if the assertion fails
        os.kill(w, signal.SIGKILL)
    for fd in exits.values():
        os.close(fd)
    assert left == [], f"workers {left} outlived the main process (still running {HANG_GUARD_S} s later)"

    assert h.check_root(store) == []
    rerun = start("build", "--config", cfg, "--jobs", "2", wait_s="0")  # a held lock fails at once
    _, err = rerun.communicate(timeout=300)
    assert rerun.returncode == 0, err
    assert "waiting for another" not in err
    assert files_of(store) == expected
    assert [p.name for p in store.rglob(".tmp-*")] == []


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
        holder.wait()
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert proc.returncode == 2 and errors == [
        f"error: {store}: another kernel-factory run (PID {dead.pid}, no longer running: a process it started still "
        f"holds the lock) holds .kernel-factory.lock; end the processes that hold {lock} (`fuser -v {lock}` lists "
        "them), then run again"
    ], err
    assert not (store / "files").exists()
