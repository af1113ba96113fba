"""local-kernels --check and transformers' mapping: which mapped kernels load offline from the Hub cache.

The mapping is given as the probe prints it (no transformers, no process); the Hub cache is made by hand.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from judge_kit import REJECTED, asker, judge
from kernel_factory import cli
from kernel_factory.errors import EXIT_OK, EXIT_REFUSED, UsageError
from kernel_factory.local.local_kernels import command as local_kernels
from kernel_factory.local.local_kernels import loaders
from kernel_factory.local.probe.environment import Environment
from kernel_factory.sources.transformers_map import MARK, KernelMapping, parse

# kernels chooses the variant with torch imported (the test venv has no numpy, which torch warns about).
pytestmark = [pytest.mark.filterwarnings("ignore:Failed to initialize NumPy:UserWarning"),
              pytest.mark.usefixtures("no_cuda_runtime")]


LIGER_SHA = "1" * 40
GDN_SHA = "531ae679ab5c13a3bf49607e1b6e6459300772e9"
MEGA_SHA = "2" * 40
CUDA = Environment(os="linux", arch="x86_64", torch="2.13.0", cuda="13.0", cxx11_abi=True)
CPU = Environment(os="linux", arch="x86_64", torch="2.13.0", cxx11_abi=True)
FIX = "mirror it (a [[transformers]] table) and run `kernel-factory download` or `local-kernels --cache`"


def entry(layer: str, device: str, modes: list[str], repo: str | None, version: int | None = None,
          revision: str | None = None) -> dict[str, Any]:
    return {"layer": layer, "device": device, "modes": modes, "repo_id": repo, "version": version,
            "revision": revision}


ENTRIES = [
    entry("RMSNorm", "cuda", ["training"], "kernels-community/liger-kernels", 3),
    entry("RMSNorm", "cuda", ["inference"], "kernels-community/liger-kernels", 3),
    entry("SiLU", "cuda", ["inference", "torch_compile"], "kernels-community/activation", 1),
    entry("Gdn", "cuda", ["fallback"], "Atlas-Inference/gdn", revision=GDN_SHA),
    entry("Local", "cuda", ["inference"], None),
    entry("MegaBlocksMoeMLP", "cpu", ["inference"], "kernels-community/megablocks", 1),
]


def mapping(entries: list[dict[str, Any]]) -> KernelMapping:
    out = {"transformers": "5.22.2", "kernels": "0.17.2", "entries": entries}
    return parse(MARK + json.dumps(out) + "\n", "/venv")


def snapshot(root: Path, repo: str, sha: str, variant: str, ref: str | None = None) -> Path:
    repo_dir = root / ("kernels--" + repo.replace("/", "--"))
    build = repo_dir / "snapshots" / sha / "build" / variant
    build.mkdir(parents=True)
    (build / "__init__.py").write_text("")
    if ref:
        (repo_dir / "refs").mkdir(exist_ok=True)
        (repo_dir / "refs" / ref).write_text(sha)
    return build


def test_names_each_mapped_kernel_for_the_device_and_whether_it_loads_offline(tmp_path: Path) -> None:
    liger = snapshot(tmp_path, "kernels-community/liger-kernels", LIGER_SHA, "torch-universal", ref="v3")
    snapshot(tmp_path, "Atlas-Inference/gdn", GDN_SHA, "torch29-metal-aarch64-darwin")
    snapshot(tmp_path, "kernels-community/megablocks", MEGA_SHA, "torch-universal", ref="v1")
    said, ok = loaders.mapping_lines(mapping(ENTRIES), CUDA, tmp_path, "/venv/bin/python", asker(tmp_path))
    assert said == [
        f"transformers 5.22.2 (kernels 0.17.2) at /venv/bin/python maps 3 kernels for cuda, this machine's device "
        f"(Hub cache {tmp_path}):",
        f"  kernels-community/liger-kernels version 3 (RMSNorm; training, inference): loads offline from refs/v3 "
        f"names {LIGER_SHA}: {liger}",
        "  kernels-community/activation version 1 (SiLU; inference, torch_compile): not loadable offline (no refs/v1 "
        f"for kernels-community/activation in {tmp_path}): {FIX}",
        f"  Atlas-Inference/gdn revision {GDN_SHA} (Gdn; fallback): not loadable offline (none of its build variants "
        f"(torch29-metal-aarch64-darwin) fits this torch (kernels 0.17.2: torch29-metal-aarch64-darwin: {REJECTED})): "
        f"{FIX}",
        "  Local: a local repository, loaded from its path",
        "1 of 3 kernels transformers maps for cuda load offline",
    ]
    assert not ok


def test_a_ref_whose_snapshot_is_missing_is_not_loadable(tmp_path: Path) -> None:
    refs = tmp_path / "kernels--kernels-community--megablocks" / "refs"
    refs.mkdir(parents=True)
    (refs / "v1").write_text(MEGA_SHA)
    said, ok = loaders.mapping_lines(mapping(ENTRIES), CPU, tmp_path, "py", asker(tmp_path))
    snap = tmp_path / "kernels--kernels-community--megablocks" / "snapshots" / MEGA_SHA
    assert said[1] == (f"  kernels-community/megablocks version 1 (MegaBlocksMoeMLP; inference): not loadable "
                       f"offline (refs/v1 names {MEGA_SHA}: {snap} does not exist): {FIX}")
    assert said[-1] == "0 of 1 kernels transformers maps for cpu load offline" and not ok


def test_only_the_device_torch_reports_is_checked(tmp_path: Path) -> None:
    mega = snapshot(tmp_path, "kernels-community/megablocks", MEGA_SHA, "torch-universal", ref="v1")
    said, ok = loaders.mapping_lines(mapping(ENTRIES), CPU, tmp_path, "py", asker(tmp_path))
    assert said[1:] == [
        f"  kernels-community/megablocks version 1 (MegaBlocksMoeMLP; inference): loads offline from refs/v1 names "
        f"{MEGA_SHA}: {mega}",
        "1 of 1 kernels transformers maps for cpu load offline",
    ]
    assert ok
    metal = Environment(os="darwin", arch="aarch64", torch="2.13.0", mps=True)
    said, ok = loaders.mapping_lines(mapping(ENTRIES), metal, tmp_path, "py", asker(tmp_path))
    assert said == ["transformers 5.22.2 at py maps no kernel for mps, this machine's device"] and ok


def test_nothing_is_said_without_transformers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loaders, "installed_version", lambda name, path: None)

    def no_env() -> Environment:
        raise AssertionError("torch must not be asked when there is no transformers")

    assert loaders.check_mapping("py", None, no_env, tmp_path, asker(tmp_path)) == ([], True)


def test_a_transformers_without_the_function_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def read(python: str) -> KernelMapping:
        out = {"transformers": "5.19.0", "kernels": None, "error": "no-function", "detail": ""}
        return parse(MARK + json.dumps(out), python)

    monkeypatch.setattr(loaders, "installed_version", lambda name, path: "5.19.0")
    monkeypatch.setattr(loaders, "read_mapping", read)
    said, ok = loaders.check_mapping("/venv/bin/python", None, lambda: CPU, tmp_path, asker(tmp_path))
    with pytest.raises(UsageError) as info:
        read("/venv/bin/python")
    assert said == [f"transformers' mapped kernels are not checked: {info.value}"] and ok
    assert "5.19.0 at /venv/bin/python has no kernel mapping" in said[0]


@pytest.mark.parametrize("cached", [False, True])
def test_check_exits_3_while_a_mapped_kernel_is_not_loadable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], cached: bool
) -> None:
    site, cache = tmp_path / "site", tmp_path / "cache"
    dist = site / "kernels-0.17.2.dist-info"  # the kernels library is installed, so only the mapping decides
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: kernels\nVersion: 0.17.2\n")
    monkeypatch.setattr(sys, "path", [str(site)])  # no kernel wheels installed: the cache came from `download`
    monkeypatch.setattr(loaders, "installed_version", lambda name, path: "5.22.2")
    monkeypatch.setattr(loaders, "read_mapping", lambda python: mapping(ENTRIES))
    monkeypatch.setattr(local_kernels, "detect_environment", lambda python, path: CPU)
    monkeypatch.setattr(local_kernels, "ask_kernels", lambda python, builds, folders: judge(cache))
    if cached:
        snapshot(cache, "kernels-community/megablocks", MEGA_SHA, "torch-universal", ref="v1")
    code = cli.main(["local-kernels", "--check", "--cache", str(cache)])
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("transformers 5.22.2 (kernels 0.17.2) at ") and len(out) == 3
    assert out[1].startswith("  kernels-community/megablocks version 1 (MegaBlocksMoeMLP; inference): "
                             + ("loads offline" if cached else "not loadable offline"))
    assert out[-1] == f"{int(cached)} of 1 kernels transformers maps for cpu load offline"
    assert code == (EXIT_OK if cached else EXIT_REFUSED)


def test_the_legacy_models_folder_is_read_as_kernels_reads_it(tmp_path: Path) -> None:
    build = tmp_path / "models--kernels-community--megablocks" / "snapshots" / MEGA_SHA / "build" / "torch-universal"
    build.mkdir(parents=True)
    (build.parents[3] / "refs").mkdir()
    (build.parents[3] / "refs" / "v1").write_text(MEGA_SHA)
    said, ok = loaders.mapping_lines(mapping(ENTRIES), CPU, tmp_path, "py", asker(tmp_path))
    assert said[1].endswith(f"loads offline from refs/v1 names {MEGA_SHA}: {build}") and ok
