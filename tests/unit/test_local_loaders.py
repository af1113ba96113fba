"""local-kernels --check's loading paths: what version=N and a locked commit load from the Hub cache, read as
kernels reads it (the legacy models-- folder's ref first)."""

from __future__ import annotations

from pathlib import Path

import pytest
from kernel_factory.local import loaders
from kernel_factory.local.installed import InstalledKernel

pytestmark = pytest.mark.filterwarnings("ignore:Failed to initialize NumPy:UserWarning")

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
