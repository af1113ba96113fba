"""`publish` racing `index --wheels` on the same store never leaves a destination with a broken link.

The race is made deterministic: publish is stopped (SIGSTOP) once its first wheel is at the destination, that is
between its listing and its copies; `index --wheels` then adds new versions of the store's projects (their pages
change to link the new wheels); publish is let go once the index has finished or says it waits for the store's
lock. Every link of every page at the destination must then lead to a file that is there, with its hash.
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

WHEELS = 1000  # 500 projects of two versions: the first versions published, the second adopted meanwhile


def start(*args: str | Path) -> subprocess.Popen[str]:
    env = {**os.environ, "KERNEL_FACTORY_LOCK_WAIT": "600"}
    return subprocess.Popen([sys.executable, "-m", "kernel_factory", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)


def waits_or_ends(proc: subprocess.Popen[str], deadline: float) -> None:
    """Return once ``proc`` has ended or said on stderr that it waits for another run's lock."""
    assert proc.stderr is not None
    while proc.poll() is None and time.monotonic() < deadline:
        if select.select([proc.stderr], [], [], 0.1)[0]:
            line = proc.stderr.readline()
            if "waiting for another kernel-factory run" in line:
                return
    assert time.monotonic() < deadline, "the index neither ended nor waited"


def test_index_during_publish_leaves_no_broken_link(tmp_path: Path) -> None:
    made = h.small_wheels(tmp_path / "made", WHEELS, versions=2)
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    for wheel in made.glob("*.whl"):
        shutil.move(wheel, (first if "-1.0-" in wheel.name else second) / wheel.name)
    store, dest = tmp_path / "store", tmp_path / "dest"
    proc = start("index", "--store", store, "--wheels", first)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err

    publish = start("publish", "--store", store, "--to", dest)
    deadline = time.monotonic() + 300
    while not any((dest / "files").glob("*.whl")) if (dest / "files").is_dir() else True:
        assert publish.poll() is None and time.monotonic() < deadline, "publish ended before its first wheel"
        time.sleep(0.0005)
    os.kill(publish.pid, signal.SIGSTOP)  # between its listing and its last copy
    try:
        assert not (dest / "index.html").exists(), "publish reached its pages before it was stopped"
        index = start("index", "--store", store, "--wheels", second)
        waits_or_ends(index, time.monotonic() + 300)
    finally:
        os.kill(publish.pid, signal.SIGCONT)
    _, err = publish.communicate(timeout=600)
    assert publish.returncode == 0, err
    _, err = index.communicate(timeout=600)
    assert index.returncode == 0, err
    assert h.check_root(dest) == []
    assert len(list((dest / "files").glob("*.whl"))) == WHEELS // 2  # the store as publish listed it
    proc = start("publish", "--store", store, "--to", dest)  # the next publish brings the rest
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    assert h.check_root(dest) == []
    assert len(list((dest / "files").glob("*.whl"))) == WHEELS
