"""local/cache/ (the writer and its pieces) against what another writer of a shared cache can plant (issue 48): nothing
there is trusted by its name (a blob's bytes are read, a blob linked elsewhere is replaced), no special file
blocks a run, a planted folder thousands deep is no RecursionError, another user's run folders are theirs, a
failed place takes back exactly what it made, folders and files get the modes huggingface_hub would give them,
a file system without links gets copies. huggingface_hub's scan_cache_dir is the oracle after each."""

from __future__ import annotations

import errno
import grp
import json
import os
import stat
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from cache_oracle import hashes, no_scratch_left, scan
from kernel_factory.errors import Unreachable
from kernel_factory.local import cache
from kernel_factory.local.cache import Placement, Writer, writer
from kernel_factory.local.cache import stage as cachestage
from kernel_factory.nofollow import Folder, LinkRefused, remove

SHA, SHA2 = "a" * 40, "b" * 40
VARIANT, OTHER = "torch-universal", "torch213-cxx11-cpu-x86_64-linux"
REPO = "kernels--org--act"


@pytest.fixture
def pkg(tmp_path: Path) -> Path:
    folder = tmp_path / "site" / "act"
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text("X = 1\n")
    (folder / "metadata.json").write_text(json.dumps({"name": "act", "version": 1}))
    return folder


def place(root: Path, pkg: Path, sha: str = SHA, variant: str = VARIANT, refs: tuple[str, ...] = ("v1",)) -> Path:
    return Writer(root, "local-kernels").place(Placement("org/act", sha, variant, pkg, hashes(pkg), refs))


