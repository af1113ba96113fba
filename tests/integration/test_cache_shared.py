"""A Hub cache others write too (issue 48), through the installed tool: ``local-kernels --cache`` and ``kernel-factory
download`` run as processes. A blob changed behind a snapshot is noticed on a rerun, a full disk with 16 KiB free
leaves nothing and says so, a read-only cache that holds the lock is not written, refs follow the lock, and in a
setgid group cache (umask 002) a second real user of the group adds another variant of the same commit.
huggingface_hub's scan_cache_dir is the oracle after each."""

from __future__ import annotations

import grp
import importlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import cached_venv, clean_env, run, tmpfs_at
from test_kernels_loaders import scan
from test_local_kernels_cache import SHA1, SNAP, VARIANT, cache_run, kernel_wheel
from test_local_kernels_offline import KERNELS_REQ, kernel_venv

pytestmark = pytest.mark.integration
sys.path.insert(0, str(Path(__file__).parents[1] / "unit"))
kit = importlib.import_module("download_kit")  # the unit tests' folder index (an index is a folder to download)
Index, index_wheel, CPU = kit.Index, kit.kernel_wheel, kit.CPU
SHA2 = "2" * 40
ROOT = os.geteuid() == 0


@pytest.fixture(scope="module")
def kernels_site() -> str:
    python = cached_venv("kernels", KERNELS_REQ)
    return run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip()


def test_a_rerun_reads_the_blobs_a_link_to_the_right_name_is_not_enough(tmp_path: Path, kernels_site: str) -> None:
    python = kernel_venv(tmp_path / "venv", kernels_site, kernel_wheel(tmp_path / "w"))
    cache = tmp_path / "cache"
    assert cache_run(python, cache, "--allow-org", "example").returncode == 0
    init = cache / SNAP / SHA1 / "build" / VARIANT / "__init__.py"
    blob = init.resolve()
    blob.chmod(0o644)
    blob.write_text("WHO = 'changed'\n")  # the link still names the right blob
    again = cache_run(python, cache, "--allow-org", "example")
    assert again.returncode == 3, again.stdout + again.stderr
    assert again.stderr.splitlines() == [
        f"not in the Hub cache: example/act: snapshot {SHA1} in {cache} already holds build/{VARIANT} with other "
        "bytes (written by local-kernels); left as it is: a commit's snapshot never changes; remove that snapshot "
        "to replace it"]
    assert scan(cache) == {"example/act": {SHA1: ["v1", "v1.0.0"]}}


@pytest.fixture
def tiny_tmpfs(tmp_path: Path) -> Iterator[Path]:
    with tmpfs_at(tmp_path / "tmpfs", "64k") as path:
        yield path


def test_a_full_disk_with_16_kib_free_leaves_nothing_of_the_kernel_and_says_so(
    tmp_path: Path, kernels_site: str, tiny_tmpfs: Path
) -> None:
    """Three small files fit; the refs did not, after the blobs and the snapshot were in (a whole snapshot was
    left, and the line said nothing was). Every ref's file is now written before a blob is published."""
    python = kernel_venv(tmp_path / "venv", kernels_site, kernel_wheel(tmp_path / "w"))
    cache = tiny_tmpfs / "cache"
    cache.mkdir()
    filler = tiny_tmpfs / "filler"
    free = shutil.disk_usage(tiny_tmpfs).free
    filler.write_bytes(b"\0" * max(0, free - 16 * 1024))
    assert 12 * 1024 <= shutil.disk_usage(tiny_tmpfs).free <= 16 * 1024
    proc = cache_run(python, cache, "--allow-org", "example")
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert proc.stderr.splitlines() == [
        f"error: the Hub cache {cache}: No space left on device (nothing of this kernel was left there); free space "
        "or fix its permissions, or give another folder: --cache DIR or KERNELS_CACHE"], proc.stderr
    assert scan(cache) == {}
    assert sorted(str(p.relative_to(cache)) for p in cache.rglob("*")) == [".locks", ".locks/kernel-factory"]


