"""local/cache/place.py: placing again over what the writer left (a snapshot of plain copies, a damaged link in our
own snapshot), a relink whose move of the new folder fails, and copies made where links cannot be made from a blob
already in the cache. scan_cache_dir is the oracle of the cache after each."""

from __future__ import annotations

import errno
import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from cache_oracle import hashes, scan
from kernel_factory.errors import Unreachable
from kernel_factory.local import cache
from kernel_factory.local.cache import Placement, Writer

SHA, SHA2 = "a" * 40, "b" * 40
VARIANT = "torch-universal"


@pytest.fixture
def pkg(tmp_path: Path) -> Path:
    folder = tmp_path / "site" / "act"
    (folder / "layers").mkdir(parents=True)
    (folder / "__init__.py").write_text("X = 1\n")
    (folder / "layers" / "__init__.py").write_text("Y = 2\n")
    (folder / "metadata.json").write_text(json.dumps({"name": "act"}))
    return folder


def place(root: Path, pkg: Path, sha: str = SHA, notes: list[str] | None = None) -> Path:
    return Writer(root, "local-kernels", notes).place(Placement("org/act", sha, VARIANT, pkg, hashes(pkg), ("v1",)))


def no_links(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kw: object) -> None:
        raise PermissionError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "symlink", refuse)


def tree(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): f"-> {os.readlink(p)}" if p.is_symlink() else
            "dir" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*"))}


def other_bytes(than: bytes, above: bool) -> bytes:
    """Bytes whose sha256 sorts above (or below) that of ``than``."""
    want = hashlib.sha256(than).hexdigest()
    return next(data for n in range(100) if (hashlib.sha256(data := b"Y = %d\n" % n).hexdigest() > want) == above)


@pytest.mark.parametrize("above", [False, True])
def test_placing_again_over_plain_copies_keeps_them(tmp_path: Path, pkg: Path, monkeypatch: pytest.MonkeyPatch,
                                                    above: bool) -> None:
    """A snapshot written where links could not be made holds copies: the same bytes again are a no-op, with links
    possible or not; a copy changed since is other bytes (their digest sorting below or above), refused."""
    root = tmp_path / "cache"
    no_links(monkeypatch)
    got = place(root, pkg)
    before = tree(root)
    assert not any(p.is_symlink() for p in got.rglob("*"))
    assert place(root, pkg) == got and tree(root) == before
    monkeypatch.undo()
    assert place(root, pkg) == got and tree(root) == before
    assert scan(root) == {"org/act": {SHA: ["v1"]}}
    copy = got / "layers" / "__init__.py"
    copy.chmod(0o644)
    changed = other_bytes(b"Y = 2\n", above)
    copy.write_bytes(changed)
    with pytest.raises(cache.CacheConflict) as info:
        place(root, pkg)
    assert str(info.value) == (f"org/act: snapshot {SHA} in {root} already holds build/{VARIANT} with other bytes "
                               "(written by local-kernels); left as it is: a commit's snapshot never changes; remove "
                               "that snapshot to replace it")
    assert copy.read_bytes() == changed


def test_a_damaged_link_in_our_snapshot_is_other_bytes(tmp_path: Path, pkg: Path) -> None:
    """A link of our snapshot that points at another blob (one that exists) is not the file's bytes."""
    root = tmp_path / "cache"
    got = place(root, pkg)
    link = got / "__init__.py"
    other = os.readlink(got / "metadata.json")
    link.unlink()
    link.symlink_to(other)
    before = tree(root)
    with pytest.raises(cache.CacheConflict, match="already holds build/torch-universal with other bytes"):
        place(root, pkg)
    assert tree(root) == before


def failing_rename(monkeypatch: pytest.MonkeyPatch, fails: Callable[[str, str], bool], code: int) -> list[str]:
    real, calls = os.rename, []

    def rename(src: str, dst: str, **kw: object) -> None:
        calls.append(f"{src} -> {dst}")
        if fails(str(src), str(dst)):
            raise OSError(code, os.strerror(code))
        real(src, dst, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "rename", rename)
    return calls


def earlier_link(root: Path, pkg: Path) -> Path:
    """What local-kernels --cache wrote before: our marker, and build/<variant> a link to site-packages."""
    snap = root / "kernels--org--act" / "snapshots" / SHA
    (snap / "build").mkdir(parents=True)
    (snap / cache.MARKER).write_text(json.dumps({"repo_id": "org/act", "commit": SHA, "origin": "local-kernels"}))
    (snap / "build" / VARIANT).symlink_to(pkg)
    return snap / "build" / VARIANT


