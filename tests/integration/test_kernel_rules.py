"""The kernels library's own rules at build time, and macOS wheels tagged by the binaries they hold.

Repositories are made by the test (hostile.py); the CLI runs as a user runs it, in a subprocess.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import hostile as h
import macho_kit
import pytest
from support import kf, run

NAME_RULE = ("Name must: - Start with a lowercase letter (a-z) - Contain only lowercase letters, digits, and dashes "
             "- End with a lowercase letter or digit - Be at least 2 characters long")
FIX = "; fix metadata.json or rebuild the kernel with kernel-builder"


def errors(proc: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in proc.stderr.splitlines() if line.startswith("error: ")]


@pytest.fixture(scope="module")
def bad_names(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A kernel whose universal variant is fine and whose two others name the kernel as kernels forbids."""
    root = tmp_path_factory.mktemp("rules")
    return h.kernel(root, "scaleadd", "scaleadd", bad_meta={"torch-cpu": {"name": "scale_add"},
                                                           "torch-cuda": {"name": "Img2Grey_X"}})


def _assert_refused(proc: subprocess.CompletedProcess[str], where: str) -> None:
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    errs = errors(proc)
    assert len(errs) == 2, errs
    for variant, name in (("torch-cpu", "scale_add"), ("torch-cuda", "Img2Grey_X")):
        line = next(e for e in errs if f"build/{variant}:" in e)
        assert line.startswith(f"error: {where}: build/{variant}: kernels.get_kernel would refuse this metadata.json: "
                               f"Cannot parse metadata: Invalid kernel name `{name}`. {NAME_RULE} Examples: "), line
        assert line.endswith(FIX), line


def test_to_wheel_refuses_names_kernels_refuses(bad_names: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = kf("to-wheel", bad_names, "0.1.0", "-o", out)
    _assert_refused(proc, f"{bad_names}@v0.1.0")
    assert sorted(p.name for p in out.iterdir()) == [h.good_wheel("scaleadd")]


def test_build_refuses_names_kernels_refuses(bad_names: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    config = tmp_path / "factory.toml"
    config.write_text(f'[factory]\nstore = "{store}"\n\n[[kernel]]\nrepo = "{bad_names}"\ntags = ">=0"\n')
    proc = kf("build", "--config", config, "--jobs", "1", cwd=tmp_path)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    errs = errors(proc)
    assert len(errs) == 2 and all("Invalid kernel name `" in e and e.endswith(FIX) for e in errs), errs
    assert sorted(p.name for p in (store / "files").glob("*.whl")) == [h.good_wheel("scaleadd")]


# -- macOS ---------------------------------------------------------------------------------------------------
X86 = "torch210-cpu-x86_64-darwin"
ARM = "torch210-cpu-aarch64-darwin"
WRONG = "torch211-cpu-x86_64-darwin"


@pytest.fixture(scope="module")
def mac_wheels(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    root = tmp_path_factory.mktemp("mac")
    so = "_machk.abi3.so"
    repo = h.kernel(root, "machk", "machk", {
        X86: {so: macho_kit.thin("x86_64", (10, 15))},
        ARM: {so: macho_kit.fat(("x86_64", macho_kit.thin("x86_64", (10, 13))),
                                ("arm64", macho_kit.thin("arm64", (12, 0))))},
        WRONG: {so: macho_kit.thin("arm64", (11, 0))},  # an arm64 binary in an x86_64 variant
    })
    out = root / "out"
    return kf("to-wheel", repo, "0.1.0", "-o", out), out


def test_macos_wheels_tagged_by_their_binaries(mac_wheels: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    proc, out = mac_wheels
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert errors(proc) == [
        f"error: {out.parent / 'machk'}@v0.1.0: build/{WRONG}/_machk.abi3.so is built for aarch64, not x86_64 as "
        "the variant name says; rebuild it for x86_64, or publish it under a darwin variant of its own arch"
    ]
    assert sorted(p.name for p in out.glob("*.whl")) == [
        "machk-0.1.0+torch210cpu-cp39-abi3-macosx_10_15_x86_64.whl",
        "machk-0.1.0+torch210cpu-cp39-abi3-macosx_12_0_arm64.whl",
        h.good_wheel("machk"),
    ]


@pytest.mark.parametrize(("platform", "chosen"), [
    ("macosx_10_15_x86_64", "macosx_10_15_x86_64"),
    ("macosx_14_0_arm64", "macosx_12_0_arm64"),
])
def test_pip_picks_the_wheel_for_each_mac(mac_wheels: tuple[subprocess.CompletedProcess[str], Path], tmp_path: Path,
                                          platform: str, chosen: str) -> None:
    """pip, asked for a Mac of that kind, takes the wheel of its architecture (not the universal one)."""
    _, out = mac_wheels
    run(sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-index", "--find-links", out,
        "--only-binary=:all:", "--platform", platform, "--python-version", "3.11", "-d", tmp_path / "dl",
        "machk==0.1.0+torch210cpu")
    assert [p.name for p in (tmp_path / "dl").iterdir()] == [f"machk-0.1.0+torch210cpu-cp39-abi3-{chosen}.whl"]
