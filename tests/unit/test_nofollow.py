"""nofollow.py, the one home of link-safe access: ``Folder`` (folders opened one level at a time, never through a
link), the removal by descriptors, the path checks, ``Tree`` (an index or publish root's writes and removals
through folder descriptors) and ``LinkRefused``, its one refusal (exit 4), naming what it found; the atomic
writes by path, the stale temporary files' sweep and the hash-while-copy."""

from __future__ import annotations

import errno
import os
import socket
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kernel_factory import nofollow
from kernel_factory.errors import EXIT_UNREACHABLE, Refused, Unreachable, UsageError
from kernel_factory.nofollow import Folder, LinkRefused, Tree, atomic_open, remove, remove_stale_tmp, write_bytes

HINT = "remove the link (rm, not rm -r) and run again"


@pytest.fixture
def top(tmp_path: Path) -> Iterator[Folder]:
    folder = Folder.root(tmp_path / "cache")
    yield folder
    folder.close()


def test_each_refusal_names_what_it_found(tmp_path: Path, top: Folder) -> None:
    """One message for every refusal: a link with its target, else what stands there as it is (a FIFO is a FIFO,
    not a link), and the place where the Folder says."""
    base = tmp_path / "cache"
    (base / "l").symlink_to("/elsewhere")
    (base / "f").write_text("")
    (base / "d").mkdir()
    os.mkfifo(base / "p")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(base / "s"))
    try:
        assert str(top.refuse("l")) == (f"{base / 'l'} -> /elsewhere: a symbolic link where kernel-factory expects a "
                                        "folder, and it never writes or reads through a link; " + HINT)
        assert str(top.refuse("f")) == (f"{base / 'f'}: a file where kernel-factory expects a folder; remove it and "
                                        "run again")
        assert [top.refuse(n, "file").found for n in ("l", "f", "d", "p", "s", "none")] == [
            "a symbolic link", "a file", "a folder", "a FIFO", "a socket", "nothing"]
        assert nofollow.refuse("/dev/null", "file").found == "a device"
        with pytest.raises(LinkRefused, match=rf"^{base / 's'}: a socket where kernel-factory expects a file; "):
            top.open_file("s")
        with nofollow.Folder.root(base, nofollow.HUB_CACHE) as hub:
            assert str(hub.refuse("p", "file")) == (f"{base / 'p'}: a FIFO in the Hub cache where kernel-factory "
                                                    "expects a file; remove it and run again")
            with hub.sub("d") as d:
                assert d.where == nofollow.HUB_CACHE  # kept below
    finally:
        sock.close()


def test_a_link_refusal_exits_4_as_an_unusable_destination() -> None:
    """One exit code for every link refusal: the destination (a store, an index root, the Hub cache) is unusable as
    it is until the planted thing is removed; not a usage error, not a refused item."""
    assert LinkRefused("x").exit_code == EXIT_UNREACHABLE == 4
    assert issubclass(LinkRefused, Unreachable) and not issubclass(LinkRefused, (UsageError, Refused))


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
    with pytest.raises(LinkRefused) as link:
        top.sub("l")
    assert str(link.value).startswith(f"{base / 'l'} -> {tmp_path / 'outside'}: a symbolic link where "
                                      "kernel-factory expects a folder")
    with pytest.raises(LinkRefused) as link:
        top.sub("l", create=True)  # made or not, never followed
    assert list((tmp_path / "outside").iterdir()) == []
    with pytest.raises(LinkRefused) as file:
        top.sub("f")
    assert str(file.value) == f"{base / 'f'}: a file where kernel-factory expects a folder; remove it and run again"
    with pytest.raises(FileNotFoundError) as missing:
        top.sub("none")
    assert missing.value.errno == errno.ENOENT and missing.value.filename == str(base / "none")  # its whole path


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
        with pytest.raises(LinkRefused) as refused:
            top.open_file(name)
        assert str(refused.value).startswith(f"{base / name}") and "expects a file" in str(refused.value)
    with pytest.raises(FileNotFoundError):
        top.open_file("none")


def test_open_file_closes_what_it_refuses(tmp_path: Path, top: Folder) -> None:
    (tmp_path / "cache" / "d").mkdir()
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(5):
        with pytest.raises(LinkRefused):
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
    remove(top, "t")
    remove(top, "single")
    remove(top, "none")  # nothing there: nothing done
    assert sorted(os.listdir(base)) == ["other"]
    assert (outside / "keep" / "file").read_text() == "mine"
    (base / "l2").symlink_to(outside)
    remove(top, "l2")
    assert not os.path.lexists(base / "l2") and (outside / "keep" / "file").read_text() == "mine"


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


