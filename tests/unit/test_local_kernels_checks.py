"""local-kernels --check's compatibility reasons (local/local_kernels/checks.py), one case per rule, each with its exact
line: torch's version, the stable ABI's floor, the C++ ABI, tvm-ffi's version, and the environment read without
importing torch."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from kernel_factory.errors import UsageError
from kernel_factory.local.local_kernels import checks
from kernel_factory.local.local_kernels.checks import check_kernel, detect_environment
from kernel_factory.local.local_kernels.installed import InstalledKernel
from kernel_factory.local.probe.environment import Environment

pytestmark = pytest.mark.filterwarnings("ignore:Failed to initialize NumPy:UserWarning")


def kernel(variant: str) -> InstalledKernel:
    return InstalledKernel(dist="act", version="1.0.0+x", key="org/act", repo_id="org/act", name="act",
                           variant=variant, folder=Path("/nonexistent/act"), metadata={"version": 1})


def env(**kw: object) -> Environment:
    base: dict[str, object] = {"os": "linux", "arch": "x86_64", "torch": "2.13.0", "cxx11_abi": True}
    return Environment(**{**base, **kw})  # type: ignore[arg-type]


FIX = "pip install --force-reinstall 'act==1.0.0' from the variants/torch213cpucxx11/simple index"


@pytest.mark.parametrize(("variant", "environment", "reasons"), [
    ("torch213-cxx11-cpu-x86_64-linux", env(), []),
    ("torch212-cxx11-cpu-x86_64-linux", env(),
     [f"built for torch 2.12 but torch 2.13.0 is installed: {FIX}"]),
    ("torch213-cxx11-cpu-x86_64-linux", env(torch=None, cxx11_abi=None),
     ["built for torch 2.13 but torch is not installed: pip install 'torch==2.13.*'"]),
    ("torch213-cxx11-cpu-x86_64-linux", env(torch_error="ImportError: libc10.so"),
     ["torch 2.13.0 is installed but does not import (ImportError: libc10.so): repair torch"]),
    ("torch213-cxx98-cpu-x86_64-linux", env(),
     [f"built for the cxx98 C++ ABI but the installed torch uses the cxx11 ABI: {FIX}"]),
    ("torch213-cxx11-cpu-x86_64-linux", env(cxx11_abi=False),
     ["built for the cxx11 C++ ABI but the installed torch uses the pre-cxx11 (cxx98) ABI: pip install "
      "--force-reinstall 'act==1.0.0' from the variants/torch213cpucxx98/simple index"]),
    ("torch-stable-abi211-cpu-x86_64-linux", env(), []),  # a newer torch loads a stable-ABI build
    ("torch-stable-abi211-cpu-x86_64-linux", env(torch="2.11.1"), []),
    ("torch-stable-abi211-cpu-x86_64-linux", env(torch="2.10.0"),
     ["built for torch >= 2.11 (stable ABI) but torch 2.10.0 is installed: pip install --force-reinstall "
      "'act==1.0.0' from the variants/torch210cpucxx11/simple index"]),
    ("tvm-ffi01-cpu-x86_64-linux", env(tvm_ffi="0.1.3"), []),
    ("tvm-ffi01-cpu-x86_64-linux", env(tvm_ffi=None),
     ["built for apache-tvm-ffi 0.1 but apache-tvm-ffi is not installed: pip install 'apache-tvm-ffi==0.1.*'"]),
    ("tvm-ffi01-cpu-x86_64-linux", env(tvm_ffi="0.2.0"),
     ["built for apache-tvm-ffi 0.1 but apache-tvm-ffi 0.2.0 is installed: pip install 'apache-tvm-ffi==0.1.*'"]),
    ("tvm-ffi01-cpu-x86_64-linux", env(tvm_ffi="0.0.9"),
     ["built for apache-tvm-ffi 0.1 but apache-tvm-ffi 0.0.9 is installed: pip install 'apache-tvm-ffi==0.1.*'"]),
])  # fmt: skip
def test_each_rule_gives_its_one_line(variant: str, environment: Environment, reasons: list[str]) -> None:
    assert check_kernel(kernel(variant), environment, set(), path=[]) == reasons


def test_the_environment_without_torch_installed_is_read_without_importing_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checks, "installed_version", lambda name, path: None)
    monkeypatch.setattr(checks, "collect", lambda: pytest.fail("torch imported"))
    found = detect_environment()
    assert found == Environment(os="linux", arch="x86_64", torch=None, tvm_ffi=None)


def test_the_environment_names_the_installed_distributions_version(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checks, "installed_version", lambda name, path: {"torch": "2.13.0"}.get(name))
    monkeypatch.setattr(checks, "collect", lambda: {"machine": "x86_64", "system": "linux",
                                                    "torch": {"version": "2.13.0a0", "cxx11_abi": True}})
    found = detect_environment()
    assert found == Environment(os="linux", arch="x86_64", torch="2.13.0", cxx11_abi=True, tvm_ffi=None)


def dist(site: Path, name: str, version: str) -> None:
    folder = site / f"{name}-{version}.dist-info"
    folder.mkdir(parents=True)
    (folder / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


def test_a_metal_build_needs_mps() -> None:
    metal = kernel("torch213-metal-aarch64-darwin")
    assert check_kernel(metal, env(os="darwin", arch="aarch64", mps=True, cxx11_abi=None), set(), path=[]) == []
    assert check_kernel(metal, env(os="darwin", arch="aarch64", cxx11_abi=None), set(), path=[]) == [
        "a Metal build but torch 2.13.0 cannot use Metal (MPS) here: pip install --force-reinstall 'act==1.0.0' "
        "from the variants/torch213cpu/simple index"]


def test_requirements_are_judged_by_their_specifier_prereleases_included(tmp_path: Path) -> None:
    dist(tmp_path, "numpy", "2.0.0rc1")
    dist(tmp_path, "einops", "0.8.0")
    k = replace(kernel("torch213-cxx11-cpu-x86_64-linux"),
                requires=("numpy>=1", "einops", "not a requirement!", "torch>=2.13", "sympy", "einops>=0.9"))
    assert check_kernel(k, env(), set(), path=[str(tmp_path)]) == [
        "needs sympy which is not installed: pip install 'sympy'",
        "needs einops>=0.9 but einops 0.8.0 is installed: pip install 'einops>=0.9'"]


@pytest.mark.parametrize(("python", "error", "line"), [
    ("/opt/env/bin/python", None, "/opt/env/bin/python has no torch (not installed)"),
    ("", "ImportError: libc10.so", "python has no torch (ImportError: libc10.so)"),
])  # fmt: skip
def test_an_environment_without_torch_names_its_interpreter(python: str, error: str | None, line: str) -> None:
    with pytest.raises(UsageError) as info:
        env(torch=None, cxx11_abi=None, python=python, torch_error=error).variant  # noqa: B018
    assert str(info.value) == line
