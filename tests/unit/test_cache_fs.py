"""local/cache/fs.py directly: folders of the Hub cache opened one level at a time, never through a link; the
capped read, the removal by descriptors, the blob hash and the link text a snapshot holds."""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from kernel_factory.atomic import CHUNK
from kernel_factory.local.cache import fs as cachefs
from kernel_factory.local.cache.fs import CacheLink, Folder

HINT = "and it never writes or reads through one; remove the link (rm, not rm -r) and run again"


@pytest.fixture
def top(tmp_path: Path) -> Iterator[Folder]:
    folder = Folder.root(tmp_path / "cache")
    yield folder
    folder.close()


def test_planted_names_the_link_and_its_target(tmp_path: Path) -> None:
    (tmp_path / "l").symlink_to("/elsewhere")
    assert str(cachefs.planted(tmp_path / "l")) == (
        f"{tmp_path / 'l'} -> /elsewhere: a symbolic link in the Hub cache where kernel-factory expects a folder, "
        + HINT)
    (tmp_path / "f").write_text("")  # not a link: the path alone
    assert str(cachefs.planted(tmp_path / "f", "file")) == (
        f"{tmp_path / 'f'}: a symbolic link in the Hub cache where kernel-factory expects a file, " + HINT)


def test_the_root_is_made_and_may_be_a_link(tmp_path: Path) -> None:
    with Folder.root(tmp_path / "a" / "b") as root:
        assert (tmp_path / "a" / "b").is_dir() and root.path == tmp_path / "a" / "b"
        assert os.get_inheritable(root.fd) is False  # no process kernel-factory starts holds the cache open
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "x").write_text("")
    (tmp_path / "home").symlink_to(tmp_path / "real")
    with Folder.root(tmp_path / "home") as root:  # the user's choice: followed
        assert root.names() == ["x"] and root.kind("x") == "file"


def test_kind_of_each_entry_without_following_links(tmp_path: Path, top: Folder) -> None:
    base = tmp_path / "cache"
    (base / "d").mkdir()
    (base / "f").write_text("x")
    (base / "l").symlink_to(base / "d")
    (base / "dangling").symlink_to(base / "missing")
    os.mkfifo(base / "p")
    assert {n: top.kind(n) for n in ["d", "f", "l", "dangling", "p", "none"]} == {
        "d": "dir", "f": "file", "l": "link", "dangling": "link", "p": "other", "none": None}
    st = top.lstat("l")
    assert st is not None and stat.S_ISLNK(st.st_mode)
    assert top.lstat("none") is None
    assert sorted(top.names()) == ["d", "dangling", "f", "l", "p"]


def test_sub_opens_a_real_folder_and_makes_one_with_its_mode(tmp_path: Path, top: Folder) -> None:
    old = os.umask(0o022)
    try:
        with top.sub("made", create=True, mode=0o750) as made:
            assert made.path == tmp_path / "cache" / "made"
            assert stat.S_IMODE(os.stat(tmp_path / "cache" / "made").st_mode) == 0o750
            with made.sub("inner", create=True) as inner:  # the default mode: 0o777 less the umask
                assert stat.S_IMODE(os.fstat(inner.fd).st_mode) == 0o755
                assert os.get_inheritable(inner.fd) is False and os.get_inheritable(made.fd) is False
                os.close(os.open("file", os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=inner.fd))  # relative to it
        assert (tmp_path / "cache" / "made" / "inner" / "file").is_file()
        with top.sub("made", create=True, mode=0o700) as again:  # already there: opened, its mode kept
            assert again.names() == ["inner"]
            assert stat.S_IMODE(os.stat(tmp_path / "cache" / "made").st_mode) == 0o750
    finally:
        os.umask(old)


def test_sub_refuses_a_link_or_a_file_and_says_where_one_is_missing(tmp_path: Path, top: Folder) -> None:
    base = tmp_path / "cache"
    (tmp_path / "outside").mkdir()
    (base / "l").symlink_to(tmp_path / "outside")
    (base / "f").write_text("x")
    with pytest.raises(CacheLink) as link:
        top.sub("l")
    assert str(link.value).startswith(f"{base / 'l'} -> {tmp_path / 'outside'}: a symbolic link in the Hub cache "
                                      "where kernel-factory expects a folder")
    with pytest.raises(CacheLink) as link:
        top.sub("l", create=True)  # made or not, never followed
    assert list((tmp_path / "outside").iterdir()) == []
    with pytest.raises(CacheLink) as file:
        top.sub("f")
    assert str(file.value).startswith(f"{base / 'f'}: a symbolic link in the Hub cache where kernel-factory expects "
                                      "a folder")
    with pytest.raises(FileNotFoundError) as missing:
        top.sub("none")
    assert missing.value.errno == errno.ENOENT and missing.value.filename in ("none", str(base / "none"))


