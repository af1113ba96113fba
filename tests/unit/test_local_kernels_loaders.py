"""local-kernels --check's loading paths: what version=N and a locked commit load from the Hub cache, read as
the target's kernels reads it (0.17: the legacy models-- folder's ref first; 0.18+: kernels-- only), decided
from that kernels' answer (a Judge made from askkernels.py's JSON, no process)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from judge_kit import judge
from kernel_factory.local.local_kernels import loaders
from kernel_factory.local.local_kernels.installed import InstalledKernel, why_not_cacheable
from kernel_factory.local.probe.rules import Folder, Judge

pytestmark = [pytest.mark.filterwarnings("ignore:Failed to initialize NumPy:UserWarning"),
              pytest.mark.usefixtures("no_cuda_runtime")]


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
    assert loaders.resolve(root, "org/act", "v1", judge(root)) == (root / "models--org--act", OTHER)
    said = [p.line() for p in loaders.paths(kernel(tmp_path), root, {}, judge(root))]
    assert said[0] == (f"  get_kernel, has_kernel, LayerRepository, FuncRepository (version=1): yes, refs/v1 names "
                       f"{OTHER}: {legacy} (a download from the Hub)")


def test_version_falls_back_to_the_kernels_folder(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    build = snapshot(root, "kernels--org--act", SHA)
    assert loaders.resolve(root, "org/act", "v1", judge(root)) == (root / "kernels--org--act", SHA)
    assert loaders.resolve(root, "org/act", "v2", judge(root)) is None
    said = [p.line() for p in loaders.paths(kernel(tmp_path), root, {}, judge(root))]
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
    assert loaders.snapshot_fit(snap, judge(root)) == (
        None, "none of its build variants (torch29-metal-aarch64-darwin) fits this torch (kernels 0.17.2: "
        "torch29-metal-aarch64-darwin: OS (darwin) does not match system OS (linux))")
    assert loaders.snapshot_fit(root / "missing", judge(root)) == (None, f"{root / 'missing'} does not exist")
    empty = root / "kernels--org--act" / "snapshots" / OTHER
    empty.mkdir(parents=True)
    assert loaders.snapshot_fit(empty, judge(root)) == (None, f"{empty} holds no build variant folder")
    said = [p.line() for p in loaders.paths(kernel(tmp_path), root, {}, judge(root))]
    assert said[-1] == (f"  LockedLayerRepository, LockedFuncRepository, get_locked_kernel, load_kernel (lock on "
                        f"{SHA}): no, {snap}: none of its build variants (torch29-metal-aarch64-darwin) fits this "
                        "torch (kernels 0.17.2: torch29-metal-aarch64-darwin: OS (darwin) does not match system OS "
                        "(linux))")
    (root / "kernels--org--act" / "refs").mkdir()
    (root / "kernels--org--act" / "refs" / "v1").write_text(OTHER)
    said = [p.line() for p in loaders.paths(kernel(tmp_path), root, {}, judge(root))]
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
    said = [p.line() for p in loaders.paths(kernel(tmp_path), root, {}, judge(root))]
    assert said[1] == (f"  get_kernel, has_kernel (revision=<sha>): yes, {mine} (this wheel's commit and variant, "
                       "checked and placed by kernel-factory local-kernels)")
    for name in ("refs", "snapshots"):
        for p in sorted((root / "kernels--org--act" / name).rglob("*"), reverse=True):
            p.rmdir() if p.is_dir() else p.unlink()
    theirs = snapshot(root, "kernels--org--act", other, ref=None)
    ours(theirs)  # placed from another wheel, at another commit than this wheel's
    assert [p.line() for p in loaders.paths(kernel(tmp_path), root, {}, judge(root))][0] == (
        f"  get_kernel, has_kernel, LayerRepository, FuncRepository (version=1): no, no refs/v1 for org/act in "
        f"{root}: run `kernel-factory local-kernels --cache`")
    (root / "kernels--org--act" / "refs" / "v1").write_text(other)
    said = [p.line() for p in loaders.paths(kernel(tmp_path), root, {}, judge(root))]
    assert said[0] == (f"  get_kernel, has_kernel, LayerRepository, FuncRepository (version=1): yes, refs/v1 names "
                       f"{other}: {theirs} (placed by kernel-factory download from another wheel, not this one "
                       f"({SHA}))")


def test_our_snapshot_of_the_wheels_commit_with_another_variant_is_another_wheels(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    ours(snapshot(root, "kernels--org--act", SHA))
    k = replace(kernel(tmp_path), variant="torch-cpu")
    said = [p.line() for p in loaders.paths(k, root, {}, judge(root))]
    assert said[1].endswith(f"(placed by kernel-factory download from another wheel, not this one ({SHA}))")


def test_local_kernels_maps_only_the_exact_entry(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    build = snapshot(root, "kernels--org--act", SHA)
    k = kernel(tmp_path)
    exact = f"org/act={k.folder}"
    said = [p.line() for p in loaders.paths(k, root, {"LOCAL_KERNELS": f"a/b=/x:{exact}"}, judge(root))]
    assert said[:2] == [
        "  get_kernel, has_kernel (any version= or revision=): yes, through LOCAL_KERNELS",
        f"  LayerRepository, FuncRepository (version=1): yes, refs/v1 names {SHA}, and LOCAL_KERNELS loads this "
        "wheel for it"]
    for entry in ("zz/other=/x", f"{exact}x", "a/b=/x"):  # sorting above and below the exact entry
        said = [p.line() for p in loaders.paths(k, root, {"LOCAL_KERNELS": entry}, judge(root))]
        assert said[1] == f"  get_kernel, has_kernel (revision=<sha>): yes, {build} (a download from the Hub)", entry


@pytest.mark.parametrize(("change", "why"), [
    ({"repo_id": None}, "its provenance names no Hub repository (built without --repo-id)"),
    ({"revision": None}, "it was built from an unknown revision, not a Hub commit"),
    ({"revision": "main"}, "it was built from main, not a Hub commit"),
    ({"variant": None}, "its provenance names no build variant"),
    ({}, None),
])  # fmt: skip
def test_why_a_wheel_cannot_go_in_the_cache(tmp_path: Path, change: dict[str, Any], why: str | None) -> None:
    assert why_not_cacheable(replace(kernel(tmp_path), **change)) == why


def test_kernels_018_and_later_read_version_refs_from_the_kernels_folder_only(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    snapshot(root, "models--org--act", OTHER)
    build = snapshot(root, "kernels--org--act", SHA)
    for version in ("0.18.3", "0.19.1"):
        assert loaders.resolve(root, "org/act", "v1", judge(root, version)) == (root / "kernels--org--act", SHA)
    (root / "kernels--org--act" / "refs" / "v1").unlink()
    assert loaders.resolve(root, "org/act", "v1", judge(root, "0.19.1")) is None
    assert loaders.resolve(root, "org/act", "v1", judge(root, "0.17.2")) == (root / "models--org--act", OTHER)
    said = [p.line() for p in loaders.paths(kernel(tmp_path), root, {}, judge(root, "0.19.1"))]
    assert said == [
        f"  get_kernel, has_kernel, LayerRepository, FuncRepository (version=1): no, no refs/v1 for org/act in {root}: "
        "run `kernel-factory local-kernels --cache`",
        f"  get_kernel, has_kernel (revision=<sha>): yes, {build} (a download from the Hub)",
        f"  LockedLayerRepository, LockedFuncRepository, get_locked_kernel, load_kernel (lock on {SHA}): yes, "
        f"{build} (a download from the Hub)",
    ]


def test_a_digest_mismatch_refuses_the_load_from_kernels_018_on(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    build = snapshot(root, "kernels--org--act", SHA)
    bad = "Missing file: act/__init__.py"
    assert loaders.snapshot_fit(build.parent.parent, judge(root, "0.17.2", bad)) == ("torch-universal", str(build))
    for version in ("0.18.3", "0.19.1"):
        assert loaders.snapshot_fit(build.parent.parent, judge(root, version, bad)) == (
            None, f"{build}: kernels {version} refuses it at load: the files do not match the digest in its "
                  f"metadata.json ({bad})")
        assert loaders.snapshot_fit(build.parent.parent, judge(root, version, "none")) == ("torch-universal",
                                                                                          str(build))
    said = [p.line() for p in loaders.paths(kernel(tmp_path), root, {}, judge(root, "0.19.1", bad))]
    assert said[1] == (f"  get_kernel, has_kernel (revision=<sha>): no, {build}: kernels 0.19.1 refuses it at load: "
                       f"the files do not match the digest in its metadata.json ({bad})")  # no --cache fix offered


def test_without_kernels_in_the_target_nothing_is_chosen(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    build = snapshot(root, "kernels--org--act", SHA)
    none = Judge.from_json({"python": "/app/bin/python", "kernels": None, "error": "ModuleNotFoundError: kernels"})
    assert loaders.snapshot_fit(build.parent.parent, none) == (
        None, "no kernels library (ModuleNotFoundError: kernels) there to choose a variant")
    assert none.rules_line() == ("judged for /app/bin/python: it has no kernels library (ModuleNotFoundError: "
                                 "kernels), so nothing loads there: pip install kernels")


def test_an_installed_folder_kernels_refuses_fails_the_local_kernels_paths(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    build = snapshot(root, "kernels--org--act", SHA)
    k = kernel(tmp_path)
    bad = "Unknown file: __init__.py"
    answer = judge(root, "0.19.1")
    answer = replace(answer, folders={**answer.folders, str(k.folder): Folder(None, bad)})
    refusal = f"kernels 0.19.1 refuses it at load: the files do not match the digest in its metadata.json ({bad})"
    said = [p.line() for p in loaders.paths(k, root, {"LOCAL_KERNELS": f"org/act={k.folder}"}, answer)]
    assert said[:2] == [
        f"  get_kernel, has_kernel (any version= or revision=): no, through LOCAL_KERNELS, but {refusal}",
        f"  LayerRepository, FuncRepository (version=1): no, refs/v1 names {SHA}, and LOCAL_KERNELS loads this wheel "
        f"for it, but {refusal}"]
    said = [p.line() for p in loaders.paths(k, root, {}, answer)]
    assert said == [
        f"  LOCAL_KERNELS naming {k.folder} (--shell): no, {refusal}",
        f"  get_kernel, has_kernel, LayerRepository, FuncRepository (version=1): yes, refs/v1 names {SHA}: {build} "
        "(a download from the Hub)",
        f"  get_kernel, has_kernel (revision=<sha>): yes, {build} (a download from the Hub)",
        f"  LockedLayerRepository, LockedFuncRepository, get_locked_kernel, load_kernel (lock on {SHA}): yes, "
        f"{build} (a download from the Hub)",
    ]