def test_a_relink_whose_move_fails_puts_the_old_link_back(tmp_path: Path, pkg: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "cache"
    variant = earlier_link(root, pkg)
    calls = failing_rename(monkeypatch, lambda src, dst: (src, dst) == ("tree", VARIANT), errno.ENOSPC)
    notes: list[str] = []
    with pytest.raises(Unreachable, match=rf"^the Hub cache {root}: No space left on device"):
        place(root, pkg, notes=notes)
    assert calls == [f"{VARIANT} -> old-link", f"tree -> {VARIANT}", f"old-link -> {VARIANT}"]
    assert variant.is_symlink() and os.readlink(variant) == str(pkg)
    assert notes == [] and (pkg / "__init__.py").is_file()
    monkeypatch.undo()
    got = place(root, pkg, notes=notes)  # and a run with room replaces it
    assert not got.is_symlink() and hashes(got) == hashes(pkg)
    assert scan(root) == {"org/act": {SHA: ["v1"]}}


def test_a_relink_raced_by_another_run_is_tried_again(tmp_path: Path, pkg: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """EEXIST at the move: another run placed the variant first; the link is put back and the place tried again
    (three times, then refused)."""
    root = tmp_path / "cache"
    variant = earlier_link(root, pkg)
    calls = failing_rename(monkeypatch, lambda src, dst: (src, dst) == ("tree", VARIANT), errno.EEXIST)
    with pytest.raises(cache.CacheConflict, match="keeps changing while it is placed; left as it is: run again"):
        place(root, pkg)
    assert calls == [f"{VARIANT} -> old-link", f"tree -> {VARIANT}", f"old-link -> {VARIANT}"] * 3
    assert variant.is_symlink() and os.readlink(variant) == str(pkg)
    assert scan(root) == {"org/act": {SHA: []}}  # blobs once published stay (another run may link to them)


def test_without_links_a_blob_already_there_is_copied_from_the_cache(tmp_path: Path, pkg: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A second commit with the same files: their blobs are in the cache already, not staged; the copies are read
    from the blobs."""
    root = tmp_path / "cache"
    no_links(monkeypatch)
    place(root, pkg)
    blobs = sorted(p.name for p in (root / "kernels--org--act" / "blobs").iterdir())
    got = place(root, pkg, SHA2)
    assert hashes(got) == hashes(pkg) and not any(p.is_symlink() for p in got.rglob("*"))
    assert sorted(p.name for p in (root / "kernels--org--act" / "blobs").iterdir()) == blobs
    assert scan(root) == {"org/act": {SHA: [], SHA2: ["v1"]}}


def test_a_folder_sorting_before_pycache_is_checked_like_any_other(tmp_path: Path, pkg: Path) -> None:
    """Only ``__pycache__`` is left out of the check: the same bytes in ``CUDA/`` and ``0/`` again are a no-op."""
    for rel in ("CUDA/kernel.py", "0/x.py"):
        (pkg / rel).parent.mkdir()
        (pkg / rel).write_text(f"# {rel}\n")
    root = tmp_path / "cache"
    got = place(root, pkg)
    before = tree(root)
    assert place(root, pkg) == got and tree(root) == before


def test_a_fifo_inside_our_variant_is_other_bytes(tmp_path: Path, pkg: Path) -> None:
    root = tmp_path / "cache"
    got = place(root, pkg)
    (got / "layers" / "__init__.py").unlink()
    os.mkfifo(got / "layers" / "__init__.py")  # a listed name: never opened (a FIFO would block the open)
    with pytest.raises(cache.CacheConflict, match="already holds build/torch-universal with other bytes"):
        place(root, pkg)


@pytest.mark.parametrize("above", [False, True])
def test_a_damaged_blob_is_refused_whichever_way_its_digest_sorts(tmp_path: Path, pkg: Path, above: bool) -> None:
    root = tmp_path / "cache"
    blobs = root / "kernels--org--act" / "blobs"
    blobs.mkdir(parents=True)
    digest = hashes(pkg)["layers/__init__.py"]
    (blobs / digest).write_bytes(other_bytes(b"Y = 2\n", above))
    with pytest.raises(cache.CacheConflict) as info:
        place(root, pkg)
    assert str(info.value) == (f"{blobs / digest}: a blob whose bytes are not the ones its name says; nothing was "
                               "placed: remove that file and run again")


def test_a_new_commit_stages_every_file_whose_blob_is_not_there_yet(tmp_path: Path, pkg: Path) -> None:
    """The blobs of the first files are in the cache already; the one changed file, sorting last, is staged."""
    root = tmp_path / "cache"
    place(root, pkg)
    (pkg / "metadata.json").write_text(json.dumps({"name": "act", "version": 2}))
    got = place(root, pkg, SHA2)
    assert hashes(got) == hashes(pkg)
    assert len(list((root / "kernels--org--act" / "blobs").iterdir())) == 4
    assert scan(root) == {"org/act": {SHA: [], SHA2: ["v1"]}}