# -- Tree: an index or publish root's writes, never through a link (issue 26 item 4, issue 49) ------------------
def test_a_page_whose_name_is_a_link_is_replaced_and_its_target_kept(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"secret")
    out = tmp_path / "out"
    (out / "simple").mkdir(parents=True)
    (out / "simple" / "index.html").symlink_to(victim)
    assert Tree(out).write("simple/index.html", b"page") is True
    assert victim.read_bytes() == b"secret"
    assert not (out / "simple" / "index.html").is_symlink() and (out / "simple" / "index.html").read_bytes() == b"page"
    assert [p.name for p in (out / "simple").iterdir()] == ["index.html"]  # no temporary left


def test_a_folder_that_is_a_link_is_refused_for_writes_and_removals(tmp_path: Path) -> None:
    victims = tmp_path / "victimdir"
    (victims / "x").mkdir(parents=True)
    (victims / "x" / "index.html").write_bytes(b"theirs")
    out = tmp_path / "out"
    out.mkdir()
    (out / "projects").symlink_to(victims)
    tree = Tree(out)
    with pytest.raises(LinkRefused) as exc:
        tree.write("projects/y/index.html", b"page")
    assert str(exc.value) == (f"{out}/projects -> {victims}: a symbolic link where kernel-factory expects a folder, "
                              "and it never writes or reads through a link; " + HINT)
    with pytest.raises(LinkRefused):
        tree.remove("projects/x/index.html")
    assert sorted(p.relative_to(victims).as_posix() for p in victims.rglob("*")) == ["x", "x/index.html"]


def test_a_folder_swapped_for_a_link_after_a_write_is_refused_and_never_written_through(tmp_path: Path) -> None:
    """The old Tree lstat'ed each folder once and then wrote by path: a folder swapped for a link after its first
    write was followed. Each write now opens its folders again without following a link: refused, nothing written
    in the link's target."""
    out = tmp_path / "out"
    victims = tmp_path / "victims"
    victims.mkdir()
    tree = Tree(out)
    assert tree.write("projects/x/index.html", b"one") is True
    (out / "projects").rename(tmp_path / "moved")
    (out / "projects").symlink_to(victims)
    (victims / "x").mkdir()
    with pytest.raises(LinkRefused, match=rf"^{out}/projects -> {victims}: a symbolic link where"):
        tree.write("projects/x/index.html", b"two")
    with pytest.raises(LinkRefused):
        tree.write("projects/x/other.html", b"two")
    with pytest.raises(LinkRefused):
        tree.remove("projects/x/index.html")
    assert list((victims / "x").iterdir()) == []
    (out / "projects").unlink()
    (out / "projects").mkdir()
    (out / "projects" / "x").symlink_to(victims / "x")  # one level down
    with pytest.raises(LinkRefused, match=rf"^{out}/projects/x -> {victims / 'x'}: a symbolic link"):
        tree.write("projects/x/index.html", b"three")
    assert list((victims / "x").iterdir()) == []


def test_tree_writes_skip_equal_bytes_remove_empty_folders_and_hold_no_descriptor(tmp_path: Path) -> None:
    out = tmp_path / "out"
    tree = Tree(out)
    before = len(os.listdir("/proc/self/fd"))
    assert tree.checked("simple") is None and Tree(tmp_path / "none").checked("") is None
    (tmp_path / "afile").write_text("")
    assert Tree(tmp_path / "afile").checked("x") is None and Tree(tmp_path / "afile").remove("x/y.html") == 0
    assert [tree.write(f"simple/p{i}/index.html", b"page") for i in range(50)] == [True] * 50
    page = out / "simple" / "p0" / "index.html"
    mtime = page.stat().st_mtime_ns
    assert tree.write("simple/p0/index.html", b"page") is False and page.stat().st_mtime_ns == mtime
    assert tree.write("simple/p0/index.html", b"new") is True and page.read_bytes() == b"new"
    assert stat.S_IMODE(page.stat().st_mode) == 0o644
    assert tree.write("top.html", b"at the root") is True and (out / "top.html").read_bytes() == b"at the root"
    assert len(os.listdir("/proc/self/fd")) == before
    assert tree.checked("simple/p0") == str(out / "simple" / "p0")
    assert tree.folder("made/here") == str(out / "made" / "here")
    assert (out / "made" / "here").is_dir()
    assert tree.remove("simple/p0/index.html") == 1 and not (out / "simple" / "p0").exists()
    assert tree.remove("simple/p0/index.html") == 0 and tree.remove("none/x.html") == 0
    assert tree.remove("top.html") == 1 and out.is_dir()
    assert not [p for p in out.rglob(".tmp-*")]