# -- download ----------------------------------------------------------------------------------------------------


class Project:
    """A folder index (as unit/download_kit.py writes it), a project with a kernels.lock, and the cache; every
    folder readable by all, for a second user."""

    def __init__(self, top: Path) -> None:
        self.top = top
        self.index = Index(top / "index")
        self.project = top / "project"
        self.project.mkdir()
        self.cache = top / "cache"

    def lock(self, sha: str) -> None:
        (self.project / "kernels.lock").write_text(json.dumps([
            {"dependency": {"repo-id": "org/relu", "version": 1}, "lock": {"commit": sha}}]))

    def download(self, cache: Path | None = None, umask: int = -1) -> subprocess.CompletedProcess[str]:
        """``kernel-factory download`` as a process, fitting this interpreter (torch 2.13 CPU)."""
        return subprocess.run([sys.executable, "-m", "kernel_factory", "download", str(self.project), "--index-url",
                               str(self.index.root), "--python", sys.executable],
                              env=clean_env(KERNELS_CACHE=str(cache or self.cache)), capture_output=True, text=True,
                              timeout=600, umask=umask)


@pytest.fixture
def proj() -> Iterator[Project]:
    top = Path(tempfile.mkdtemp(prefix="kf-cache-shared-"))
    top.chmod(0o755)
    try:
        yield Project(top)
    finally:
        shutil.rmtree(top, ignore_errors=True)


def test_refs_follow_the_lock_back_to_a_commit_already_in_the_cache(proj: Project) -> None:
    proj.index.add(index_wheel(proj.top / "w1", "relu"))
    proj.index.add(index_wheel(proj.top / "w2", "relu", "1.1.0", revision=SHA2))
    for sha in (SHA1, SHA2, SHA1):
        proj.lock(sha)
        got = proj.download()
        assert got.returncode == 0, got.stdout + got.stderr
        assert (proj.cache / "kernels--org--relu" / "refs" / "v1").read_text() == sha
    assert scan(proj.cache) == {"org/relu": {SHA1: ["v1"], SHA2: []}}


@pytest.mark.skipif(not ROOT, reason="a read-only bind mount needs root")
def test_a_lock_a_read_only_cache_satisfies_writes_nothing_and_exits_0(proj: Project) -> None:
    wheel = proj.index.add(index_wheel(proj.top / "w", "relu"))
    proj.lock(SHA1)
    assert proj.download().returncode == 0
    shutil.rmtree(proj.cache / ".locks")
    ro = proj.top / "ro"
    ro.mkdir()
    run("mount", "--bind", proj.cache, ro)
    try:
        run("mount", "-o", "remount,ro,bind", ro)
        got = proj.download(ro)
        assert got.returncode == 0, got.stdout + got.stderr
        assert got.stdout.splitlines() == [f"org/relu  {SHA1[:12]}  torch-universal  {wheel}  (already there)",
                                           f"1 kernel in {ro}: 0 downloaded, 1 already there"]
    finally:
        run("umount", ro)
    assert sorted(p.name for p in proj.cache.iterdir()) == ["kernels--org--relu"]
    assert scan(proj.cache) == {"org/relu": {SHA1: ["v1"]}}


