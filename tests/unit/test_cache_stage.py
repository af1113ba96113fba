"""local/cache/stage.py directly: the rules on the files a caller promises (check_files), the files found below an
installed package (source_files), the checked copy of one file (stage_file), and the private scratch folder
(scratch_folder: its sweep of killed runs, its refusals), the blob hash and the link text a snapshot holds."""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kernel_factory.errors import Unreachable
from kernel_factory.local.cache import stage as cachestage
from kernel_factory.local.cache.stage import CacheRefused
from kernel_factory.nofollow import CHUNK, Folder, LinkRefused

H = "0123456789abcdef" * 4


def test_check_files_takes_plain_relative_paths_and_sha256_hex() -> None:
    cachestage.check_files({"a.py": H, "x/y/z.so": "f" * 64, "é.py": "0" * 64, "a b.txt": H}, "w")
    cachestage.check_files({}, "w")


@pytest.mark.parametrize("rel", ["", "/abs.py", "a\\b.py", "./a.py", "a/./b.py", "a/../b.py", "..", ".",
                                 "a//b.py", "a/", "a\nb", "a\x1fb", "a\x7fb", "\x00"])
def test_check_files_refuses_a_path_that_is_not_plain(rel: str) -> None:
    with pytest.raises(CacheRefused) as refused:
        cachestage.check_files({"ok.py": H, rel: H}, "where")
    assert str(refused.value) == f"where: {rel!r} is not a plain relative path; reinstall the wheel"


@pytest.mark.parametrize("digest", ["", H[:-1], H + "0", H.upper(), H[:-1] + "g", " " + H[1:], "-" + H[1:]])
def test_check_files_refuses_a_hash_that_is_not_sha256_hex(digest: str) -> None:
    with pytest.raises(CacheRefused) as refused:
        cachestage.check_files({"ok.py": H, "a.py": digest}, "where")
    assert str(refused.value) == "where: the hash given for a.py is not a sha256 hex digest; reinstall the wheel"


def test_check_files_limits_the_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cachestage, "MAX_FILES", 3)
    cachestage.check_files({f"{i}.py": H for i in range(3)}, "w")
    with pytest.raises(CacheRefused) as refused:
        cachestage.check_files({f"{i}.py": H for i in range(4)}, "w")
    assert str(refused.value) == "w: more than 3 files, more than a kernel variant holds"


def test_source_files_lists_files_below_sorted_without_bytecode(tmp_path: Path) -> None:
    src = tmp_path / "pkg"
    for rel in ("b.py", "a/z.so", "a/b/c.txt", "__init__.py", "x.pyc", "a/__pycache__/m.cpython-311.pyc",
                "__pycache__/n.pyc", "__pycache__/keep.txt", "a/__pycache__x/y.py"):
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(rel)
    (src / "empty").mkdir()
    assert cachestage.source_files(src, "w") == ["__init__.py", "a/__pycache__x/y.py", "a/b/c.txt", "a/z.so", "b.py"]


def test_source_files_refuses_what_is_not_a_folder_or_holds_a_link(tmp_path: Path) -> None:
    src = tmp_path / "pkg"
    with pytest.raises(CacheRefused) as missing:
        cachestage.source_files(src, "w")
    assert str(missing.value) == f"w: {src} is missing (uninstalled meanwhile?); reinstall the wheel"
    (tmp_path / "real").mkdir()
    src.symlink_to(tmp_path / "real")
    with pytest.raises(CacheRefused) as link:
        cachestage.source_files(src, "w")
    assert str(link.value) == f"w: {src} is not a folder (a link?); reinstall the wheel"
    src.unlink()
    (src / "sub").mkdir(parents=True)
    (src / "sub" / "ok.py").write_text("")
    (src / "sub" / "l").symlink_to(tmp_path / "real")
    with pytest.raises(CacheRefused) as inner:
        cachestage.source_files(src, "w")
    assert str(inner.value) == (f"w: {src / 'sub' / 'l'} is a link or a special file, which a kernel wheel never "
                                "installs; reinstall the wheel")
    (src / "sub" / "l").unlink()
    os.mkfifo(src / "sub" / "p")
    with pytest.raises(CacheRefused, match="is a link or a special file"):
        cachestage.source_files(src, "w")


