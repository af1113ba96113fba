"""Disk faults on real file systems: a store, scratch or destination that is full, read-only or over a size limit.

Each fault must give exit 4 and one line naming the path and the errno text, leave no temporary file behind,
and a rerun must complete once the fault is gone. The tests mount a small tmpfs (CI runs as root) and remount
it read-only; where mounting is impossible they skip with the reason. RLIMIT_FSIZE is a second way to hit a
write limit, without root.
"""

from __future__ import annotations

import errno
import json
import os
import resource
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hub_server import git
from kernel_factory.verify.digest import compute
from support import clean_env, kf

MB = 1_000_000
VARIANTS = ("torch-cpu", "torch-cuda")
BIG = 25 * MB  # two variants of this do not fit a 40 MB tmpfs


class Tmpfs:
    """A tmpfs of ``size`` mounted at ``path``; remount read-only or larger; unmounted by the fixture."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def mount(self, options: str) -> None:
        subprocess.run(["mount", "-o", f"remount,{options}", str(self.path)], check=True, capture_output=True)


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Tmpfs]:
    path = tmp_path / "tmpfs"
    path.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=40m", "tmpfs", str(path)], capture_output=True,
                          text=True)
    if proc.returncode != 0:
        reason = f"cannot mount a tmpfs here ({proc.stderr.strip() or proc.returncode}); run as root"
        print(reason, file=sys.stderr)
        pytest.skip(reason)
    try:
        yield Tmpfs(path)
    finally:
        if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(path)], capture_output=True)


def write_variant(build: Path, variant: str, size: int) -> None:
    vdir = build / variant
    vdir.mkdir(parents=True)
    (vdir / "__init__.py").write_text("from ._ops import ops\n")
    (vdir / "_ops.py").write_text("ops = None\n")
    (vdir / "blob.bin").write_bytes(os.urandom(size))  # random: the wheel is as large as the variant
    meta = {"name": "big", "id": "_big_0000000", "version": 1, "license": "Apache-2.0", "python-depends": [],
            "backend": {"type": "cpu", "archs": []},
            "digest": {"algorithm": "sha256", "files": compute(vdir, "sha256")}}
    (vdir / "metadata.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")


@pytest.fixture(scope="module")
def big_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A git kernel repository, tag v1.0.0, with two noarch variants of 25 MB each."""
    repo = tmp_path_factory.mktemp("repos") / "big"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "README.md").write_text("# big\n")
    for variant in VARIANTS:
        write_variant(repo / "build", variant, BIG)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "build", when=1_700_000_000)
    git(repo, "tag", "v1.0.0")
    return repo


def config(folder: Path, repo: Path, store: Path) -> Path:
    cfg = folder / "factory.toml"
    cfg.write_text(f'[factory]\nstore = "{store}"\njobs = 1\n\n'
                   f'[[kernel]]\nrepo = "{repo}"\nrepo-id = "kernels-community/big"\ntags = "==1.0.0"\n')
    return cfg


def errors(stderr: str) -> list[str]:
    assert "Traceback" not in stderr, stderr
    return [line for line in stderr.splitlines() if line.startswith("error:")]


def leftovers(root: Path) -> list[str]:
    return [str(p) for p in root.rglob(".tmp-*")] + [str(p) for p in root.rglob("kernel-factory-*")]


