"""local/hubcache.py: the Hub cache layout kernels reads, written without changing what is there; and the one
Environment of local/ (machine name and label derived once)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from kernel_factory.local import hubcache
from kernel_factory.local.checks import Environment, main_label
from kernel_factory.local.environment import machine

SHA, SHA2, HUB = "a" * 40, "b" * 40, "c" * 40


def tree(root: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
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
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text("")
    (folder / "metadata.json").write_text(json.dumps({"name": "act", "version": 1}))
    return folder


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
    assert hubcache.cache_root({"KERNELS_CACHE": "/k", "HF_HUB_CACHE": "/h"}) == Path("/k")
    assert hubcache.cache_root({"HF_HUB_CACHE": "/h", "HF_HOME": "/home"}) == Path("/h")
    assert hubcache.cache_root({"HUGGINGFACE_HUB_CACHE": "/legacy"}) == Path("/legacy")
    assert hubcache.cache_root({"HF_HOME": "~/hf"}) == Path(home) / "hf" / "hub"
    assert hubcache.cache_root({"XDG_CACHE_HOME": "/x"}) == Path("/x/huggingface/hub")
    assert hubcache.cache_root({"KERNELS_CACHE": ""}) == Path(home) / ".cache" / "huggingface" / "hub"


def test_place_writes_the_layout_kernels_reads(tmp_path: Path, pkg: Path) -> None:
    root = tmp_path / "cache"
    notes: list[str] = []
    got = hubcache.place(root, "org/act", SHA, "torch-universal", pkg, refs=["v1", "v1.0.0"], link=True, notes=notes)
    repo = root / "kernels--org--act"
    assert got == repo / "snapshots" / SHA / "build" / "torch-universal"
    assert os.readlink(got) == str(pkg)
    assert (repo / "refs" / "v1").read_text() == SHA  # no newline, as huggingface_hub writes refs
    assert (repo / "refs" / "v1.0.0").read_text() == SHA
    assert hubcache.is_ours(repo / "snapshots" / SHA) and notes == []
    assert not [p for p in repo.rglob(".tmp-*")]
    before = tree(root)
    hubcache.place(root, "org/act", SHA, "torch-universal", pkg, refs=["v1"], link=True, notes=notes)
    assert tree(root) == before and notes == []  # twice: nothing changes


def test_a_reinstalled_wheel_moves_only_refs_kernel_factory_wrote(tmp_path: Path, pkg: Path) -> None:
    root = tmp_path / "cache"
    hubcache.place(root, "org/act", SHA, "torch-universal", pkg, refs=["v1"], link=True)
    hubcache.place(root, "org/act", SHA2, "torch-universal", pkg, refs=["v1"], link=True)
    assert (root / "kernels--org--act" / "refs" / "v1").read_text() == SHA2


def test_a_hub_ref_is_left_with_a_note(tmp_path: Path, pkg: Path) -> None:
    root = tmp_path / "cache"
    hub_snapshot(root, HUB, "torch-universal", {"v1": HUB, "main": HUB})
    before = tree(root)
    notes: list[str] = []
    hubcache.place(root, "org/act", SHA, "torch-universal", pkg, refs=["v1", "main"], link=True, notes=notes)
    after = tree(root)
    assert {k: v for k, v in after.items() if k in before} == before
    assert notes == [
        f"org/act: refs/{ref} in {root} names {HUB}, which kernel-factory did not write; left as it is: "
        f"use revision='{SHA}' or a lock file" for ref in ("v1", "main")
    ]


def test_a_legacy_models_ref_wins_in_kernels_so_it_is_named(tmp_path: Path, pkg: Path) -> None:
    root = tmp_path / "cache"
    hub_snapshot(root, HUB, "torch-universal", {"v1": HUB}, repo="models--org--act")
    notes: list[str] = []
    hubcache.place(root, "org/act", SHA, "torch-universal", pkg, refs=["v1"], link=True, notes=notes)
    assert not (root / "kernels--org--act" / "refs" / "v1").exists()
    assert notes == [f"org/act: refs/v1 in models--org--act names {HUB}, and kernels reads it first; left as it is: "
                     f"use revision='{SHA}' or a lock file"]


def test_a_hub_snapshot_of_the_same_commit(tmp_path: Path, pkg: Path) -> None:
    root = tmp_path / "cache"
    hub_snapshot(root, SHA, "torch-universal", {})
    before = tree(root)
    # with this variant: it is what loads, untouched
    got = hubcache.place(root, "org/act", SHA, "torch-universal", pkg, refs=[], link=True)
    assert got == root / "kernels--org--act" / "snapshots" / SHA / "build" / "torch-universal"
    assert tree(root) == before
    # without it: refused, nothing written into it
    with pytest.raises(hubcache.CacheConflict, match=f"snapshot {SHA} in .* came from the Hub without "
                       "build/torch213-cxx11-cpu-x86_64-linux; left as it is"):
        hubcache.place(root, "org/act", SHA, "torch213-cxx11-cpu-x86_64-linux", pkg, refs=["v1"], link=True)
    assert tree(root) == before


def test_copy_mode_and_bad_input(tmp_path: Path, pkg: Path) -> None:
    root = tmp_path / "cache"
    (pkg / "__pycache__").mkdir()
    (pkg / "__pycache__" / "x.pyc").write_bytes(b"")
    got = hubcache.place(root, "org/act", SHA, "torch-universal", pkg, refs=["v1"], link=False)
    assert not got.is_symlink() and sorted(p.name for p in got.iterdir()) == ["__init__.py", "metadata.json"]
    with pytest.raises(hubcache.CacheConflict, match="'worktree' is not a 40-digit commit sha"):
        hubcache.place(root, "org/act", "worktree", "torch-universal", pkg, refs=[], link=True)
    with pytest.raises(hubcache.CacheConflict, match="'act' is not an org/name repository id"):
        hubcache.place(root, "act", SHA, "torch-universal", pkg, refs=[], link=True)
    with pytest.raises(hubcache.CacheConflict, match="'../x' is not a branch or tag name"):
        hubcache.place(root, "org/act", SHA, "torch-universal", pkg, refs=["../x"], link=True)
    with pytest.raises(hubcache.CacheConflict, match="holds no metadata.json"):
        hubcache.place(root, "org/act", SHA2, "torch-universal", tmp_path, refs=[], link=True)
    assert not (root / "kernels--org--act" / "snapshots" / SHA2).exists()


def test_one_environment_one_machine_name_one_label() -> None:
    assert machine("AMD64", "Windows") == ("x86_64", "windows")
    assert machine("arm64", "Darwin") == ("aarch64", "darwin")
    assert machine("aarch64", "linux") == ("aarch64", "linux")
    # local-kernels --check names the variant index with the label `which` derives, XPU included
    xpu = Environment("linux", "x86_64", "2.13.0", xpu="20250101", cxx11_abi=True)
    assert main_label(xpu) == "torch213xpu20251cxx11" == xpu.label
    assert main_label(Environment("linux", "ppc64le", "2.13.0", cxx11_abi=True)) is None
    assert main_label(Environment("linux", "x86_64")) is None
