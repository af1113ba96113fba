"""local/cache/writer.py: the one writer of the Hub cache (content-addressed blobs, snapshots of links to them, refs),
checked against the files it is promised, never through a link, never changing what is there; and the one
Environment of local/ (machine name and label derived once). huggingface_hub's scan_cache_dir is the independent
oracle of every cache written here."""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import stat
from pathlib import Path

import pytest
from cache_oracle import hashes, no_scratch_left, scan
from kernel_factory.errors import Unreachable
from kernel_factory.local import cache
from kernel_factory.local.cache import Placement, Writer, writer
from kernel_factory.local.cache import stage as cachestage
from kernel_factory.local.probe.environment import Environment, label_or_none, machine
from kernel_factory.nofollow import LinkRefused

SHA, SHA2, HUB = "a" * 40, "b" * 40, "c" * 40
VARIANT = "torch-universal"


def tree(root: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".locks"]  # the private scratch folder: scan_cache_dir skips it
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            out[rel] = ("-> " + os.readlink(p) if p.is_symlink() else "dir" if p.is_dir()
                        else hashlib.sha256(p.read_bytes()).hexdigest())
    return out


@pytest.fixture
def pkg(tmp_path: Path) -> Path:
    """An installed kernel package folder."""
    folder = tmp_path / "site" / "act"
    (folder / "layers").mkdir(parents=True)
    (folder / "__init__.py").write_text("X = 1\n")
    (folder / "layers" / "__init__.py").write_text("Y = 2\n")
    (folder / "metadata.json").write_text(json.dumps({"name": "act", "version": 1}))
    (folder / "__pycache__").mkdir()
    (folder / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"bytecode")  # what pip compiles: never placed
    return folder


def place(root: Path, pkg: Path, sha: str = SHA, refs: tuple[str, ...] = ("v1",), origin: str = "local-kernels",
          notes: list[str] | None = None, files: dict[str, str] | None = None) -> Path:
    files = hashes(pkg) if files is None else files
    return Writer(root, origin, notes).place(Placement("org/act", sha, VARIANT, pkg, files, tuple(refs)))


def hub_snapshot(root: Path, sha: str, variant: str, refs: dict[str, str], repo: str = "kernels--org--act") -> None:
    """A snapshot as huggingface_hub leaves it: files are symlinks into blobs/."""
    blob = root / repo / "blobs" / "0123"
    blob.parent.mkdir(parents=True, exist_ok=True)
    blob.write_text("{}")
    link = root / repo / "snapshots" / sha / "build" / variant / "metadata.json"
    link.parent.mkdir(parents=True)
    link.symlink_to(os.path.relpath(blob, link.parent))
    (root / repo / "refs").mkdir(exist_ok=True)
    for ref, commit in refs.items():
        (root / repo / "refs" / ref).write_text(commit)


def test_cache_root_as_kernels_and_huggingface_hub_resolve_it() -> None:
    home = os.path.expanduser("~")
    assert cache.cache_root({"KERNELS_CACHE": "/k", "HF_HUB_CACHE": "/h"}) == Path("/k")
    assert cache.cache_root({"HF_HUB_CACHE": "/h", "HF_HOME": "/home"}) == Path("/h")
    assert cache.cache_root({"HUGGINGFACE_HUB_CACHE": "/legacy"}) == Path("/legacy")
    assert cache.cache_root({"HF_HOME": "~/hf"}) == Path(home) / "hf" / "hub"
    assert cache.cache_root({"XDG_CACHE_HOME": "/x"}) == Path("/x/huggingface/hub")
    assert cache.cache_root({"KERNELS_CACHE": ""}) == Path(home) / ".cache" / "huggingface" / "hub"