def test_a_failed_tree_write_leaves_no_temporary_and_names_the_file(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    tree = Tree(out)
    tree.write("simple/index.html", b"old")

    def full(fd: int, data: bytes) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(OSError) as raised:
        tree.write("simple/index.html", b"new")
    assert raised.value.filename == str(out / "simple" / "index.html")
    assert os.listdir(out / "simple") == ["index.html"] and (out / "simple" / "index.html").read_bytes() == b"old"


def test_open_nofollow_and_real_folder_refuse_what_is_not_expected(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"x")
    (tmp_path / "l").symlink_to(tmp_path / "f")
    os.mkfifo(tmp_path / "p")
    fd = nofollow.open_nofollow(tmp_path / "f")
    try:
        assert os.read(fd, 10) == b"x" and os.get_blocking(fd)
    finally:
        os.close(fd)
    with pytest.raises(LinkRefused, match=rf"^{tmp_path / 'l'} -> {tmp_path / 'f'}: a symbolic link where "
                                          "kernel-factory expects a wheel"):
        nofollow.open_nofollow(tmp_path / "l", "wheel")
    with pytest.raises(LinkRefused, match=rf"^{tmp_path / 'p'}: a FIFO where kernel-factory expects a file"):
        nofollow.open_nofollow(tmp_path / "p")  # at once: never blocked waiting for a writer
    with pytest.raises(FileNotFoundError):
        nofollow.open_nofollow(tmp_path / "none")
    nofollow.real_folder(tmp_path)
    nofollow.real_folder(tmp_path / "none")
    with pytest.raises(LinkRefused, match="a file where kernel-factory expects a folder"):
        nofollow.real_folder(tmp_path / "f")
    assert nofollow.link_problem(tmp_path / "l") == f"{tmp_path / 'l'} -> {tmp_path / 'f'}"
    assert nofollow.link_problem(tmp_path / "f") is None and nofollow.link_problem(tmp_path / "none") is None


def test_sweep_removes_what_it_is_told_by_descriptors_and_never_walks_into_a_link(tmp_path: Path) -> None:
    out, victims = tmp_path / "out", tmp_path / "victims"
    (victims / "p").mkdir(parents=True)
    (victims / "p" / "index.html").write_bytes(b"theirs")
    tree = Tree(out)
    for rel in ("simple/a/index.html", "simple/b/index.html", "simple/b/notes.txt", "simple/.tmp-x"):
        tree.write(rel, b"x")
    (out / "simple" / "l").symlink_to(victims)  # a link inside: removed only if named, never walked into
    (out / "simple" / "b" / "index.json").symlink_to(victims / "p" / "index.html")  # named: the link itself goes
    deep = out / "simple" / "d"
    (deep / "/".join(["x"] * (nofollow.SWEEP_DEPTH + 1))).mkdir(parents=True)  # deeper than a page: left
    (deep / "/".join(["x"] * (nofollow.SWEEP_DEPTH + 1)) / "index.html").write_bytes(b"deep")

    def doomed(rel: str) -> bool:
        return rel.endswith(("/index.html", "/index.json", ".tmp-x")) and rel != "simple/a/index.html"

    assert tree.sweep("simple", doomed) == 3  # b's page and link, the temporary file
    assert sorted(p.relative_to(out / "simple").as_posix() for p in (out / "simple").iterdir()) == [
        "a", "b", "d", "l"]
    assert os.listdir(out / "simple" / "b") == ["notes.txt"]
    assert (victims / "p" / "index.html").read_bytes() == b"theirs" and (deep / "x").is_dir()
    assert tree.sweep("variants", doomed) == 0  # none there
    tree.write("projects/gone/index.html", b"x")
    assert tree.sweep("projects", doomed) == 1 and not (out / "projects").exists()  # emptied folders go, top too
    (out / "projects").symlink_to(victims)
    with pytest.raises(LinkRefused):
        tree.sweep("projects", doomed)
    assert (victims / "p" / "index.html").read_bytes() == b"theirs"


def test_tree_write_writes_a_page_only_when_its_bytes_change(tmp_path: Path) -> None:
    page = tmp_path / "index.html"
    tree = Tree(tmp_path)
    assert tree.write("index.html", b"a") is True
    assert tree.write("index.html", b"a") is False
    assert tree.write("index.html", b"a2") is True
    assert page.read_bytes() == b"a2"
    assert not [p for p in tmp_path.rglob(".tmp-*")]


def test_write_bytes_is_atomic_and_skips_equal_content(tmp_path: Path) -> None:
    target = tmp_path / "a" / "page.html"
    assert write_bytes(target, b"one")
    mtime = target.stat().st_mtime_ns
    assert not write_bytes(target, b"one")  # same bytes: not rewritten
    assert target.stat().st_mtime_ns == mtime
    assert write_bytes(target, b"two") and target.read_bytes() == b"two"
    assert [p.name for p in target.parent.iterdir()] == ["page.html"]


def test_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "page.html"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError), atomic_open(target) as f:
        f.write(b"half")
        raise RuntimeError("killed")
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["page.html"]