def within(seconds: float, call: Callable[[], object]) -> object:
    """``call()`` in a thread; fails the test (instead of hanging it) where it has not returned in time."""
    box: list[object] = []

    def go() -> None:
        try:
            box.append(call())
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            box.append(exc)

    t = threading.Thread(target=go, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"still blocked after {seconds} s"
    if isinstance(box[0], BaseException):
        raise box[0]
    return box[0]


@pytest.fixture
def fifos() -> Iterator[list[Path]]:
    """FIFOs a test plants; each is opened for writing once the test is over, so no blocked thread stays."""
    made: list[Path] = []
    yield made
    for path in made:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            os.close(fd)
        except OSError:
            pass


def test_a_rerun_reads_the_blobs_bytes_a_link_to_the_right_name_is_not_enough(tmp_path: Path, pkg: Path) -> None:
    root = tmp_path / "cache"
    place(root, pkg)
    blob = root / REPO / "blobs" / hashes(pkg)["__init__.py"]
    blob.chmod(0o644)
    blob.write_text("X = 666\n")  # same name, other bytes: the snapshot's link still names it
    with pytest.raises(cache.CacheConflict, match="already holds build/torch-universal with other bytes"):
        place(root, pkg)
    assert not cache.variant_holds(root, "org/act", SHA, VARIANT, hashes(pkg))


def test_a_blob_hard_linked_to_a_file_outside_the_cache_is_replaced_not_adopted(tmp_path: Path, pkg: Path) -> None:
    """The planted blob has the right bytes, but its inode is also a file outside the cache whose owner can
    write it later: the placed blob is a copy of ours (one rename), the outside file is no longer linked."""
    root = tmp_path / "cache"
    want = hashes(pkg)["__init__.py"]
    (root / REPO / "blobs").mkdir(parents=True)
    (root / REPO / "snapshots").mkdir()
    outside = tmp_path / "someone-elses.py"
    outside.write_text("X = 1\n")
    outside.chmod(0o644)
    os.link(outside, root / REPO / "blobs" / want)
    got = place(root, pkg)
    blob = root / REPO / "blobs" / want
    assert blob.stat().st_ino != outside.stat().st_ino and outside.stat().st_nlink == 1
    assert stat.S_IMODE(blob.stat().st_mode) & 0o222 == 0
    outside.write_text("X = 666\n")  # a later write there changes nothing the commit loads
    assert (got / "__init__.py").read_text() == "X = 1\n"
    assert scan(root) == {"org/act": {SHA: ["v1"]}}
    no_scratch_left(root)


def test_a_blob_others_can_write_is_replaced_and_this_users_own_is_kept(tmp_path: Path, pkg: Path) -> None:
    root = tmp_path / "cache"
    place(root, pkg)
    blob = root / REPO / "blobs" / hashes(pkg)["__init__.py"]
    ino = blob.stat().st_ino
    place(root, pkg, SHA2)  # this user's blob, read-only, linked nowhere else: adopted as it is
    assert blob.stat().st_ino == ino
    blob.chmod(0o666)  # others can write it now
    place(root, pkg, "c" * 40)
    assert blob.stat().st_ino != ino and stat.S_IMODE(blob.stat().st_mode) & 0o222 == 0
    assert scan(root) == {"org/act": {SHA: [], SHA2: [], "c" * 40: ["v1"]}}


@pytest.mark.parametrize("where", ["blob", "ref", "owner"])
def test_a_fifo_in_the_cache_never_blocks_a_run(tmp_path: Path, pkg: Path, fifos: list[Path], where: str) -> None:
    root = tmp_path / "cache"
    if where == "owner":  # the owner file of a (killed) run's folder
        run = root / ".locks" / "kernel-factory" / "run-0123456789abcdef"
        run.mkdir(parents=True)
        fifos.append(run / cachestage.OWNER)
    else:
        place(root, pkg)
        (root / REPO / "snapshots" / SHA).rename(tmp_path / "gone")
        path = root / REPO / ("blobs/" + hashes(pkg)["__init__.py"] if where == "blob" else "refs/v1")
        path.unlink()
        fifos.append(path)
    os.mkfifo(fifos[0])
    if where == "blob":
        with pytest.raises(LinkRefused, match=rf"^{fifos[0]}: a FIFO in the Hub cache where "
                           "kernel-factory expects a file; remove it"):
            within(20, lambda: place(root, pkg))
    elif where == "ref":
        with pytest.raises(LinkRefused, match=rf"^{fifos[0]}: a FIFO in the Hub cache where kernel-factory expects "
                           "a file"):
            within(20, lambda: place(root, pkg))
        assert cache.read_ref(root / REPO, "v1") is None
    else:
        within(20, lambda: place(root, pkg))
        assert scan(root) == {"org/act": {SHA: ["v1"]}}
        assert not run.exists()  # swept: no live run holds it


def test_a_planted_run_folder_1200_deep_is_swept_without_recursion(tmp_path: Path, pkg: Path) -> None:
    root = tmp_path / "cache"
    run = root / ".locks" / "kernel-factory" / "run-0123456789abcdef"
    run.mkdir(parents=True)
    fd = os.open(run, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(1200):  # relative to a descriptor: the path passes PATH_MAX
        os.mkdir("d", dir_fd=fd)
        fd = _down(fd)
    os.close(fd)
    (run / "owner").write_text("")
    place(root, pkg)
    assert not run.exists()
    assert scan(root) == {"org/act": {SHA: ["v1"]}}


def _down(fd: int) -> int:
    nxt = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
    os.close(fd)
    return nxt


def test_remove_takes_a_folder_deeper_than_the_recursion_limit(tmp_path: Path) -> None:
    top = tmp_path / "top"
    top.mkdir()
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    for i in range(1500):
        os.mkdir("d", dir_fd=fd)
        with open(os.open(f"f{i}", os.O_WRONLY | os.O_CREAT, dir_fd=fd), "w"):
            pass
        os.symlink("/", "link", dir_fd=fd)
        fd = _down(fd)
    os.close(fd)
    with Folder(os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY), tmp_path) as parent:
        remove(parent, "top")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="making another user's folder needs root")
def test_another_users_stale_run_folder_is_theirs_to_sweep(tmp_path: Path, pkg: Path) -> None:
    root = tmp_path / "cache"
    own = root / ".locks" / "kernel-factory"
    theirs, mine = own / "run-1111111111111111", own / "run-2222222222222222"
    for run in (theirs, mine):
        run.mkdir(parents=True)
        (run / "owner").write_text("")
    os.chown(theirs, 65534, 65534)
    place(root, pkg)
    assert theirs.is_dir() and not mine.exists()