def test_place_writes_what_huggingface_hub_writes(tmp_path: Path, pkg: Path) -> None:
    root = tmp_path / "cache"
    notes: list[str] = []
    got = place(root, pkg, refs=("v1", "v1.0.0"), notes=notes)
    repo = root / "kernels--org--act"
    assert got == repo / "snapshots" / SHA / "build" / VARIANT and notes == []
    want = hashes(pkg)
    assert "__pycache__/x.cpython-311.pyc" not in want
    assert hashes(got) == want  # every file, read through the links: the installed bytes, no bytecode
    for rel, digest in want.items():
        link = got / rel
        assert os.readlink(link) == "../" * (4 + rel.count("/")) + f"blobs/{digest}"  # relative, as the Hub's
        blob = repo / "blobs" / digest
        assert blob.is_file() and not blob.is_symlink()
        assert stat.S_IMODE(blob.stat().st_mode) & 0o222 == 0  # read-only
        assert blob.stat().st_ino != (pkg / rel).stat().st_ino  # a copy, never the environment's inode
    assert (repo / "refs" / "v1").read_bytes() == SHA.encode() == (repo / "refs" / "v1.0.0").read_bytes()
    assert json.loads((repo / "snapshots" / SHA / cache.MARKER).read_text()) == {
        "repo_id": "org/act", "commit": SHA, "origin": "local-kernels"}
    assert cache.origin_of(repo / "snapshots" / SHA) == "local-kernels"
    assert scan(root) == {"org/act": {SHA: ["v1", "v1.0.0"]}}
    no_scratch_left(root)


def test_an_environment_changing_later_never_changes_the_snapshot(tmp_path: Path, pkg: Path) -> None:
    root = tmp_path / "cache"
    got = place(root, pkg)
    before = hashes(got)
    with open(pkg / "__init__.py", "r+b") as f:  # an in-place write, as no installer does but anyone may
        f.write(b"EVIL")
    (pkg / "metadata.json").unlink()  # an uninstall
    assert hashes(got) == before
    assert scan(root) == {"org/act": {SHA: ["v1"]}}


def test_the_same_bytes_again_are_a_no_op_and_other_bytes_are_refused(tmp_path: Path, pkg: Path) -> None:
    root = tmp_path / "cache"
    place(root, pkg, origin="download")
    before = tree(root)
    place(root, pkg)  # local-kernels after download, same bytes: nothing changes
    assert tree(root) == before
    (pkg / "__init__.py").write_text("X = 2\n")  # another build of the same commit and variant
    with pytest.raises(cache.CacheConflict, match=r"already holds build/torch-universal with other bytes "
                                                       r"\(written by download\); left as it is"):
        place(root, pkg)
    assert tree(root) == before
    no_scratch_left(root)


def test_a_new_commit_moves_a_ref_kernel_factory_wrote(tmp_path: Path, pkg: Path) -> None:
    root = tmp_path / "cache"
    place(root, pkg, sha=SHA)
    (pkg / "__init__.py").write_text("X = 2\n")
    place(root, pkg, sha=SHA2)
    repo = root / "kernels--org--act"
    assert cache.read_ref(repo, "v1") == SHA2
    assert scan(root) == {"org/act": {SHA: [], SHA2: ["v1"]}}
    # both commits keep their own bytes, and share the blobs that did not change
    assert (repo / "snapshots" / SHA / "build" / VARIANT / "__init__.py").read_text() == "X = 1\n"
    assert (repo / "snapshots" / SHA2 / "build" / VARIANT / "__init__.py").read_text() == "X = 2\n"
    assert len(list((repo / "blobs").iterdir())) == 4


def test_files_that_are_not_the_listed_ones_are_refused_and_nothing_is_written(tmp_path: Path, pkg: Path) -> None:
    root = tmp_path / "cache"
    listed = hashes(pkg)
    (pkg / "extra.py").write_text("import os\n")
    with pytest.raises(cache.CacheRefused, match=r"extra\.py is not one of the files listed"):
        place(root, pkg, files=listed)
    (pkg / "extra.py").unlink()
    with pytest.raises(cache.CacheRefused, match=r"layers/gone\.py is missing"):
        place(root, pkg, files={**listed, "layers/gone.py": "0" * 64})
    for wrong in ("0" * 64, "f" * 64):  # a listed hash that sorts below the file's, and one above
        with pytest.raises(cache.CacheRefused, match=r"layers/__init__\.py does not hold the bytes listed for it"):
            place(root, pkg, files={**listed, "layers/__init__.py": wrong})
    with pytest.raises(cache.CacheRefused, match=r"'\.\./x' is not a plain relative path"):
        place(root, pkg, files={**listed, "../x": "0" * 64})
    with pytest.raises(cache.CacheRefused, match=r"not a sha256 hex digest"):
        place(root, pkg, files={**listed, "__init__.py": "sha256=abc"})
    without = {k: v for k, v in listed.items() if k != "metadata.json"}
    (pkg / "metadata.json").unlink()
    with pytest.raises(cache.CacheConflict, match="holds no metadata.json"):
        place(root, pkg, files=without)
    assert scan(root) == {}
    assert tree(root) == {}  # not even the folders
    no_scratch_left(root)


