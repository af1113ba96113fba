"""`kernel-factory to-wheel` end to end on the bundled example kernels (real git repositories, real binaries)."""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

import pytest
from packaging.utils import parse_wheel_filename
from support import clean_env, fresh_venv, kf, run

X86 = "img2grey-1.1.2+torch213cpucxx11-cp39-abi3-manylinux_2_28_x86_64.whl"
ARM = "img2grey-1.1.2+torch213cpucxx11-cp39-abi3-manylinux_2_28_aarch64.whl"
CUDA = "img2grey-1.1.2+torch213cu130cxx11-cp39-abi3-manylinux_2_28_x86_64.whl"


def wheels(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.suffix == ".whl")


def visible(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


@pytest.fixture(scope="module")
def img2grey_wheels(example_repos: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheels")
    proc = kf("to-wheel", example_repos / "img2grey", "1.1.2", "-o", out)
    assert proc.returncode == 0, proc.stderr
    return out


def test_one_wheel_per_variant_with_audited_tags(img2grey_wheels: Path) -> None:
    assert wheels(img2grey_wheels) == sorted([ARM, X86, CUDA])
    assert visible(img2grey_wheels) == wheels(img2grey_wheels)  # no temporary files left behind
    name, version, _, tags = parse_wheel_filename(X86)
    assert (str(name), str(version)) == ("img2grey", "1.1.2+torch213cpucxx11")
    with zipfile.ZipFile(img2grey_wheels / X86) as zf:
        names = zf.namelist()
        meta = zf.read("img2grey-1.1.2+torch213cpucxx11.dist-info/METADATA").decode()
        prov = json.loads(zf.read("img2grey-1.1.2+torch213cpucxx11.dist-info/kernel_factory.json"))
    assert "img2grey/metadata.json" in names and "img2grey/__init__.py" in names
    assert "img2grey/img2grey/__init__.py" in names  # the compat folder: the variant travels byte for byte
    assert prov["variant-root"] == "img2grey" and prov["layout"] == "flat"
    assert "Version: 1.1.2+torch213cpucxx11" in meta
    assert "Requires-Dist: torch>=2.13,<2.14\n" in meta and "Requires-Python: >=3.9\n" in meta
    assert "License-Expression: Apache-2.0\n" in meta
    summary = meta.split("Summary: ")[1].split("\n")[0]
    assert summary and summary != "img2grey compute kernel"  # the README's first sentence
    assert prov["variant"] == "torch213-cxx11-cpu-x86_64-linux" and prov["ref"] == "v1.1.2"
    assert len(prov["revision"]) == 40


def test_same_input_same_bytes(example_repos: Path, img2grey_wheels: Path, tmp_path: Path) -> None:
    assert kf("to-wheel", example_repos / "img2grey", "1.1.2", "-o", tmp_path).returncode == 0
    for name in wheels(img2grey_wheels):
        assert (tmp_path / name).read_bytes() == (img2grey_wheels / name).read_bytes(), name


def test_pip_installs_and_torch_runs_the_op(img2grey_wheels: Path, tmp_path: Path) -> None:
    python = fresh_venv(tmp_path / "venv", torch=True)
    env = clean_env()
    proc = run(python, "-m", "pip", "install", "--no-index", img2grey_wheels / X86, env=env)
    assert "Successfully installed img2grey-1.1.2+torch213cpucxx11" in proc.stdout
    check = (
        "import torch, img2grey\n"
        "x = torch.rand(8, 5, 3)\n"
        "ref = x @ torch.tensor([0.299, 0.587, 0.114])\n"
        "out = img2grey.img2grey(x)\n"
        "assert out.shape == (8, 5), out.shape\n"
        "print('maxerr', float((out - ref).abs().max()))\n"
        "assert torch.allclose(out, ref, atol=1e-5)\n"
    )
    out = run(python, "-c", check, env=env, cwd=tmp_path).stdout
    assert "maxerr" in out


def test_branch_version_counts_commits(example_repos: Path, tmp_path: Path) -> None:
    proc = kf("to-wheel", example_repos / "relu-nested", "1", "-o", tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert wheels(tmp_path) == ["relu_nested-1.0.2+torch213cpucxx11-cp39-abi3-manylinux_2_28_x86_64.whl"]


def test_specifier_selects_every_matching_tag(example_repos: Path, tmp_path: Path) -> None:
    proc = kf("to-wheel", example_repos / "img2grey", ">=1.1.0,<2", "--variants", "*-x86_64-linux",
              "-o", tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert [parse_wheel_filename(w)[1].public for w in wheels(tmp_path)] == ["1.1.0", "1.1.0", "1.1.2", "1.1.2"]


def test_revision_with_version(example_repos: Path, tmp_path: Path) -> None:
    proc = kf("to-wheel", example_repos / "relu-nested", "1", "--revision", "v1", "-o", tmp_path / "a")
    assert proc.returncode == 0, proc.stderr
    assert wheels(tmp_path / "a") == ["relu_nested-1.0.2+torch213cpucxx11-cp39-abi3-manylinux_2_28_x86_64.whl"]
    # a tagged revision keeps its tag's version (one revision, one version)
    proc = kf("to-wheel", example_repos / "img2grey", "1", "--revision", "v1.1.0", "--variants",
              "torch213-cxx11-cpu-x86_64-linux", "-o", tmp_path / "b")
    assert proc.returncode == 0, proc.stderr
    assert wheels(tmp_path / "b") == ["img2grey-1.1.0+torch213cpucxx11-cp39-abi3-manylinux_2_28_x86_64.whl"]


def test_noarch_kernel(example_repos: Path, tmp_path: Path) -> None:
    proc = kf("to-wheel", example_repos / "pyonly", "0.2.0", "-o", tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert wheels(tmp_path) == ["pyonly-0.2.0-py3-none-any.whl"]


def test_glibc_2_32_kernel_is_refused(example_repos: Path, tmp_path: Path) -> None:
    proc = kf("to-wheel", example_repos / "glibc-new", "0.1.0", "-o", tmp_path)
    assert proc.returncode == 3
    assert "GLIBC_2.32" in proc.stderr and "manylinux_2_34" in proc.stderr and "--accept-higher-policy" in proc.stderr
    assert visible(tmp_path) == []
    proc = kf("to-wheel", example_repos / "glibc-new", "0.1.0", "--accept-higher-policy", "-o", tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert wheels(tmp_path) == ["glibc_new-0.1.0+torch213cpucxx11-cp39-abi3-manylinux_2_34_x86_64.whl"]


def test_non_abi3_symbol_is_refused(example_repos: Path, tmp_path: Path) -> None:
    proc = kf("to-wheel", example_repos / "not-abi3", "0.1.0", "-o", tmp_path)
    assert proc.returncode == 3
    assert "abi3" in proc.stderr and "PyUnicode_AsUTF8" in proc.stderr
    assert visible(tmp_path) == []


def _broken_copy(example_repos: Path, tmp_path: Path) -> Path:
    """img2grey 1.1.2 as a git repository, with one variant broken in each of several ways."""
    repo = tmp_path / "broken"
    run("git", "clone", "-q", example_repos / "img2grey", repo)
    build = repo / "build"
    # missing __init__.py
    (build / "torch213-cxx11-cpu-aarch64-linux" / "__init__.py").unlink()
    # broken metadata.json
    (build / "torch213-cxx11-cu130-x86_64-linux" / "metadata.json").write_text("{ not json")
    # unknown variant name
    shutil.copytree(build / "torch213-cxx11-cpu-x86_64-linux", build / "torch213-cxx11-cpu-riscv64-linux")
    run("git", "-C", repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "break", "--no-verify")
    run("git", "-C", repo, "add", "-A")
    run("git", "-C", repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "add", "--no-verify")
    run("git", "-C", repo, "tag", "v1.2.0")
    return repo


def test_bad_variants_each_one_line_others_built(example_repos: Path, tmp_path: Path) -> None:
    repo = _broken_copy(example_repos, tmp_path)
    out = tmp_path / "out"
    proc = kf("to-wheel", repo, "1.2.0", "-o", out)
    assert proc.returncode == 3, proc.stderr
    assert wheels(out) == ["img2grey-1.2.0+torch213cpucxx11-cp39-abi3-manylinux_2_28_x86_64.whl"]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    text = "\n".join(errors)
    assert "torch213-cxx11-cpu-riscv64-linux" in text and "unknown build variant" in text
    assert "__init__.py" in text
    assert "metadata.json" in text
    assert len(errors) == 3, errors
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (["{repos}/img2grey", "9.9.9"], 2, "no tag v9.9.9; tags: v1.1.0, v1.1.2; branches: v1"),
        (["{repos}/img2grey", "7"], 2, "no branch v7"),
        (["{repos}/img2grey", "seven"], 2, "is not a version"),
        (["{tmp}", "1.0.0"], 2, "not a kernel repository"),
        (["{tmp}/nope", "1.0.0"], 2, "not a folder"),
        (["evil-org/kernel", "1"], 2, "organisation 'evil-org' is not allowed"),
    ],
)
def test_bad_input_one_clear_line(example_repos: Path, tmp_path: Path, args: list[str], code: int,
                                  needle: str) -> None:
    out = tmp_path / "out"
    argv = [a.format(repos=example_repos, tmp=tmp_path) for a in args]
    proc = kf("to-wheel", *argv, "-o", out)
    assert proc.returncode == code, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines[-1].startswith("error: ") and needle in lines[-1], proc.stderr
    assert len(lines) == 1, proc.stderr
    assert not out.exists() or visible(out) == []