def test_a_failed_place_takes_back_the_variant_it_added_to_an_existing_snapshot(
    tmp_path: Path, pkg: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "cache"
    place(root, pkg)
    real = writer._write_ref

    def full(*args: object, **kw: object) -> str | None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(writer, "_write_ref", full)
    with pytest.raises(Unreachable, match="No space left on device"):
        place(root, pkg, variant=OTHER, refs=("v2",))
    monkeypatch.setattr(writer, "_write_ref", real)
    assert sorted(p.name for p in (root / REPO / "snapshots" / SHA / "build").iterdir()) == [VARIANT]
    assert scan(root) == {"org/act": {SHA: ["v1"]}}
    no_scratch_left(root)


def test_a_failed_place_leaves_the_snapshot_and_ref_another_writer_set_meanwhile(
    tmp_path: Path, pkg: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run made the repository folder; while it ran, another writer placed SHA2 and pointed v1 at it. The run
    fails at its ref: its own snapshot goes, the other writer's snapshot and ref stay."""
    root = tmp_path / "cache"
    real = writer.move_in

    def meanwhile(run: Folder, snaps: Folder, p: writer.Placing, how: str) -> bool:
        other = root / REPO / "snapshots" / SHA2 / "build" / VARIANT
        other.mkdir(parents=True)
        (other / "metadata.json").write_text("{}")
        (root / REPO / "refs").mkdir()
        (root / REPO / "refs" / "v1").write_text(SHA2)
        return real(run, snaps, p, how)


    def fail_ref(*args: object, **kw: object) -> str | None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(writer, "move_in", meanwhile)
    monkeypatch.setattr(writer, "_write_ref", fail_ref)
    with pytest.raises(Unreachable, match="No space left on device"):
        place(root, pkg)
    assert (root / REPO / "refs" / "v1").read_text() == SHA2
    assert sorted(p.name for p in (root / REPO / "snapshots").iterdir()) == [SHA2]
    assert scan(root) == {"org/act": {SHA2: ["v1"]}}


def test_folders_get_the_mode_and_group_a_setgid_group_cache_hands_down(tmp_path: Path, pkg: Path) -> None:
    """A group cache: setgid on its root, umask 002. huggingface_hub's mkdir gives 2775 folders of the cache's
    group; the writer's snapshot and variant folders get the same, so another user of the group can add a
    variant of the same commit."""
    root = tmp_path / "cache"
    root.mkdir()
    group = next((g.gr_gid for g in grp.getgrall() if g.gr_gid != os.getegid()), os.getegid())
    if os.geteuid() == 0 or group in os.getgroups():
        os.chown(root, -1, group)
    os.chmod(root, 0o2775)
    old = os.umask(0o002)
    try:
        got = place(root, pkg)
    finally:
        os.umask(old)
    snap = root / REPO / "snapshots" / SHA
    for folder in (snap, snap / "build", got):
        st = folder.stat()
        assert (stat.S_IMODE(st.st_mode), st.st_gid) == (0o2775, root.stat().st_gid), folder
    blob = root / REPO / "blobs" / hashes(pkg)["__init__.py"]
    assert stat.S_IMODE(blob.stat().st_mode) == 0o444 and blob.stat().st_gid == root.stat().st_gid


@pytest.mark.parametrize("fs", ["vfat", "exFAT"])
def test_without_links_the_files_are_copied_with_one_warning(tmp_path: Path, pkg: Path, fs: str,
                                                           monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """What vfat answers (measured on fusefat: ENOSYS at symlink and chmod, EPERM at link) and exFAT (EPERM at
    symlink): as huggingface_hub, a copy of each blob in the snapshot, modes passed over, one warning."""
    root = tmp_path / "cache"
    code = errno.ENOSYS if fs == "vfat" else errno.EPERM

    def refused(*args: object, **kw: object) -> None:
        raise OSError(code, os.strerror(code))

    def no_hard_links(*args: object, **kw: object) -> None:
        raise OSError(errno.EPERM, os.strerror(errno.EPERM))

    monkeypatch.setattr(os, "symlink", refused)
    monkeypatch.setattr(os, "link", no_hard_links)
    if fs == "vfat":
        monkeypatch.setattr(os, "chmod", refused)
    monkeypatch.setattr(writer, "_warned", [], raising=False)
    got = place(root, pkg)
    place(root, pkg, variant=OTHER, refs=("v1", "main"))
    monkeypatch.undo()
    assert not (got / "__init__.py").is_symlink() and hashes(got) == hashes(pkg)
    assert capsys.readouterr().err.count("makes no symbolic links") == 1
    assert scan(root) == {"org/act": {SHA: ["main", "v1"]}}
    no_scratch_left(root)


def test_a_satisfied_place_writes_nothing(tmp_path: Path, pkg: Path) -> None:
    """The variant's bytes and its refs are there: no scratch folder is made, nothing changes (a read-only
    cache that holds it is fine)."""
    root = tmp_path / "cache"
    place(root, pkg)
    os.rmdir(root / ".locks" / "kernel-factory")
    os.rmdir(root / ".locks")
    before = {str(p): p.lstat().st_mtime_ns for p in [root, *root.rglob("*")]}
    place(root, pkg)
    assert {str(p): p.lstat().st_mtime_ns for p in [root, *root.rglob("*")]} == before


def test_a_fifo_at_a_snapshots_marker_names_no_origin(tmp_path: Path, fifos: list[Path]) -> None:
    snap = tmp_path / "snap"
    snap.mkdir()
    fifos.append(snap / cache.MARKER)
    os.mkfifo(fifos[0])
    assert within(20, lambda: cache.origin_of(snap)) is None
