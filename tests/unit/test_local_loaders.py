"""local-kernels --check's loading paths: what version=N and a locked commit load from the Hub cache, read as
kernels reads it (the legacy models-- folder's ref first)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from kernel_factory.local import loaders
from kernel_factory.local.installed import InstalledKernel

pytestmark = pytest.mark.filterwarnings("ignore:Failed to initialize NumPy:UserWarning")


@pytest.fixture(autouse=True)
def _no_cuda_runtime(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without torch, kernels looks for a CUDA runtime with ctypes.util.find_library, which runs /sbin/ldconfig: a
    unit test starts no process, and its answer must not hang on the machine's libraries. Here there is none."""
    import ctypes.util

    monkeypatch.setattr(ctypes.util, "find_library", lambda name: None)

SHA = "3" * 40
OTHER = "4" * 40


def kernel(tmp_path: Path) -> InstalledKernel:
    return InstalledKernel(dist="act", version="1.0.0+torchuniversal", key="org/act", repo_id="org/act", name="act",
                           variant="torch-universal", folder=tmp_path / "site" / "act", metadata={"version": 1},
                           revision=SHA)


def snapshot(root: Path, folder: str, sha: str, ref: str | None = "v1") -> Path:
    build = root / folder / "snapshots" / sha / "build" / "torch-universal"
    build.mkdir(parents=True)
    (build / "__init__.py").write_text("")
    if ref is not None:
        (root / folder / "refs").mkdir(exist_ok=True)
        (root / folder / "refs" / ref).write_text(sha)
    return build