def test_a_link_in_the_source_is_refused(tmp_path: Path, pkg: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("s")
    (pkg / "ops.py").symlink_to(secret)
    files = {**hashes(pkg)}
    with pytest.raises(cache.CacheRefused, match=r"ops\.py is a link or a special file"):
        place(tmp_path / "cache", pkg, files=files)


@pytest.mark.parametrize("where", ["kernels--org--act", "kernels--org--act/snapshots", "kernels--org--act/blobs",
                                   "kernels--org--act/refs", "kernels--org--act/refs/v1",
                                   f"kernels--org--act/snapshots/{SHA}", f"kernels--org--act/snapshots/{SHA}/build"])
def test_a_planted_link_anywhere_refuses_and_nothing_is_written_outside(tmp_path: Path, pkg: Path, where: str) -> None:
    root, elsewhere = tmp_path / "cache", tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "precious").write_text("keep")
    link = root / where
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(elsewhere)
    if "snapshots/" in where:  # the link sits in a Hub snapshot's place
        link.parent.parent.joinpath("refs").mkdir(exist_ok=True)
    with pytest.raises(LinkRefused, match=rf"{link} -> {elsewhere}: a symbolic link in the Hub cache"):
        place(root, pkg)
    assert tree(elsewhere) == {"precious": hashlib.sha256(b"keep").hexdigest()}
    assert link.is_symlink()
    if "/refs" in where:  # refused before anything was placed, not after the snapshot
        assert not (root / "kernels--org--act" / "snapshots" / SHA).exists()
    no_scratch_left(root)


def test_a_planted_variant_link_in_a_hub_snapshot_refuses(tmp_path: Path, pkg: Path) -> None:
    root, elsewhere = tmp_path / "cache", tmp_path / "home-folder"
    elsewhere.mkdir()
    (elsewhere / "notes.txt").write_text("mine")
    build = root / "kernels--org--act" / "snapshots" / SHA / "build"
    build.mkdir(parents=True)
    (build / VARIANT).symlink_to(elsewhere)
    with pytest.raises(LinkRefused, match="a symbolic link in the Hub cache"):
        place(root, pkg)
    assert (elsewhere / "notes.txt").read_text() == "mine" and (build / VARIANT).is_symlink()


def test_a_damaged_blob_is_named_and_not_used(tmp_path: Path, pkg: Path) -> None:
    root = tmp_path / "cache"
    blobs = root / "kernels--org--act" / "blobs"
    blobs.mkdir(parents=True)
    digest = hashes(pkg)["__init__.py"]
    (blobs / digest).write_text("not those bytes")
    with pytest.raises(cache.CacheConflict, match=rf"{blobs / digest}: a blob whose bytes are not the ones"):
        place(root, pkg)
    assert sorted(p.name for p in blobs.iterdir()) == [digest]
    assert not (root / "kernels--org--act" / "snapshots" / SHA).exists()


def test_an_earlier_link_into_an_environment_is_replaced_by_a_checked_copy(tmp_path: Path, pkg: Path) -> None:
    """What local-kernels --cache wrote before: our marker, and build/<variant> a link to site-packages."""
    root = tmp_path / "cache"
    snap = root / "kernels--org--act" / "snapshots" / SHA
    (snap / "build").mkdir(parents=True)
    (snap / cache.MARKER).write_text(json.dumps({"repo_id": "org/act", "commit": SHA}))
    (snap / "build" / VARIANT).symlink_to(pkg)
    notes: list[str] = []
    got = place(root, pkg, notes=notes)
    assert not got.is_symlink() and got.is_dir() and hashes(got) == hashes(pkg)
    assert notes == [f"org/act: snapshot {SHA} in {root}: build/{VARIANT} was a link to {pkg} left by an earlier "
                     "kernel-factory; now a checked copy"]
    assert (pkg / "__init__.py").is_file()  # the environment is untouched
    assert scan(root) == {"org/act": {SHA: ["v1"]}}