def test_remove_stale_tmp_everywhere_below_root_but_not_fresh_ones(tmp_path: Path) -> None:
    old = time.time() - 7200
    stale_file = tmp_path / "simple" / "x" / ".tmp-abc"
    stale_dir = tmp_path / "files" / ".tmp-work-1"
    fresh = tmp_path / ".tmp-fresh"
    keep = tmp_path / "simple" / "x" / "index.html"
    for p in (stale_file, keep, fresh):
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"x")
    (stale_dir / "job").mkdir(parents=True)
    (stale_dir / "job" / "w.whl").write_bytes(b"x")
    for p in (stale_file, stale_dir):
        os.utime(p, (old, old))
    assert remove_stale_tmp(tmp_path, time.time() - 3600) == 2
    assert not stale_file.exists() and not stale_dir.exists()
    assert fresh.exists() and keep.exists()


def test_folder_destination_clears_a_killed_publishs_leftovers(tmp_path: Path) -> None:
    from kernel_factory.publish.directory import STALE_TMP_S, DirectoryDestination

    dest = tmp_path / "dest"
    leftover = dest / "files" / ".tmp-0123"
    live = dest / "files" / ".tmp-4567"  # another publish may be writing this one right now
    for p in (leftover, live):
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"half a wheel")
    then = time.time() - STALE_TMP_S - 60
    os.utime(leftover, (then, then))
    DirectoryDestination(dest).prepare([])
    assert not leftover.exists() and live.exists()