@pytest.mark.skipif(not ROOT, reason="a second real user needs root")
def test_a_second_user_of_a_setgid_group_cache_adds_another_variant_of_the_commit(proj: Project) -> None:
    """root downloads relu's universal build (umask 002) into a setgid cache of group ``users``; then ``nobody``,
    a member of that group only, places the CPU build of the same commit (the writer itself, in a forked child
    that drops to that uid: the interpreter of this venv is not reachable for another user here). With the folders
    made 2755 it could not; made as huggingface_hub makes them (2775) it can."""
    group = grp.getgrnam("users").gr_gid
    proj.cache.mkdir()
    os.chown(proj.cache, 0, group)
    proj.cache.chmod(0o2775)
    proj.index.add(index_wheel(proj.top / "w", "relu"))
    proj.lock(SHA1)
    first = proj.download(umask=0o002)
    assert first.returncode == 0, first.stdout + first.stderr
    snap = proj.cache / "kernels--org--relu" / "snapshots" / SHA1
    assert {stat.S_IMODE(p.stat().st_mode) for p in (snap, snap / "build", snap / "build" / VARIANT)} == {0o2775}
    source = proj.top / "cpu-build"
    source.mkdir()
    (source / "__init__.py").write_text("X = 'cpu'\n")
    (source / "metadata.json").write_text("{}")
    source.chmod(0o755)
    code = _as_nobody(group, lambda: _place_cpu(proj.cache, source))
    assert code == 0, f"the second user's place failed: exit {code}"
    assert sorted(p.name for p in (snap / "build").iterdir()) == sorted([CPU, VARIANT])
    assert (snap / "build" / CPU / "__init__.py").read_text() == "X = 'cpu'\n"
    assert (snap / "build" / CPU).stat().st_uid == 65534
    assert scan(proj.cache) == {"org/relu": {SHA1: ["v1"]}}


def _place_cpu(cache: Path, source: Path) -> None:
    import hashlib

    from kernel_factory.local.cache import Placement, Writer

    files = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in source.iterdir()}
    Writer(cache, "download").place(Placement("org/relu", SHA1, CPU, source, files))