def test_a_hub_ref_is_left_with_a_note(tmp_path: Path, pkg: Path) -> None:
    root = tmp_path / "cache"
    hub_snapshot(root, HUB, "torch-cpu", {"v1": HUB, "main": HUB})
    before = tree(root / "kernels--org--act" / "snapshots" / HUB)
    notes: list[str] = []
    place(root, pkg, refs=("v1", "main"), notes=notes)
    repo = root / "kernels--org--act"
    assert cache.read_ref(repo, "v1") == HUB and cache.read_ref(repo, "main") == HUB
    assert notes == [f"org/act: refs/{r} in {root} names {HUB}, which kernel-factory did not write; left as it is: "
                     f"use revision='{SHA}' or a lock file" for r in ("v1", "main")]
    assert tree(repo / "snapshots" / HUB) == before
    assert scan(root) == {"org/act": {HUB: ["main", "v1"], SHA: []}}


def test_a_legacy_models_ref_wins_in_kernels_so_it_is_named(tmp_path: Path, pkg: Path) -> None:
    root = tmp_path / "cache"
    hub_snapshot(root, HUB, "torch-cpu", {"v1": HUB}, repo="models--org--act")
    notes: list[str] = []
    place(root, pkg, notes=notes)
    assert notes == [f"org/act: refs/v1 in models--org--act names {HUB}, and kernels reads it first; left as it is: "
                     f"use revision='{SHA}' or a lock file"]
    assert cache.read_ref(root / "kernels--org--act", "v1") is None


def test_a_hub_snapshot_of_the_same_commit(tmp_path: Path, pkg: Path) -> None:
    root = tmp_path / "cache"
    hub_snapshot(root, SHA, VARIANT, {})
    before = tree(root)
    got = place(root, pkg, refs=())
    assert got == root / "kernels--org--act" / "snapshots" / SHA / "build" / VARIANT and tree(root) == before
    with pytest.raises(cache.CacheConflict, match="came from the Hub without build/torch213-cxx11-cpu-x86_64-linux"):
        Writer(root, "download").place(Placement("org/act", SHA, "torch213-cxx11-cpu-x86_64-linux", pkg, hashes(pkg),
                                                  ("v1",)))
    assert tree(root) == before


def test_a_second_variant_joins_our_snapshot(tmp_path: Path, pkg: Path) -> None:
    root = tmp_path / "cache"
    place(root, pkg)
    other = "torch213-cxx11-cpu-x86_64-linux"
    got = Writer(root, "download").place(Placement("org/act", SHA, other, pkg, hashes(pkg), ("v1",)))
    assert hashes(got) == hashes(pkg)
    assert sorted(p.name for p in got.parent.iterdir()) == sorted([VARIANT, other])
    assert cache.origin_of(got.parent.parent) == "local-kernels"  # the snapshot's first writer
    assert scan(root) == {"org/act": {SHA: ["v1"]}}


def test_bad_input(tmp_path: Path, pkg: Path) -> None:
    root = tmp_path / "cache"
    files = hashes(pkg)
    with pytest.raises(cache.CacheConflict, match="not a 40-digit commit sha"):
        Writer(root, "download").place(Placement("org/act", "worktree", VARIANT, pkg, files))
    with pytest.raises(cache.CacheConflict, match="not an org/name repository id"):
        Writer(root, "download").place(Placement("act", SHA, VARIANT, pkg, files))
    with pytest.raises(cache.CacheConflict, match="not a branch or tag name"):
        Writer(root, "download").place(Placement("org/act", SHA, VARIANT, pkg, files, ("../x",)))
    with pytest.raises(ValueError, match="origin 'pip'"):
        Writer(root, "pip").place(Placement("org/act", SHA, VARIANT, pkg, files))
    assert not root.exists()