def test_source_files_limits_the_count(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = tmp_path / "pkg"
    src.mkdir()
    for i in range(3):
        (src / f"{i}.py").write_text("")
    monkeypatch.setattr(cachestage, "MAX_FILES", 3)
    assert cachestage.source_files(src, "w") == ["0.py", "1.py", "2.py"]
    (src / "3.py").write_text("")
    with pytest.raises(CacheRefused) as refused:
        cachestage.source_files(src, "w")
    assert str(refused.value) == f"w: more than 3 files below {src}"


@pytest.fixture
def run(tmp_path: Path) -> Iterator[Folder]:
    folder = Folder.root(tmp_path / "run")
    yield folder
    folder.close()


@pytest.mark.parametrize("clone", [True, False])
@pytest.mark.parametrize("size", [0, 5, CHUNK + 3])
def test_stage_file_copies_hashes_and_sets_the_mode(tmp_path: Path, run: Folder, monkeypatch: pytest.MonkeyPatch,
                                                   clone: bool, size: int) -> None:
    data = os.urandom(size)
    (tmp_path / "src" / "d").mkdir(parents=True)
    (tmp_path / "src" / "d" / "f.so").write_bytes(data)
    def clone_by_copy(src: int, dst: int) -> bool:  # what a reflink leaves: the copy's bytes, read back by hash
        os.write(dst, os.pread(src, size + 1, 0))
        return True

    monkeypatch.setattr(cachestage, "_clone", clone_by_copy if clone else lambda src, dst: False)
    digest = cachestage.stage_file(tmp_path / "src", "d/f.so", run, "b-x", 0o444)
    staged = tmp_path / "run" / "b-x"
    assert digest == hashlib.sha256(data).hexdigest() == hashlib.sha256(staged.read_bytes()).hexdigest()
    assert stat.S_IMODE(staged.stat().st_mode) == 0o444
    assert staged.stat().st_ino != (tmp_path / "src" / "d" / "f.so").stat().st_ino  # a copy, never a hard link


def test_stage_file_with_a_failing_clone_copies(tmp_path: Path, run: Folder, monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[int] = []

    def no_clone(fd: int, op: int, arg: int) -> int:
        asked.append(op)
        raise OSError(errno.EOPNOTSUPP, "Operation not supported")

    monkeypatch.setattr(fcntl, "ioctl", no_clone)
    (tmp_path / "f").write_bytes(b"bytes")
    assert cachestage.stage_file(tmp_path, "f", run, "n", 0o400) == hashlib.sha256(b"bytes").hexdigest()
    assert (tmp_path / "run" / "n").read_bytes() == b"bytes"
    ioc_write, size_of_int = 1, 4  # linux/fs.h: FICLONE = _IOW(0x94, 9, int), the request a reflink is asked by
    assert asked == [ioc_write << 30 | size_of_int << 16 | 0x94 << 8 | 9]


def test_stage_file_refuses_a_link_or_a_special_file(tmp_path: Path, run: Folder) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "target").write_text("secret")
    (tmp_path / "src" / "l").symlink_to(tmp_path / "target")
    with pytest.raises(LinkRefused) as link:
        cachestage.stage_file(tmp_path / "src", "l", run, "n", 0o444)
    assert str(link.value).startswith(f"{tmp_path / 'src' / 'l'} -> {tmp_path / 'target'}: a symbolic link")
    assert "expects a file" in str(link.value)
    (tmp_path / "src" / "d").mkdir()
    with pytest.raises(CacheRefused) as folder:
        cachestage.stage_file(tmp_path / "src", "d", run, "n", 0o444)
    assert str(folder.value) == f"{tmp_path / 'src' / 'd'}: not a regular file; reinstall the wheel"
    assert os.listdir(tmp_path / "run") == []
    with pytest.raises(FileNotFoundError):
        cachestage.stage_file(tmp_path / "src", "none", run, "n", 0o444)


def test_stage_file_refuses_a_file_past_16_gib(tmp_path: Path, run: Folder, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "ok").write_bytes(b"")
    os.truncate(tmp_path / "ok", 16 << 30)  # sparse: exactly the limit is staged by its size (no read is tried)
    monkeypatch.setattr(cachestage, "_clone", lambda src, dst: True)
    monkeypatch.setattr(cachestage, "sha256_fd", lambda fd: "h")
    assert cachestage.stage_file(tmp_path, "ok", run, "n", 0o444) == "h"
    (tmp_path / "big").write_bytes(b"")
    os.truncate(tmp_path / "big", (16 << 30) + 1)
    with pytest.raises(CacheRefused) as refused:
        cachestage.stage_file(tmp_path, "big", run, "m", 0o444)
    assert str(refused.value) == f"{tmp_path / 'big'}: larger than 16 GiB; not a kernel's file"
    assert sorted(os.listdir(tmp_path / "run")) == ["n"]


def copy_of(tmp_path: Path, data: bytes) -> tuple[str, bytes]:
    """cachestage._copy of a file holding ``data``, read from its start: (the digest, the bytes written)."""
    (tmp_path / "src").write_bytes(data)
    src = os.open(tmp_path / "src", os.O_RDONLY)
    dst = os.open(tmp_path / "dst", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        return cachestage._copy(src, dst, tmp_path / "src"), (tmp_path / "dst").read_bytes()
    finally:
        os.close(src)
        os.close(dst)


def test_copy_refuses_a_file_that_grows_past_the_limit_while_read(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cachestage, "MAX_FILE_BYTES", 10)  # (the message gives whole GiB: 0 here)
    assert copy_of(tmp_path, b"aaaaabbbbb") == (hashlib.sha256(b"aaaaabbbbb").hexdigest(), b"aaaaabbbbb")
    with pytest.raises(CacheRefused) as refused:  # exactly the limit is copied; one byte more is not
        copy_of(tmp_path, b"a" * 10 + b"b")
    assert str(refused.value) == f"{tmp_path / 'src'}: grew past 0 GiB while read; not a kernel's file"


@pytest.mark.parametrize("size", [0, 1000, CHUNK, 2 * CHUNK + 7])
def test_copy_writes_every_byte_and_hashes_them(tmp_path: Path, size: int) -> None:
    data = os.urandom(size)
    assert copy_of(tmp_path, data) == (hashlib.sha256(data).hexdigest(), data)


def own_folder(root: Path) -> Path:
    own = root / ".locks" / "kernel-factory"
    own.mkdir(parents=True)
    return own


def test_the_sweep_removes_only_dead_run_folders(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    own = own_folder(root)
    old = time.time() - cachestage.STALE_S - 60
    (own / "run-noowner-old").mkdir()
    os.utime(own / "run-noowner-old", (old, old))
    (own / "run-noowner-new").mkdir()  # being made by a live run: left
    (own / "run-file").write_text("")  # not a folder: not ours to judge
    (own / "other").mkdir()  # not a run folder
    os.utime(own / "other", (old, old))
    (own / "run-dead").mkdir()
    (own / "run-dead" / "owner").write_text("")
    (tmp_path / "outside").mkdir()
    (own / "run-link").symlink_to(tmp_path / "outside")
    (own / "run-dead" / "l").symlink_to(tmp_path / "outside")
    (own / "run-badowner").mkdir()
    (own / "run-badowner" / "owner").symlink_to(tmp_path / "outside")
    with cachestage.scratch_folder(Folder.root(root)) as run:
        names = sorted(os.listdir(own))
        assert run.path.parent == own and run.path.name.startswith("run-") and len(run.path.name) == 4 + 16
        assert names == sorted(["run-noowner-new", "run-file", "other", "run-link", "run-badowner", run.path.name])
        assert stat.S_IMODE(os.fstat(run.fd).st_mode) == 0o700
        assert stat.S_IMODE(os.stat(run.path / "owner").st_mode) == 0o600
    assert sorted(os.listdir(own)) == sorted(["run-noowner-new", "run-file", "other", "run-link", "run-badowner"])
    assert os.path.isdir(tmp_path / "outside")


def test_a_run_holds_its_owner_lock_while_it_works(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    with cachestage.scratch_folder(Folder.root(root)) as run:
        fd = os.open(run.path / "owner", os.O_RDONLY)
        try:
            with pytest.raises(BlockingIOError):  # another open file description: flock conflicts
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)


def test_scratch_refuses_a_link_at_its_own_folder(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    (root / ".locks").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    (root / ".locks" / "kernel-factory").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(Unreachable) as refused, cachestage.scratch_folder(Folder.root(root)):
        pass
    assert str(refused.value).endswith("; the Hub cache's private folder must be a real folder")
    assert os.listdir(tmp_path / "elsewhere") == []


def test_scratch_on_a_read_only_cache_is_unreachable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "cache"
    own_folder(root)
    real_mkdir = os.mkdir

    def full(path: str, mode: int = 0o777, *, dir_fd: int | None = None) -> None:
        if str(path).startswith("run-"):
            raise OSError(errno.ENOSPC, "No space left on device")
        real_mkdir(path, mode, dir_fd=dir_fd)

    monkeypatch.setattr(os, "mkdir", full)
    with pytest.raises(Unreachable) as refused, cachestage.scratch_folder(Folder.root(root)):
        pass
    assert str(refused.value).startswith(f"{root / '.locks' / 'kernel-factory'}: No space left on device")

    def no_locks(path: str, mode: int = 0o777, *, dir_fd: int | None = None) -> None:
        raise OSError(errno.EROFS, "Read-only file system")

    other = Folder.root(tmp_path / "other")
    monkeypatch.setattr(os, "mkdir", no_locks)
    with pytest.raises(Unreachable) as ro, cachestage.scratch_folder(other):
        pass
    assert str(ro.value).startswith(f"{tmp_path / 'other' / '.locks'}: Read-only file system")


def test_blob_mode_drops_every_write_bit(tmp_path: Path) -> None:
    (tmp_path / "blobs").mkdir()
    old = os.umask(0o002)
    try:
        with Folder.root(tmp_path / "blobs") as blobs:
            assert cachestage.blob_mode(blobs) == 0o444
        os.umask(0o077)
        with Folder.root(tmp_path / "blobs") as blobs:
            assert cachestage.blob_mode(blobs) == 0o400
        os.umask(0)  # every write bit the umask leaves is dropped, the others' too
        with Folder.root(tmp_path / "blobs") as blobs:
            assert cachestage.blob_mode(blobs) == 0o444
    finally:
        os.umask(old)
    assert os.listdir(tmp_path / "blobs") == []


@pytest.mark.parametrize("size", [0, 1, CHUNK - 1, CHUNK, 2 * CHUNK + 7])
def test_sha256_fd_hashes_the_whole_file_from_its_start(tmp_path: Path, size: int) -> None:
    data = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
    (tmp_path / "f").write_bytes(data)
    fd = os.open(tmp_path / "f", os.O_RDONLY)
    try:
        os.read(fd, 5)  # wherever the descriptor stands
        assert cachestage.sha256_fd(fd) == hashlib.sha256(data).hexdigest()
        assert cachestage.sha256_fd(fd) == hashlib.sha256(data).hexdigest()  # again: from the start
    finally:
        os.close(fd)


@pytest.mark.parametrize(("rel", "text"), [
    ("a.py", "../../../../blobs/h"),
    ("x/a.py", "../../../../../blobs/h"),
    ("x/y/a.so", "../../../../../../blobs/h"),
])
def test_relative_blob_resolves_from_the_snapshot_to_the_blob(tmp_path: Path, rel: str, text: str) -> None:
    assert cachestage.relative_blob(rel, "h") == text
    repo = tmp_path / "kernels--org--act"
    link = repo / "snapshots" / ("a" * 40) / "build" / "torch-universal" / rel
    link.parent.mkdir(parents=True)
    (repo / "blobs").mkdir()
    (repo / "blobs" / "h").write_text("blob")
    link.symlink_to(cachestage.relative_blob(rel, "h"))
    assert link.read_text() == "blob"
