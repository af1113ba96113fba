"""Ctrl-C to the process group during `index` is never swallowed: exit 130, nothing half-written (issue 35).

A terminal's Ctrl-C sends SIGINT to every process of the foreground group: the main process and the adoption
workers it forked. The run must stop with exit 130 and its one line, whichever process the signal reached first,
leave no `.tmp-*` file and no process behind, and a plain rerun must finish the job (exit 0) with the store and
pages of an uninterrupted run. It used to be swallowed 3 times in 93 (the index ran on and exited 0).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import hostile as h
import pytest
from index_synth import index_pages

WHEELS = 1100  # three batches of store/adopt.py's 512: a pool of two workers on two cores
ADOPTED_AT = (1, 150, 450, 800)  # .metadata files in files/ when Ctrl-C comes: adoption's workers busy
PAGES_AT = (1, 150, 500)  # project folders (of 1,100) made when Ctrl-C comes: the render


def _default_sigint() -> None:
    # A shell without job control starts background commands with SIGINT ignored (`pytest ... &`), and Python
    # keeps an inherited SIG_IGN: the CLI would rightly ignore Ctrl-C. A terminal's foreground job has the default.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start(*args: str | Path) -> subprocess.Popen[str]:
    """The CLI as a terminal starts it: the leader of its own process group, SIGINT at its default."""
    env = {**os.environ, "KERNEL_FACTORY_LOCK_WAIT": "0"}
    return subprocess.Popen([sys.executable, "-m", "kernel_factory", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, start_new_session=True,
                            preexec_fn=_default_sigint)  # fmt: skip


def seen(folder: Path, suffix: str) -> int:
    """The entries of ``folder`` whose name ends with ``suffix`` (one listing: the poll leaves the cores to the
    run)."""
    try:
        return sum(1 for name in os.listdir(folder) if name.endswith(suffix))
    except FileNotFoundError:
        return 0


def ctrl_c_when_seen(folder: Path, suffix: str, n: int, *args: str | Path) -> tuple[int, str, bool]:
    """Start the CLI; once ``n`` entries of ``folder`` end with ``suffix``, SIGINT its whole group. (exit code,
    stderr, whether the signal was sent while it ran)."""
    proc = start(*args)
    deadline = time.monotonic() + 300
    sent = False
    while proc.poll() is None and time.monotonic() < deadline:
        if seen(folder, suffix) >= n:
            try:
                os.killpg(proc.pid, signal.SIGINT)
                sent = True
            except ProcessLookupError:
                pass
            break
        time.sleep(0.002)
    _, err = proc.communicate(timeout=120)
    return proc.returncode, err, sent


def group_gone(pgid: int) -> bool:
    """No process of the group is left (the workers went with the main process)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, bytes]]:
    """The wheels, and the store an uninterrupted `index --wheels` makes of them."""
    root = tmp_path_factory.mktemp("interrupt")
    wheels = h.small_wheels(root / "wheels", WHEELS)
    proc = start("index", "--store", root / "fresh", "--wheels", wheels)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    return wheels, h.tree(root / "fresh")


def check_interrupted(code: int, err: str, sent: bool, where: Path) -> None:
    assert sent, "the run ended before Ctrl-C"
    assert code == 130, f"Ctrl-C was swallowed (exit {code}): {err[-2000:]}"
    assert "Traceback" not in err, err
    assert [p.name for p in where.rglob(".tmp-*")] == []


def test_ctrl_c_during_adoption_exits_130_and_a_rerun_finishes(
    reference: tuple[Path, dict[str, bytes]], tmp_path: Path
) -> None:
    """Each Ctrl-C comes later in the adoption of the same store, so that each run is stopped at another point;
    the rerun adopts what is left."""
    wheels, expected = reference
    store = tmp_path / "store"
    for at in ADOPTED_AT:
        proc_args = ("index", "--store", store, "--wheels", wheels)
        code, err, sent = ctrl_c_when_seen(store / "files", ".whl.metadata", at, *proc_args)
        check_interrupted(code, err, sent, store)
    rerun = start("index", "--store", store, "--wheels", wheels)
    _, err = rerun.communicate(timeout=600)
    assert rerun.returncode == 0, err
    assert h.tree(store) == expected


def test_ctrl_c_during_the_render_exits_130_and_a_rerun_renders_the_same_pages(
    reference: tuple[Path, dict[str, bytes]], tmp_path: Path
) -> None:
    wheels, expected = reference
    store = tmp_path / "store"
    proc = start("index", "--store", store, "--wheels", wheels)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    proc = start("index", "--store", store, "--out", tmp_path / "uninterrupted")
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    pages = index_pages(tmp_path / "uninterrupted")
    out = tmp_path / "out"
    for at in PAGES_AT:
        code, err, sent = ctrl_c_when_seen(out / "simple", "", at, "index", "--store", store, "--out",
                                           out)  # a project's folder: its pages next  # fmt: skip
        check_interrupted(code, err, sent, out)
    rerun = start("index", "--store", store, "--out", out)
    _, err = rerun.communicate(timeout=600)
    assert rerun.returncode == 0, err
    assert index_pages(out) == pages
    assert h.tree(store) == expected


def test_ctrl_c_leaves_no_process_of_the_group(reference: tuple[Path, dict[str, bytes]], tmp_path: Path) -> None:
    wheels, _ = reference
    proc = start("index", "--store", tmp_path / "store", "--wheels", wheels)
    deadline = time.monotonic() + 300
    while proc.poll() is None and time.monotonic() < deadline:
        if seen(tmp_path / "store" / "files", ".whl.metadata") >= 100:
            break
        time.sleep(0.002)
    os.killpg(proc.pid, signal.SIGINT)
    proc.communicate(timeout=120)
    assert proc.returncode == 130
    assert group_gone(proc.pid)