def test_scratch_is_private_removed_on_every_exit_and_skipped_by_scan(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    with cache.scratch(root) as tmp:
        assert tmp.parent == root / ".locks" / "kernel-factory"
        assert stat.S_IMODE(tmp.stat().st_mode) == 0o700
        (tmp / "half-written").write_bytes(b"x")
        assert scan(root) == {}
    assert not tmp.exists()
    with pytest.raises(RuntimeError), cache.scratch(root) as tmp2:
        raise RuntimeError("boom")
    assert not tmp2.exists()


def test_a_killed_runs_scratch_is_swept_and_a_live_ones_is_not(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    own = root / ".locks" / "kernel-factory"
    dead, live = own / "run-dead", own / "run-live"
    for run in (dead, live):
        run.mkdir(parents=True)
        (run / "owner").write_text("")
        (run / "blob").write_text("half")
    holder = os.open(live / "owner", os.O_RDONLY)
    fcntl.flock(holder, fcntl.LOCK_EX)  # a run still working (in another process, as flock sees it)
    try:
        with cache.scratch(root):
            pass
        assert not dead.exists() and live.is_dir()
    finally:
        os.close(holder)


def test_a_scratch_folder_that_is_a_link_is_refused(tmp_path: Path) -> None:
    root, elsewhere = tmp_path / "cache", tmp_path / "elsewhere"
    elsewhere.mkdir()
    root.mkdir()
    (root / ".locks").symlink_to(elsewhere)
    with pytest.raises(Unreachable, match=r"\.locks -> .*elsewhere: a symbolic link"), cache.scratch(root):
        pass
    assert list(elsewhere.iterdir()) == []


def test_the_hubs_signature_travels_with_the_variant(tmp_path: Path, pkg: Path) -> None:
    (pkg / "metadata.json.sigstore").write_text('{"mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json"}')
    got = place(tmp_path / "cache", pkg)
    assert (got / "metadata.json.sigstore").read_bytes() == (pkg / "metadata.json.sigstore").read_bytes()


def test_blob_mode_follows_the_folder_less_write_bits(tmp_path: Path) -> None:
    from kernel_factory.nofollow import Folder

    blobs = tmp_path / "blobs"
    blobs.mkdir()
    old = os.umask(0o027)
    try:
        with Folder.root(blobs) as folder:
            assert cachestage.blob_mode(folder) == 0o440
    finally:
        os.umask(old)
    assert list(blobs.iterdir()) == []

def test_where_no_links_can_be_made_the_snapshot_holds_copies(tmp_path: Path, pkg: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """vfat, exFAT: os.symlink fails with EPERM; the files are copied into the snapshot, as huggingface_hub does."""
    big = os.urandom(3 << 20)  # more than one read
    (pkg / "ops").mkdir()
    (pkg / "ops" / "deep").mkdir()
    (pkg / "ops" / "deep" / "weights.bin").write_bytes(big)

    def no_links(*args: object, **kw: object) -> None:
        raise PermissionError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "symlink", no_links)
    got = place(tmp_path / "cache", pkg)
    assert hashes(got) == hashes(pkg)
    assert (got / "ops" / "deep" / "weights.bin").read_bytes() == big
    assert not any(p.is_symlink() for p in got.rglob("*"))
    assert all(stat.S_IMODE(p.stat().st_mode) & 0o222 == 0 for p in got.rglob("*") if p.is_file())
    assert scan(tmp_path / "cache") == {"org/act": {SHA: ["v1"]}}


def test_files_with_the_same_bytes_share_one_blob(tmp_path: Path, pkg: Path) -> None:
    (pkg / "a.py").write_text("same\n")
    (pkg / "b.py").write_text("same\n")
    (pkg / "c.py").write_text("other\n")
    got = place(tmp_path / "cache", pkg)
    assert hashes(got) == hashes(pkg)
    assert os.readlink(got / "a.py") == os.readlink(got / "b.py")
    assert len(list((tmp_path / "cache" / "kernels--org--act" / "blobs").iterdir())) == 5
    assert scan(tmp_path / "cache") == {"org/act": {SHA: ["v1"]}}


def test_a_failed_move_keeps_the_blobs_it_published_and_says_so(tmp_path: Path, pkg: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Blobs once published are never taken back (another run's snapshot may link to them by then); no
    snapshot or ref is left, the line says what stays, and scan_cache_dir sees a repository without revisions."""
    root = tmp_path / "cache"
    blobs = root / "kernels--org--act" / "blobs"
    blobs.mkdir(parents=True)
    (root / "kernels--org--act" / "snapshots").mkdir()
    kept = hashes(pkg)["__init__.py"]
    (blobs / kept).write_bytes((pkg / "__init__.py").read_bytes())  # there before: not this run's to remove
    (blobs / kept).chmod(0o444)

    def full(*args: object, **kw: object) -> bool:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(writer, "move_in", full)
    with pytest.raises(Unreachable, match=rf"the Hub cache {root}: No space left on device \(no snapshot or ref of "
                       r"this kernel was left there; the 2 checked blobs it published stay in blobs/, unused\)"):
        place(root, pkg)
    assert sorted(p.name for p in blobs.iterdir()) == sorted(set(hashes(pkg).values()))
    assert scan(root) == {"org/act": {}} and not (root / "kernels--org--act" / "refs").exists()
    no_scratch_left(root)


def test_a_snapshot_missing_its_blob_or_holding_a_special_file_is_left_alone(tmp_path: Path, pkg: Path) -> None:
    root = tmp_path / "cache"
    got = place(root, pkg)
    blob = root / "kernels--org--act" / "blobs" / hashes(pkg)["__init__.py"]
    blob.unlink()
    with pytest.raises(cache.CacheConflict, match="already holds build/torch-universal with other bytes"):
        place(root, pkg)
    blob.mkdir()  # a folder where the blob should be
    with pytest.raises(cache.CacheConflict, match="already holds build/torch-universal with other bytes"):
        place(root, pkg)
    other = got.parent / "torch213-cxx11-cpu-x86_64-linux"
    os.mkfifo(other)
    with pytest.raises(LinkRefused, match=rf"^{other}: a FIFO in the Hub cache where kernel-factory expects a folder"):
        Writer(root, "download").place(Placement("org/act", SHA, other.name, pkg, hashes(pkg)))


def test_a_marker_that_is_a_link_names_no_origin(tmp_path: Path) -> None:
    snap = tmp_path / "snap"
    snap.mkdir()
    (tmp_path / "elsewhere.json").write_text(json.dumps({"origin": "download"}))
    (snap / cache.MARKER).symlink_to(tmp_path / "elsewhere.json")
    assert cache.origin_of(snap) is None and not cache.is_ours(snap)
    (snap / cache.MARKER).unlink()
    (snap / cache.MARKER).write_text(json.dumps({"origin": "download"}))
    assert cache.origin_of(snap) == "download" and cache.is_ours(snap)
    (snap / cache.MARKER).write_text(json.dumps({"origin": "pip"}))
    assert cache.origin_of(snap) is None


def test_refs_are_readable_by_all_and_read_without_links_or_junk(tmp_path: Path, pkg: Path) -> None:
    root = tmp_path / "cache"
    old = os.umask(0o022)
    try:
        place(root, pkg)
    finally:
        os.umask(old)
    repo = root / "kernels--org--act"
    assert stat.S_IMODE((repo / "refs" / "v1").stat().st_mode) == 0o644  # as huggingface_hub leaves a ref
    (repo / "refs" / "main").write_bytes(b"\xff\xfe")
    assert cache.read_ref(repo, "main") is None
    (repo / "x").write_text(SHA)
    assert cache.read_ref(repo, "../x") is None  # not a ref name: never a path
    for folder in (repo / "snapshots" / SHA, repo / "snapshots" / SHA / "build" / VARIANT / "layers"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o755  # others of a shared cache can read it
    (repo / "refs" / "v2").symlink_to(repo / "refs" / "v1")
    assert cache.read_ref(repo, "v2") is None and cache.read_ref(repo, "v1") == SHA
    link = tmp_path / "snap-link"
    link.symlink_to(repo / "snapshots" / SHA)
    assert cache.is_ours(repo / "snapshots" / SHA) and not cache.is_ours(link)


def test_one_environment_one_machine_name_one_label() -> None:
    assert machine("AMD64", "Windows") == ("x86_64", "windows")
    assert machine("arm64", "Darwin") == ("aarch64", "darwin")
    assert machine("aarch64", "linux") == ("aarch64", "linux")
    # local-kernels --check names the variant index with the label `which` derives, XPU included
    xpu = Environment("linux", "x86_64", "2.13.0", xpu="20250101", cxx11_abi=True)
    assert label_or_none(xpu) == "torch213xpu20251cxx11" == xpu.label
    assert label_or_none(Environment("linux", "ppc64le", "2.13.0", cxx11_abi=True)) is None
    assert label_or_none(Environment("linux", "x86_64")) is None


def test_a_ref_taken_away_while_it_is_written_is_tried_again(tmp_path: Path, pkg: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """refs/<ref> is there when the run links its own (FileExistsError) and gone when it reads it back (another
    writer took it away in between): the run tries again and the ref names its commit. A ref that keeps going
    away is left after REF_TRIES tries, with a note, and the snapshot stays."""
    root = tmp_path / "cache"
    real, calls = writer._link_or_create, []

    def once(*args: object) -> bool:
        calls.append(args)
        if len(calls) == 1:
            raise FileExistsError(errno.EEXIST, "File exists")
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(writer, "_link_or_create", once)
    notes: list[str] = []
    place(root, pkg, notes=notes)
    assert len(calls) == 2 and notes == []
    assert cache.read_ref(root / "kernels--org--act", "v1") == SHA

    def always(*args: object) -> bool:
        calls.append(args)
        raise FileExistsError(errno.EEXIST, "File exists")

    calls.clear()
    monkeypatch.setattr(writer, "_link_or_create", always)
    got = place(root, pkg, sha=SHA2, refs=("v2",), notes=notes)
    assert len(calls) == writer.REF_TRIES == 3
    assert notes == [f"org/act: refs/v2 in {root} keeps changing; left as it is"]
    assert got.is_dir() and cache.read_ref(root / "kernels--org--act", "v2") is None
    assert cache.read_ref(root / "kernels--org--act", "v1") == SHA


def test_take_back_follows_no_link_and_takes_only_what_the_run_made(tmp_path: Path, pkg: Path) -> None:
    """download's all or nothing: what place recorded is taken back by identity, through descriptors. A ref
    another writer set meanwhile, a snapshot another writer placed and a link planted where the run's snapshot
    was are left as they are, and what the link points at is untouched."""
    root = tmp_path / "cache"
    first = Writer(root, "download")
    first.place(Placement("org/act", SHA, VARIANT, pkg, hashes(pkg), ("v1", "main")))
    made = first.made["org/act"]
    assert [m.kind for m in made] == ["repo", "dir", "dir", "snapshot", "dir", "ref", "ref"]
    repo = cache.repo_folder(root, "org/act")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("mine")
    (repo / "refs" / "main").unlink()
    (repo / "refs" / "main").write_text(SHA2)  # another writer's ref, set meanwhile
    (repo / "snapshots" / SHA2).mkdir()  # another writer's snapshot, placed meanwhile
    writer.take_back(root, "org/act", list(made))
    assert (repo / "refs" / "main").read_text() == SHA2 and not (repo / "refs" / "v1").exists()
    assert sorted(p.name for p in (repo / "snapshots").iterdir()) == [SHA2]
    assert repo.is_dir()  # not the run's to remove: it holds another writer's snapshot

    (repo / "snapshots" / SHA2).rmdir()
    second = Writer(root, "download")
    second.place(Placement("org/act", SHA, VARIANT, pkg, hashes(pkg)))
    os.rename(repo / "snapshots" / SHA, tmp_path / "moved")
    (repo / "snapshots" / SHA).symlink_to(outside, target_is_directory=True)  # planted where the run's was
    second.take_back()
    assert (repo / "snapshots" / SHA).is_symlink() and sorted(p.name for p in outside.iterdir()) == ["keep"]
    assert (tmp_path / "moved" / cache.MARKER).is_file()


def test_a_full_cache_says_how_many_published_blobs_stay(tmp_path: Path) -> None:
    """The line counts the blobs left (one, several) or says nothing was left; an error that is no fault of the
    cache's file system comes back as it is."""
    full = OSError(errno.ENOSPC, "No space left on device")
    said = {n: str(writer._unusable(full, tmp_path, n)) for n in (0, 1, 2)}
    fix = "; free space or fix its permissions, or give another folder: --cache DIR or KERNELS_CACHE"
    assert said[0] == f"the Hub cache {tmp_path}: No space left on device (nothing of this kernel was left there){fix}"
    assert said[1] == (f"the Hub cache {tmp_path}: No space left on device (no snapshot or ref of this kernel was left "
                       f"there; the 1 checked blob it published stays in blobs/, unused){fix}")
    assert said[2] == (f"the Hub cache {tmp_path}: No space left on device (no snapshot or ref of this kernel was left "
                       f"there; the 2 checked blobs it published stay in blobs/, unused){fix}")
    other = OSError(errno.ENAMETOOLONG, "File name too long")
    assert writer._unusable(other, tmp_path, 1) is other