def test_open_file_opens_only_a_regular_file(tmp_path: Path, top: Folder) -> None:
    base = tmp_path / "cache"
    (base / "f").write_bytes(b"bytes")
    (base / "l").symlink_to(base / "f")
    (base / "d").mkdir()
    fd = top.open_file("f")
    try:
        assert os.read(fd, 100) == b"bytes"
        assert os.get_inheritable(fd) is False
    finally:
        os.close(fd)
    for name in ("l", "d"):
        with pytest.raises(CacheLink) as refused:
            top.open_file(name)
        assert str(refused.value).startswith(f"{base / name}") and "expects a file" in str(refused.value)
    with pytest.raises(FileNotFoundError):
        top.open_file("none")


def test_open_file_closes_what_it_refuses(tmp_path: Path, top: Folder) -> None:
    (tmp_path / "cache" / "d").mkdir()
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(5):
        with pytest.raises(CacheLink):
            top.open_file("d")
    assert len(os.listdir("/proc/self/fd")) == before


def test_read_small_reads_up_to_its_limit_and_nothing_else(tmp_path: Path, top: Folder) -> None:
    base = tmp_path / "cache"
    (base / "ten").write_bytes(b"0123456789")
    (base / "l").symlink_to(base / "ten")
    (base / "d").mkdir()
    assert top.read_small("ten", 10) == b"0123456789"
    assert top.read_small("ten", 11) == b"0123456789"
    assert top.read_small("ten", 9) is None
    assert top.read_small("ten", 0) is None
    (base / "empty").write_bytes(b"")
    assert top.read_small("empty", 0) == b""
    assert [top.read_small(n, 100) for n in ("l", "d", "none")] == [None, None, None]


def test_remove_takes_a_tree_by_descriptors_and_never_follows_a_link(tmp_path: Path, top: Folder) -> None:
    base = tmp_path / "cache"
    outside = tmp_path / "outside"
    (outside / "keep").mkdir(parents=True)
    (outside / "keep" / "file").write_text("mine")
    (base / "t" / "a" / "b").mkdir(parents=True)
    (base / "t" / "a" / "b" / "deep").write_text("x")
    (base / "t" / "a" / "f").write_text("y")
    (base / "t" / "link").symlink_to(outside)
    (base / "t" / "a" / "flink").symlink_to(outside / "keep" / "file")
    (base / "single").write_text("z")
    (base / "other").mkdir()
    cachefs.remove(top, "t")
    cachefs.remove(top, "single")
    cachefs.remove(top, "none")  # nothing there: nothing done
    assert sorted(os.listdir(base)) == ["other"]
    assert (outside / "keep" / "file").read_text() == "mine"
    (base / "l2").symlink_to(outside)
    cachefs.remove(top, "l2")
    assert not os.path.lexists(base / "l2") and (outside / "keep" / "file").read_text() == "mine"


@pytest.mark.parametrize("size", [0, 1, CHUNK - 1, CHUNK, 2 * CHUNK + 7])
def test_sha256_fd_hashes_the_whole_file_from_its_start(tmp_path: Path, size: int) -> None:
    data = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
    (tmp_path / "f").write_bytes(data)
    fd = os.open(tmp_path / "f", os.O_RDONLY)
    try:
        os.read(fd, 5)  # wherever the descriptor stands
        assert cachefs.sha256_fd(fd) == hashlib.sha256(data).hexdigest()
        assert cachefs.sha256_fd(fd) == hashlib.sha256(data).hexdigest()  # again: from the start
    finally:
        os.close(fd)


@pytest.mark.parametrize(("rel", "text"), [
    ("a.py", "../../../../blobs/h"),
    ("x/a.py", "../../../../../blobs/h"),
    ("x/y/a.so", "../../../../../../blobs/h"),
])
def test_relative_blob_resolves_from_the_snapshot_to_the_blob(tmp_path: Path, rel: str, text: str) -> None:
    assert cachefs.relative_blob(rel, "h") == text
    repo = tmp_path / "kernels--org--act"
    link = repo / "snapshots" / ("a" * 40) / "build" / "torch-universal" / rel
    link.parent.mkdir(parents=True)
    (repo / "blobs").mkdir()
    (repo / "blobs" / "h").write_text("blob")
    link.symlink_to(cachefs.relative_blob(rel, "h"))
    assert link.read_text() == "blob"


def test_fsync_and_close(tmp_path: Path) -> None:
    folder = Folder.root(tmp_path / "c")
    folder.fsync()
    fd = folder.fd
    with folder:
        pass
    with pytest.raises(OSError) as closed:
        os.fstat(fd)
    assert closed.value.errno == errno.EBADF


def test_open_file_passes_other_errors_through(tmp_path: Path, top: Folder, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only ELOOP means a link: a stale NFS handle (a shared cache on NFS) or a missing file is said as it is."""
    def stale(*args: object, **kw: object) -> int:
        raise OSError(errno.ESTALE, "Stale file handle")

    monkeypatch.setattr(os, "open", stale)
    with pytest.raises(OSError) as raised:
        top.open_file("f")
    assert type(raised.value) is OSError and raised.value.errno == errno.ESTALE
    with pytest.raises(OSError) as sub:
        top.sub("d")
    assert type(sub.value) is OSError and sub.value.errno == errno.ESTALE
    assert sub.value.filename == str(top.path / "d")  # an error without a file name is given the folder's path