def test_version_resolves_through_the_legacy_models_folder_first(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    legacy = snapshot(root, "models--org--act", OTHER)
    snapshot(root, "kernels--org--act", SHA)
    assert loaders.resolve(root, "org/act", "v1") == (root / "models--org--act", OTHER)
    said = [p.line() for p in loaders.paths(kernel(tmp_path), root, {})]
    assert said[0] == (f"  get_kernel, has_kernel, LayerRepository, FuncRepository (version=1): yes, refs/v1 names "
                       f"{OTHER}: {legacy} (a download from the Hub)")


def test_version_falls_back_to_the_kernels_folder(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    build = snapshot(root, "kernels--org--act", SHA)
    assert loaders.resolve(root, "org/act", "v1") == (root / "kernels--org--act", SHA)
    assert loaders.resolve(root, "org/act", "v2") is None
    said = [p.line() for p in loaders.paths(kernel(tmp_path), root, {})]
    assert said == [
        f"  get_kernel, has_kernel, LayerRepository, FuncRepository (version=1): yes, refs/v1 names {SHA}: {build} "
        "(a download from the Hub)",
        f"  get_kernel, has_kernel (revision=<sha>): yes, {build} (a download from the Hub)",
        f"  LockedLayerRepository, LockedFuncRepository, get_locked_kernel, load_kernel (lock on {SHA}): yes, "
        f"{build} (a download from the Hub)",
    ]


def test_a_snapshot_without_a_fitting_variant_or_any_variant(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    snap = root / "kernels--org--act" / "snapshots" / SHA
    (snap / "build" / "torch29-metal-aarch64-darwin").mkdir(parents=True)
    assert loaders.snapshot_fit(snap) == (None, "none of its build variants (torch29-metal-aarch64-darwin) fits "
                                                "this torch")
    assert loaders.snapshot_fit(root / "missing") == (None, f"{root / 'missing'} does not exist")
    empty = root / "kernels--org--act" / "snapshots" / OTHER
    empty.mkdir(parents=True)
    assert loaders.snapshot_fit(empty) == (None, f"{empty} holds no build variant folder")
    said = [p.line() for p in loaders.paths(kernel(tmp_path), root, {})]
    assert said[-1] == (f"  LockedLayerRepository, LockedFuncRepository, get_locked_kernel, load_kernel (lock on "
                        f"{SHA}): no, {snap}: none of its build variants (torch29-metal-aarch64-darwin) fits this "
                        "torch")
    (root / "kernels--org--act" / "refs").mkdir()
    (root / "kernels--org--act" / "refs" / "v1").write_text(OTHER)
    said = [p.line() for p in loaders.paths(kernel(tmp_path), root, {})]
    assert said[0].endswith(f"no, refs/v1 names {OTHER}: {empty} holds no build variant folder: run "
                            "`kernel-factory local-kernels --cache` again")


def ours(build: Path, origin: str = "download") -> None:
    """Mark the snapshot holding ``build`` as kernel-factory's, as the cache writer does."""
    (build.parent.parent / ".kernel-factory.json").write_text(f'{{"origin": "{origin}"}}')


@pytest.mark.parametrize("other", ["2" * 40, "4" * 40])  # a commit sorting below and above the wheel's
def test_our_snapshot_is_this_wheels_only_at_its_commit_and_variant(tmp_path: Path, other: str) -> None:
    root = tmp_path / "cache"
    mine = snapshot(root, "kernels--org--act", SHA)
    ours(mine, "local-kernels")
    said = [p.line() for p in loaders.paths(kernel(tmp_path), root, {})]
    assert said[1] == (f"  get_kernel, has_kernel (revision=<sha>): yes, {mine} (this wheel's commit and variant, "
                       "checked and placed by kernel-factory local-kernels)")
    for name in ("refs", "snapshots"):
        for p in sorted((root / "kernels--org--act" / name).rglob("*"), reverse=True):
            p.rmdir() if p.is_dir() else p.unlink()
    theirs = snapshot(root, "kernels--org--act", other, ref=None)
    ours(theirs)  # placed from another wheel, at another commit than this wheel's
    assert [p.line() for p in loaders.paths(kernel(tmp_path), root, {})][0] == (
        f"  get_kernel, has_kernel, LayerRepository, FuncRepository (version=1): no, no refs/v1 for org/act in "
        f"{root}: run `kernel-factory local-kernels --cache`")
    (root / "kernels--org--act" / "refs" / "v1").write_text(other)
    said = [p.line() for p in loaders.paths(kernel(tmp_path), root, {})]
    assert said[0] == (f"  get_kernel, has_kernel, LayerRepository, FuncRepository (version=1): yes, refs/v1 names "
                       f"{other}: {theirs} (placed by kernel-factory download from another wheel, not this one "
                       f"({SHA}))")


def test_our_snapshot_of_the_wheels_commit_with_another_variant_is_another_wheels(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    ours(snapshot(root, "kernels--org--act", SHA))
    k = replace(kernel(tmp_path), variant="torch-cpu")
    said = [p.line() for p in loaders.paths(k, root, {})]
    assert said[1].endswith(f"(placed by kernel-factory download from another wheel, not this one ({SHA}))")


def test_local_kernels_maps_only_the_exact_entry(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    build = snapshot(root, "kernels--org--act", SHA)
    k = kernel(tmp_path)
    exact = f"org/act={k.folder}"
    said = [p.line() for p in loaders.paths(k, root, {"LOCAL_KERNELS": f"a/b=/x:{exact}"})]
    assert said[:2] == [
        "  get_kernel, has_kernel (any version= or revision=): yes, through LOCAL_KERNELS",
        f"  LayerRepository, FuncRepository (version=1): yes, refs/v1 names {SHA}, and LOCAL_KERNELS loads this "
        "wheel for it"]
    for entry in ("zz/other=/x", f"{exact}x", "a/b=/x"):  # sorting above and below the exact entry
        said = [p.line() for p in loaders.paths(k, root, {"LOCAL_KERNELS": entry})]
        assert said[1] == f"  get_kernel, has_kernel (revision=<sha>): yes, {build} (a download from the Hub)", entry


@pytest.mark.parametrize(("change", "why"), [
    ({"repo_id": None}, "its provenance names no Hub repository (built without --repo-id)"),
    ({"revision": None}, "it was built from an unknown revision, not a Hub commit"),
    ({"revision": "main"}, "it was built from main, not a Hub commit"),
    ({"variant": None}, "its provenance names no build variant"),
    ({}, None),
])  # fmt: skip
def test_why_a_wheel_cannot_go_in_the_cache(tmp_path: Path, change: dict[str, Any], why: str | None) -> None:
    assert loaders.why_not_cacheable(replace(kernel(tmp_path), **change)) == why