def _as_nobody(group: int, work: object) -> int:
    """Run ``work()`` in a forked child as uid 65534 with ``group`` its only group, umask 002; its exit code (0:
    returned, 1: raised, with the error on stderr)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            os.setgroups([group])
            os.setgid(group)
            os.setuid(65534)
            os.umask(0o002)
            work()  # type: ignore[operator]
            code = 0
        except BaseException as exc:  # noqa: BLE001 - reported by the exit code
            os.write(2, f"{type(exc).__name__}: {exc}\n".encode())
        finally:
            os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def _forge(cache: Path) -> Path:
    """Another writer of the repository folder: relu's __init__.py swapped for its own bytes and download's record
    rewritten to match (owned by that user)."""
    import hashlib

    snap = cache / "kernels--org--relu" / "snapshots" / SHA1
    evil = b"import os  # the attacker's\n"
    digest = hashlib.sha256(evil).hexdigest()
    (cache / "kernels--org--relu" / "blobs" / digest).write_bytes(evil)
    link = snap / "build" / "torch-universal" / "__init__.py"
    link.unlink()
    link.symlink_to(f"../../../../blobs/{digest}")
    record = snap / ".kernel-factory-download.json"
    data = json.loads(record.read_text())
    data["torch-universal"]["files"]["__init__.py"] = digest
    record.unlink()
    record.write_text(json.dumps(data))
    os.chown(record, 65534, 65534)
    return link


@pytest.mark.skipif(not ROOT, reason="a record of another user needs root to make")
def test_a_forged_record_is_no_shortcut_and_the_attackers_bytes_are_refused(proj: Project) -> None:
    proj.index.add(index_wheel(proj.top / "w", "relu"))
    proj.lock(SHA1)
    assert proj.download().returncode == 0
    link = _forge(proj.cache)
    got = proj.download()
    assert got.returncode == 3, got.stdout + got.stderr
    assert got.stderr.splitlines() == [
        f"error: org/relu: snapshot {SHA1} in {proj.cache} already holds build/torch-universal with other bytes "
        "(written by download); left as it is: a commit's snapshot never changes; remove that snapshot to replace it"]
    assert "(already there)" not in got.stdout
    assert link.read_bytes() == b"import os  # the attacker's\n"  # left as it is, and said so


def test_a_planted_link_at_the_repository_folder_is_neither_read_nor_written_through(proj: Project) -> None:
    proj.index.add(index_wheel(proj.top / "w", "relu"))
    proj.lock(SHA1)
    assert proj.download().returncode == 0
    elsewhere = proj.top / "attackers"
    (proj.cache / "kernels--org--relu").rename(elsewhere)
    (proj.cache / "kernels--org--relu").symlink_to(elsewhere, target_is_directory=True)
    got = proj.download()
    assert got.returncode == 4, got.stdout + got.stderr  # the cache is unusable as it is: LinkRefused, exit 4
    assert got.stderr.splitlines() == [
        f"error: {proj.cache}/kernels--org--relu -> {elsewhere}: a symbolic link in the Hub cache where kernel-factory "
        "expects a folder, and it never writes or reads through a link; remove the link (rm, not rm -r) and run again"]


@pytest.mark.parametrize("where", ["blob", "ref"])
def test_a_fifo_at_a_blob_or_a_ref_never_blocks_download(proj: Project, where: str) -> None:
    proj.index.add(index_wheel(proj.top / "w", "relu"))
    proj.lock(SHA1)
    assert proj.download().returncode == 0
    repo = proj.cache / "kernels--org--relu"
    shutil.rmtree(repo / "snapshots" / SHA1)
    fifo = repo / "refs" / "v1" if where == "ref" else next((repo / "blobs").iterdir())
    fifo.unlink()
    os.mkfifo(fifo)
    got = proj.download()  # subprocess.run's timeout (600 s) is the hang this stops
    assert got.returncode == 4, got.stdout + got.stderr
    assert got.stderr.splitlines()[-1].endswith(  # named as it is: a FIFO, not a link
        f"{fifo}: a FIFO in the Hub cache where kernel-factory expects a file; remove it and run again")


def test_a_planted_run_folder_1200_deep_is_swept(proj: Project) -> None:
    run_dir = proj.cache / ".locks" / "kernel-factory" / "run-0123456789abcdef"
    run_dir.mkdir(parents=True)
    fd = os.open(run_dir, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(1200):
        os.mkdir("d", dir_fd=fd)
        nxt = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = nxt
    os.close(fd)
    (run_dir / "owner").write_text("")
    proj.index.add(index_wheel(proj.top / "w", "relu"))
    proj.lock(SHA1)
    got = proj.download()
    assert got.returncode == 0, got.stdout + got.stderr
    assert not run_dir.exists()
    assert scan(proj.cache) == {"org/relu": {SHA1: ["v1"]}}


@pytest.mark.skipif(not ROOT, reason="a read-only bind mount and another user's record need root")
def test_another_users_read_only_cache_that_holds_the_lock_is_checked_not_written(proj: Project) -> None:
    """The record is another user's (no shortcut): the wheel is downloaded into a temporary folder outside the
    cache, compared with what the cache holds, and nothing is written: exit 0."""
    proj.index.add(index_wheel(proj.top / "w", "relu"))
    proj.lock(SHA1)
    assert proj.download().returncode == 0
    shutil.rmtree(proj.cache / ".locks")
    record = proj.cache / "kernels--org--relu" / "snapshots" / SHA1 / ".kernel-factory-download.json"
    os.chown(record, 65534, 65534)
    ro = proj.top / "ro"
    ro.mkdir()
    run("mount", "--bind", proj.cache, ro)
    try:
        run("mount", "-o", "remount,ro,bind", ro)
        got = proj.download(ro)
        assert got.returncode == 0, got.stdout + got.stderr
        assert got.stdout.splitlines()[-1] == f"1 kernel in {ro}: 1 downloaded, 0 already there"
    finally:
        run("umount", ro)
    assert sorted(p.name for p in proj.cache.iterdir()) == ["kernels--org--relu"]
    assert scan(proj.cache) == {"org/relu": {SHA1: ["v1"]}}