def fill(folder: Path) -> Path:
    """A file taking every free byte of ``folder``'s file system."""
    filler = folder / "filler"
    with open(filler, "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * (1 << 16))
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    return filler


def wheels(store: Path) -> list[str]:
    return sorted(p.name for p in (store / "files").glob("*.whl"))


def test_build_refused_up_front_on_a_full_store_then_completes(big_repo: Path, tmpfs: Tmpfs, tmp_path: Path) -> None:
    store = tmpfs.path / "store"
    cfg = config(tmp_path, big_repo, store)
    proc = kf("build", "--config", cfg, "--scratch", tmpfs.path / "scratch")
    assert proc.returncode == 4, proc.stderr
    [line] = errors(proc.stderr)
    # two wheels in the store; the clean checkout is read in place, so nothing is fetched into scratch
    assert f"{tmpfs.path}" in line and "No space left on device" in line and "needs 50.0 MB" in line, line
    assert leftovers(tmpfs.path) == [] and wheels(store) == []

    tmpfs.mount("size=200m")  # make room
    proc = kf("build", "--config", cfg, "--scratch", tmpfs.path / "scratch")
    assert proc.returncode == 0, proc.stderr
    assert wheels(store) == ["big-1.0.0+cpu-py3-none-any.whl", "big-1.0.0+cuda-py3-none-any.whl"]
    assert leftovers(tmpfs.path) == []


def _limit_file_size(limit: int) -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # write() fails with EFBIG instead of killing the process


def test_file_size_limit_during_fetch_is_exit_4_and_rerun_completes(big_repo: Path, tmp_path: Path) -> None:
    """RLIMIT_FSIZE: the limit is hit while the wheel is written into the store's work folder (no root needed;
    the clean checkout is read in place, so the write that fails is the wheel's)."""
    store, scratch = tmp_path / "store", tmp_path / "scratch"
    cfg = config(tmp_path, big_repo, store)
    env = clean_env()
    proc = subprocess.run([sys.executable, "-m", "kernel_factory", "build", "--config", str(cfg), "--scratch",
                           str(scratch)], capture_output=True, text=True, env=env,
                          preexec_fn=lambda: _limit_file_size(10 * MB))
    assert proc.returncode == 4, proc.stderr
    lines = errors(proc.stderr)
    assert len(lines) == 2, proc.stderr  # one per variant
    for line in lines:
        assert str(store / "files" / ".tmp-work-") in line and "File too large" in line, line
    assert "failed kernels-community/big@v1.0.0: " in proc.stderr  # the progress line says why
    assert leftovers(store) == [] and list(scratch.iterdir()) == [] and wheels(store) == []

    proc = kf("build", "--config", cfg, "--scratch", scratch, env=env)
    assert proc.returncode == 0, proc.stderr
    assert len(wheels(store)) == 2


def test_read_only_store_build_index_and_publish_exit_4(big_repo: Path, tmpfs: Tmpfs, tmp_path: Path) -> None:
    tmpfs.mount("size=200m")
    store = tmpfs.path / "store"
    cfg = config(tmp_path, big_repo, store)
    proc = kf("build", "--config", cfg, "--scratch", tmp_path / "scratch")
    assert proc.returncode == 0, proc.stderr
    (store / "files" / wheels(store)[0]).unlink()  # one wheel to build again
    tmpfs.mount("ro")

    proc = kf("build", "--config", cfg, "--scratch", tmp_path / "scratch")
    assert proc.returncode == 4, proc.stderr
    [line] = errors(proc.stderr)
    assert str(store) in line and "Read-only file system" in line, line
    print(line)

    proc = kf("index", "--store", store)
    assert proc.returncode == 4, proc.stderr
    [line] = errors(proc.stderr)
    assert str(store) in line and "Read-only file system" in line, line

    site = tmp_path / "site"
    site.mkdir()
    proc = kf("publish", "--store", tmp_path / "site", "--to", tmpfs.path / "published")
    assert proc.returncode == 4, proc.stderr
    [line] = errors(proc.stderr)
    assert str(tmpfs.path / "published") in line, line

    tmpfs.mount("rw")
    proc = kf("build", "--config", cfg, "--scratch", tmp_path / "scratch")
    assert proc.returncode == 0, proc.stderr
    assert len(wheels(store)) == 2 and leftovers(store) == []
    assert kf("index", "--store", store).returncode == 0


def test_index_into_a_full_folder_then_completes(big_repo: Path, tmpfs: Tmpfs, tmp_path: Path) -> None:
    """Index pages (and the wheels a separate --out needs) hit ENOSPC mid-way: exit 4, nothing half-written."""
    store = tmp_path / "store"
    cfg = config(tmp_path, big_repo, store)
    assert kf("build", "--config", cfg, "--scratch", tmp_path / "scratch").returncode == 0
    out = tmpfs.path / "site"
    filler = fill(tmpfs.path)
    proc = kf("index", "--store", store, "--out", out)
    assert proc.returncode == 4, proc.stderr
    [line] = errors(proc.stderr)
    assert str(out) in line and "No space left on device" in line, line
    assert leftovers(tmpfs.path) == []

    filler.unlink()  # make room
    proc = kf("index", "--store", store, "--out", out)
    assert proc.returncode == 0, proc.stderr
    assert (out / "simple" / "big" / "index.html").is_file() and leftovers(tmpfs.path) == []
