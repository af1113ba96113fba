"""kernels' python-depends table as the factory ships it (verify/pydepends.py)."""

from __future__ import annotations

import hashlib
from importlib import metadata, resources

import pytest
from kernel_factory.verify import pydepends


def test_the_copy_is_the_one_named() -> None:
    data = resources.files("kernel_factory.verify").joinpath("python_depends.json").read_bytes()
    assert hashlib.sha256(data).hexdigest() == pydepends.SHA256


def test_the_installed_kernels_has_the_same_table() -> None:
    """kernels 0.17.2, 0.18.3 and 0.19.1 ship these bytes (the first two at kernels/, 0.19 under _internals/)."""
    version = metadata.version("kernels")
    if version not in ("0.17.2", "0.18.3", "0.19.1"):
        pytest.fail(f"kernels {version}: compare its python_depends.json with the copy and update verify/pydepends.py")
    base = resources.files("kernels")
    places = (base.joinpath("python_depends.json"), base.joinpath("_internals").joinpath("python_depends.json"))
    found = [p for p in places if p.is_file()]
    assert [hashlib.sha256(p.read_bytes()).hexdigest() for p in found] == [pydepends.SHA256]


def test_names_to_packages() -> None:
    assert pydepends.packages(["tvm-ffi", "einops"], "cpu") == ["apache-tvm-ffi", "einops"]
    assert pydepends.packages(["nvidia-cutlass-dsl"], "cuda") == ["nvidia-cutlass-dsl"]
    assert pydepends.packages(["onednn"], "xpu") == ["onednn-devel"]
    assert pydepends.packages(["onednn"], "cuda") == ["onednn"]  # another backend's name: kept as it is
    assert pydepends.packages(["scipy>=1.10"], "agnostic") == ["scipy>=1.10"]
