"""kernel-factory end to end through factory.cli.main with the Hub served by olah on 127.0.0.1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hub_server import Proxy, git, hf_env, hub, serve_repo
from kernel_factory.cli import main
from kernel_factory.errors import EXIT_OK, EXIT_REFUSED, EXIT_USAGE
from kernel_factory.verify.lockfile import lock_hash

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
PROVENANCE = "kernel_factory.json"
VARIANT = "torch213-cxx11-cpu-x86_64-linux"


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("fixtures")
    script = ROOT / "scripts" / "build_fixtures.py"
    assert script.is_file(), "scripts/build_fixtures.py is missing: the example repositories cannot be built"
    subprocess.run([sys.executable, str(script), "--from-prebuilt", "--out", str(out)], check=True,
                   capture_output=True)
    # A tampered copy: v1.1.2 moved to a commit that edits a file without updating metadata.json's digest.
    tampered = out / "tampered"
    subprocess.run(["git", "clone", "-q", str(out / "img2grey"), str(tampered)], check=True, capture_output=True)
    ops = tampered / "build" / VARIANT / "_ops.py"
    ops.write_text(ops.read_text() + "\nimport os  # injected\n")
    git(tampered, "commit", "-q", "-am", "tamper", when=1_750_000_000)
    git(tampered, "tag", "-f", "v1.1.2")
    return out


@pytest.fixture(scope="module")
def served(fixtures: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proxy]:
    root = tmp_path_factory.mktemp("hub")
    mirrors = root / "mirrors"
    serve_repo(fixtures / "img2grey", mirrors, "kernels-community/img2grey")
    serve_repo(fixtures / "tampered", mirrors, "kernels-community/tampered")
    serve_repo(fixtures / "pyonly", mirrors, "kernels-community/pyonly", repo_type="model")
    serve_repo(fixtures / "relu-nested", mirrors, "kernels-community/relu-nested")
    with hub(mirrors, root / "olah") as (_, proxy):
        yield proxy


@pytest.fixture
def env(served: Proxy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for key in ("HF_HUB_OFFLINE", "HF_TOKEN", "HF_HUB_CACHE"):
        monkeypatch.delenv(key, raising=False)
    for key, value in hf_env(served.url, tmp_path / "hf").items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def entries(wheel: Path) -> dict[str, bytes]:
    """Every zip entry but the provenance file, and RECORD without its line."""
    out: dict[str, bytes] = {}
    with zipfile.ZipFile(wheel) as z:
        for info in z.infolist():
            data = z.read(info)
            if info.filename.endswith(f".dist-info/{PROVENANCE}"):
                continue
            if info.filename.endswith(".dist-info/RECORD"):
                data = b"".join(line for line in data.splitlines(keepends=True) if PROVENANCE.encode() not in line)
            out[info.filename] = data
    return out


def test_hub_wheels_match_local_wheels(fixtures: Path, env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hub_out, local_out = env / "hub-wheels", env / "local-wheels"
    assert main(["to-wheel", "kernels-community/img2grey", "1.1.2", "-o", str(hub_out), "--jobs", "2"]) == EXIT_OK
    assert main(["to-wheel", str(fixtures / "img2grey"), "1.1.2", "--repo-id", "kernels-community/img2grey",
                 "-o", str(local_out), "--jobs", "2"]) == EXIT_OK
    hub_wheels = sorted(p.name for p in hub_out.glob("*.whl"))
    assert hub_wheels == sorted(p.name for p in local_out.glob("*.whl"))
    assert len(hub_wheels) == 3  # cpu x86_64, cpu aarch64, cu130
    for name in hub_wheels:
        assert entries(hub_out / name) == entries(local_out / name), name
        with zipfile.ZipFile(hub_out / name) as z:
            prov = json.loads(next(z.read(n) for n in z.namelist() if n.endswith(PROVENANCE)))
        assert prov["repo_id"] == "kernels-community/img2grey"
        assert prov["revision"] == git(fixtures / "img2grey", "rev-parse", "v1.1.2^{commit}")


def test_fleet_from_config_nested_layout_and_branch_version(fixtures: Path, env: Path) -> None:
    """A factory.toml fleet from the Hub: a nested-layout kernel by major branch, a flat one by specifier."""
    (env / "factory.toml").write_text(
        '[factory]\nstore = "store"\n\n'
        '[[kernel]]\nrepo = "kernels-community/relu-nested"\nversions = [1]\n\n'
        '[[kernel]]\nrepo = "kernels-community/img2grey"\ntags = ">=1.1.1,<2"\n'
        'variants = ["torch213-cxx11-cpu-*"]\n'
    )
    assert main(["build", "--config", str(env / "factory.toml")]) == EXIT_OK
    wheels = sorted(p.name for p in (env / "store" / "files").glob("*.whl"))
    assert wheels == [
        "img2grey-1.1.2+torch213cpucxx11-cp39-abi3-manylinux_2_28_aarch64.whl",
        "img2grey-1.1.2+torch213cpucxx11-cp39-abi3-manylinux_2_28_x86_64.whl",
        "relu_nested-1.0.2+torch213cpucxx11-cp39-abi3-manylinux_2_28_x86_64.whl",
    ]
    local = env / "local"
    assert main(["to-wheel", str(fixtures / "relu-nested"), "1", "--repo-id", "kernels-community/relu-nested",
                 "-o", str(local)]) == EXIT_OK
    name = wheels[-1]
    assert entries(env / "store" / "files" / name) == entries(local / name)
    assert "_relu_nested_kernel/metadata.json" in entries(local / name)  # the nested build's variant root


def test_model_type_repo_branch_version(env: Path) -> None:
    out = env / "wheels"
    assert main(["to-wheel", "kernels-community/pyonly", "0.2.0", "-o", str(out)]) == EXIT_OK
    assert [p.name for p in out.glob("*.whl")] == ["pyonly-0.2.0-py3-none-any.whl"]


def test_tampered_file_refused(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = env / "wheels"
    code = main(["to-wheel", "kernels-community/tampered", "1.1.2", "-o", str(out), "--variants", VARIANT])
    captured = capsys.readouterr()
    assert code == EXIT_REFUSED, captured.err
    errors = [line for line in captured.err.splitlines() if line.startswith("error: ")]
    assert errors == [f"error: kernels-community/tampered@v1.1.2: build/{VARIANT}: file '_ops.py' does not match "
                      "its metadata.json digest (sha256)"], captured.err
    assert not list(out.glob("*.whl"))


def test_unknown_version_lists_what_exists(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["to-wheel", "kernels-community/img2grey", "9.9.9", "-o", str(env / "w")])
    err = capsys.readouterr().err
    assert code == EXIT_USAGE
    assert "9.9.9" in err and "1.1.2" in err and "1.1.0" in err


def test_org_not_allowed(env: Path, served: Proxy, capsys: pytest.CaptureFixture[str]) -> None:
    served.reset()
    code = main(["to-wheel", "someone-else/img2grey", "1.1.2", "-o", str(env / "w")])
    err = capsys.readouterr().err
    assert code == EXIT_USAGE
    assert "someone-else" in err and "--allow-org" in err
    assert served.requests == []  # refused before asking the Hub


def test_lock_file_build(fixtures: Path, env: Path, served: Proxy) -> None:
    sha = git(fixtures / "img2grey", "rev-parse", "v1.1.0^{commit}")
    git(fixtures / "img2grey", "worktree", "add", "-q", "--detach", str(env / "wt"), sha)
    expected = lock_hash(env / "wt" / "build" / VARIANT)
    git(fixtures / "img2grey", "worktree", "remove", "--force", str(env / "wt"))
    lock = env / "kernels.lock"
    lock.write_text(json.dumps([{"repo_id": "kernels-community/img2grey", "sha": sha,
                                 "variants": {VARIANT: {"hash": expected, "hash_type": "git_lfs_concat"}}}]))
    (env / "factory.toml").write_text('[factory]\nstore = "store"\n')
    args = ["build", "--config", str(env / "factory.toml"), "--lock", str(lock), "--jobs", "2"]
    assert main(args) == EXIT_OK
    wheels = sorted(p.name for p in (env / "store").rglob("*.whl"))
    assert wheels == ["img2grey-1.1.0+torch213cpucxx11-cp39-abi3-manylinux_2_28_x86_64.whl"]
    served.reset()
    assert main(args) == EXIT_OK  # a rerun: nothing new, nothing downloaded
    assert not [r for r in served.requests if "/resolve/" in r]
    assert os.environ["HF_ENDPOINT"] == served.url


def test_lock_hash_mismatch_refuses_the_variant(fixtures: Path, env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sha = git(fixtures / "img2grey", "rev-parse", "v1.1.0^{commit}")
    lock = env / "kernels.lock"
    wrong = "sha256-" + "0" * 64
    lock.write_text(json.dumps([{"repo_id": "kernels-community/img2grey", "sha": sha,
                                 "variants": {VARIANT: {"hash": wrong, "hash_type": "git_lfs_concat"}}}]))
    (env / "factory.toml").write_text('[factory]\nstore = "store"\n')
    assert main(["build", "--config", str(env / "factory.toml"), "--lock", str(lock)]) == EXIT_REFUSED
    err = capsys.readouterr().err
    assert "kernels.lock hash" in err and VARIANT in err
    assert not list((env / "store").rglob("*.whl"))


def test_lock_at_a_branch_head_gets_the_branch_version(fixtures: Path, env: Path) -> None:
    """kernels.lock pins a commit; with no release tag there, the v<N> branch at it gives N.0.K."""
    sha = git(fixtures / "relu-nested", "rev-parse", "v1^{commit}")
    lock = env / "kernels.lock"
    lock.write_text(json.dumps([{"repo_id": "kernels-community/relu-nested", "sha": sha, "variants": {}}]))
    (env / "factory.toml").write_text('[factory]\nstore = "store"\n')
    assert main(["build", "--config", str(env / "factory.toml"), "--lock", str(lock)]) == EXIT_OK
    wheels = sorted(p.name for p in (env / "store" / "files").glob("*.whl"))
    assert wheels == ["relu_nested-1.0.2+torch213cpucxx11-cp39-abi3-manylinux_2_28_x86_64.whl"]
