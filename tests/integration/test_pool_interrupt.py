"""Ctrl-C during a pool's work drops the jobs not yet handed to a worker (store/pool.py ``worker_pool``).

ProcessPoolExecutor's own exit waits for every submitted job, and a worker that Ctrl-C interrupts in one job
takes the next: a Ctrl-C during a first adoption or read of a large store ran all of it before the run
stopped. A real process group gets the signal, as a terminal sends it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

JOBS = 40
SCRIPT = """
import sys, time
from kernel_factory.store.pool import worker_pool

def job(i):
    with open(sys.argv[1], "a") as f:
        f.write(f"{i}\\n")
    time.sleep(0.5)

with worker_pool(2) as pool:
    for future in [pool.submit(job, i) for i in range(int(sys.argv[2]))]:
        future.result()
"""


def test_ctrl_c_drops_the_jobs_no_worker_has_taken(tmp_path: Path) -> None:
    log = tmp_path / "started"
    log.touch()
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, str(log), str(JOBS)], stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 60
    while len(log.read_text().split()) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode != 0 and "KeyboardInterrupt" in err, err
    started = len(log.read_text().split())
    # the two running, the three queued for the workers (max_workers + 1) and those the queue took again in the
    # moment before the exit cancelled the rest (seen: up to 7 in 8 runs): never the other 30 (all 40 before)
    assert 2 <= started <= 10, started
