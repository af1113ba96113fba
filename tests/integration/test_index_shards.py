"""The first index of a store of records made elsewhere (no catalog): the same pages and the same lines as a
store whose catalog was made as its records were, with records damaged, a variant kernels' parser refuses, a
wheel gone, a wheel changed, a .metadata gone and a wheel adopted in the same run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import hostile as h
import pytest
from index_synth import index_pages, make_wheel, records_only
from support import kf

pytestmark = pytest.mark.integration

RECORDS = 5000  # index/command.py's PARALLEL_RECORDS: a first read this big goes to index/shards.py's workers
VERSIONS = 10  # of each project (500 projects)
LABEL = "torch27cu128cxx11"


def edit_record(files: Path, wheel: str, **fields: object) -> None:
    path = files / f"{wheel}.json"
    record = json.loads(path.read_bytes())
    record.update(fields)
    path.write_text(json.dumps(record))


def behind_the_back(files: Path) -> None:
    """The same changes made to a store's files: two variants set (one kernels defines, one it does not), an
    adopted record made a kernel's (the other wheel of its project becomes a look-alike), a record damaged, a
    wheel deleted, a wheel made one byte longer, a .metadata deleted."""
    edit_record(files, f"kern-1.0+{LABEL}-py3-none-linux_x86_64.whl", variant="torch27-cxx11-cu128-x86_64-linux")
    edit_record(files, f"kern-1.1+{LABEL}-py3-none-linux_x86_64.whl", variant="torch27-cxx11-zz128-x86_64-linux")
    edit_record(files, "kern2-1.0-py3-none-any.whl", kind="kernel")  # kern2-1.1 is a look-alike now
    (files / "proj0003-1.3-py3-none-any.whl.json").write_text("{")
    (files / "proj0004-1.4-py3-none-any.whl").unlink()
    with open(files / "proj0005-1.5-py3-none-any.whl", "ab") as f:
        f.write(b"\0")
    (files / "proj0007-1.7-py3-none-any.whl.metadata").unlink()


def lines(stderr: str, root: Path) -> list[str]:
    return [line.replace(str(root), "ROOT") for line in stderr.splitlines() if line.startswith(("error:", "warning:"))]


def test_first_read_in_workers_gives_the_pages_and_lines_of_a_read_in_one_process(tmp_path: Path) -> None:
    wheels = h.small_wheels(tmp_path / "w", RECORDS, VERSIONS)
    for minor in range(3):
        make_wheel(wheels, "kern", f"1.{minor}+{LABEL}", "py3-none-linux_x86_64", summary="kern")
    for minor in range(2):
        make_wheel(wheels, "kern2", f"1.{minor}", summary="kern2")
    later = tmp_path / "later"
    make_wheel(later, "proj0006", "9.0", summary="adopted in the run that reads the records")
    one = tmp_path / "one"  # its catalog read in one process
    proc = kf("index", "--store", one, "--wheels", wheels)
    assert proc.returncode == 0, proc.stderr
    cold = tmp_path / "cold"  # the same records, no catalog, no pages, no state
    records_only(one, cold)
    behind_the_back(one / "files")
    behind_the_back(cold / "files")

    ref = kf("index", "--store", one, "--wheels", later)
    run = subprocess.Popen([sys.executable, "-m", "kernel_factory", "index", "--store", str(cold), "--wheels",
                            str(later)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    workers: set[int] = set()
    while run.poll() is None:
        workers.update(h.children(run.pid))
        time.sleep(0.005)
    out, err = run.communicate()
    assert len(workers) >= 2, "the records were not read in workers"

    assert (ref.returncode, run.returncode) == (3, 3), (ref.stderr, err)
    expected = [
        f"error: ROOT/files/kern-1.1+{LABEL}-py3-none-linux_x86_64.whl.json: not a valid record (variant "
        "'torch27-cxx11-zz128-x86_64-linux' is not a build variant the kernels project defines); run "
        "`kernel-factory index --repair` to rebuild it from its wheel, or delete it and rerun build",
        "error: ROOT/files/proj0003-1.3-py3-none-any.whl.json: damaged (not valid JSON); run `kernel-factory index "
        "--repair` to rebuild it from its wheel, or delete it and rerun build",
        "error: ROOT/files/proj0004-1.4-py3-none-any.whl.json: its wheel proj0004-1.4-py3-none-any.whl is missing "
        "from the store; rerun build to make it again, or delete the record",
        "error: kern2-1.1-py3-none-any.whl: an adopted wheel of 'kern2', a project this store builds from a kernel, "
        "left out of the index (it would sit beside the kernel in every install); remove it from the store, or pass "
        "--allow-kernel-names (allow-kernel-names = true) if you mean to list it",
        "error: ROOT/files/proj0005-1.5-py3-none-any.whl: 691 bytes where its record says 690, not the wheel its "
        "record proj0005-1.5-py3-none-any.whl.json describes (changed outside kernel-factory); it is left out of "
        "the pages: put back the wheel the record describes, or run `kernel-factory index --repair` to record "
        "this wheel as it is",
    ]
    metadata = "files/proj0007-1.7-py3-none-any.whl.metadata"
    assert f"{cold / metadata} was missing: written again from its wheel" in err.splitlines()
    assert (cold / metadata).read_bytes() == (one / metadata).read_bytes()
    got = lines(err, cold)
    assert got == lines(ref.stderr, one)
    assert got == expected
    assert index_pages(cold) == index_pages(one)
    def listed(project: str) -> list[str]:
        page = (cold / "simple" / project / "index.html").read_text()
        return sorted(f"1.{v}" for v in range(VERSIONS) if f"{project}-1.{v}-py3-none-any.whl" in page)

    everything = [f"1.{v}" for v in range(VERSIONS)]
    assert listed("proj0003") == [v for v in everything if v != "1.3"]  # its record damaged
    assert listed("proj0004") == [v for v in everything if v != "1.4"]  # its wheel gone
    assert listed("proj0005") == [v for v in everything if v != "1.5"]  # its wheel changed
    assert listed("proj0006") == everything
    assert "proj0006-9.0-py3-none-any.whl" in (cold / "simple" / "proj0006" / "index.html").read_text()
    kern = (cold / "simple" / "kern" / "index.html").read_text()
    assert f"kern-1.0+{LABEL}" in kern and f"kern-1.1+{LABEL}" not in kern and f"kern-1.2+{LABEL}" in kern
    kern2 = (cold / "simple" / "kern2" / "index.html").read_text()
    assert "kern2-1.0-py3-none-any.whl" in kern2 and "kern2-1.1" not in kern2
    assert os.listdir(cold / "variants") == [LABEL]