def test_the_stale_sweep_leaves_links_alone(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    (victim / "inner").mkdir(parents=True)
    (victim / "inner" / "f").write_bytes(b"theirs")
    root = tmp_path / "store"
    root.mkdir()
    (root / ".tmp-dir").symlink_to(victim)
    (root / ".tmp-file").symlink_to(victim / "inner" / "f")
    old = time.time() - 7200
    for p in (root / ".tmp-dir", root / ".tmp-file"):
        os.utime(p, (old, old), follow_symlinks=False)
    assert remove_stale_tmp(root, time.time()) == 0
    assert (victim / "inner" / "f").read_bytes() == b"theirs"
    assert (root / ".tmp-dir").is_symlink() and (root / ".tmp-file").is_symlink()


def test_copy_file_puts_nothing_when_the_bytes_are_not_the_expected_ones(tmp_path: Path) -> None:
    import hashlib

    from kernel_factory.errors import DigestMismatch
    from kernel_factory.nofollow import LinkRefused, copy_file

    src = tmp_path / "a.whl"
    src.write_bytes(b"wheel")
    with pytest.raises(DigestMismatch):
        copy_file(src, tmp_path / "out" / "a.whl", hashlib.sha256(b"other").hexdigest())
    assert list((tmp_path / "out").iterdir()) == []
    (tmp_path / "link.whl").symlink_to(src)
    with pytest.raises(LinkRefused):
        copy_file(tmp_path / "link.whl", tmp_path / "out" / "b.whl")
    copy_file(src, tmp_path / "out" / "a.whl", hashlib.sha256(b"wheel").hexdigest())
    assert (tmp_path / "out" / "a.whl").read_bytes() == b"wheel"


def test_every_private_name_is_private() -> None:
    from kernel_factory.index.state import STATE_FILE
    from kernel_factory.nofollow import PRIVATE_NAMES, TMP_PREFIX, private
    from kernel_factory.store.catalog import CATALOG_FILE
    from kernel_factory.store.lock import LOCK_NAME

    assert set(PRIVATE_NAMES) == {STATE_FILE, CATALOG_FILE, LOCK_NAME}
    assert all(private(n) for n in (*PRIVATE_NAMES, f"{TMP_PREFIX}x"))
    assert not any(private(n) for n in ("index.html", "files", "a.whl"))


def test_stream_digest_copies_hashes_and_stops_past_its_limit() -> None:
    """The one hash-while-copy loop: every byte hashed and written; more than ``limit`` raises ``too_big()`` before
    the chunk past it is written; exactly ``limit`` is taken. ``Hashing`` is the same sink, fed by hand."""
    import hashlib
    import io

    from kernel_factory.nofollow import CHUNK, Hashing, stream_digest

    data = os.urandom(2 * CHUNK + 5)
    out = io.BytesIO()
    assert stream_digest(io.BytesIO(data), out=out) == hashlib.sha256(data).hexdigest() and out.getvalue() == data
    assert stream_digest(io.BytesIO(data), "md5") == hashlib.md5(data).hexdigest()
    assert stream_digest(io.BytesIO(b"x" * 10), limit=10, too_big=lambda: OSError("big")) == \
        hashlib.sha256(b"x" * 10).hexdigest()
    out = io.BytesIO()
    with pytest.raises(OSError, match="^big$"):
        stream_digest(io.BytesIO(data), out=out, limit=CHUNK + 1, too_big=lambda: OSError("big"))
    assert out.getvalue() == data[:CHUNK]  # the second chunk crosses the limit: not written
    sink = Hashing(limit=3, too_big=lambda: ValueError("past 3"))
    sink.write(b"ab")
    sink.write(b"c")
    assert sink.size == 3 and sink.hexdigest() == hashlib.sha256(b"abc").hexdigest()
    with pytest.raises(ValueError, match="past 3"):
        sink.write(b"d")


def test_sweep_goes_exactly_sweep_depth_folders_down(tmp_path: Path) -> None:
    tree = Tree(tmp_path / "out")
    last = "/".join(["x"] * nofollow.SWEEP_DEPTH)  # the deepest folder the sweep walks into
    tree.write(f"simple/{last}/index.html", b"x")
    tree.write(f"simple/{last}/y/index.html", b"x")  # one folder deeper: left as it is
    assert tree.sweep("simple", lambda rel: rel.endswith("/index.html")) == 1
    assert not (tmp_path / "out" / "simple" / last / "index.html").exists()
    assert (tmp_path / "out" / "simple" / last / "y" / "index.html").read_bytes() == b"x"


def test_sweep_goes_on_past_entries_that_vanish_under_it(tmp_path: Path) -> None:
    """Another process removes files while the sweep walks: an entry gone before its lstat, and one gone before
    its unlink, are passed over, and every entry after them is still swept."""
    out = tmp_path / "out"
    tree = Tree(out)
    for name in ("a", "b", "c", "d"):
        tree.write(f"simple/p/{name}.html", b"x")
    order = os.listdir(out / "simple" / "p")  # the order the sweep lists them in (nothing changes in between)
    seen: list[str] = []

    def doomed(rel: str) -> bool:
        seen.append(rel.rsplit("/", 1)[-1])
        if len(seen) == 1:
            os.unlink(out / "simple" / "p" / order[0])  # gone before its own unlink
            os.unlink(out / "simple" / "p" / order[1])  # gone before its lstat
        return True

    assert tree.sweep("simple", doomed) == 2  # the last two
    assert seen == [order[0], order[2], order[3]]
    assert not (out / "simple").exists()


def test_a_link_whose_target_cannot_be_read_is_refused_with_a_question_mark(
    tmp_path: Path, top: Folder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The link is still refused, and the line says its target could not be read (a race with its removal)."""
    base = tmp_path / "cache"
    (base / "l").symlink_to(tmp_path)

    def unreadable(*args: object, **kw: object) -> str:
        raise OSError(errno.ENOENT, "gone")

    monkeypatch.setattr(os, "readlink", unreadable)
    with pytest.raises(LinkRefused) as refused:
        top.sub("l")
    assert str(refused.value).startswith(f"{base / 'l'} -> ?: a symbolic link where kernel-factory expects a folder")
    assert nofollow.link_problem(base / "l") == f"{base / 'l'} -> ?"
