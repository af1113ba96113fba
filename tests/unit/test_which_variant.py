"""which: probe facts -> variant and label; labels -> parts; platform fit; nearest builds first."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from index_synth import add_kernel
from kernel_factory.errors import UnknownVariant, UsageError
from kernel_factory.index.command import index_with_adoption
from kernel_factory.local.probe.run import environment
from kernel_factory.local.which import candidates, commands, fits_platform, nearest
from kernel_factory.simple import Wheel
from kernel_factory.variants import LabelParts, parse_label
from packaging.utils import parse_wheel_filename


def facts(machine: str = "x86_64", system: str = "linux", **torch: Any) -> dict[str, Any]:
    t = {"version": "2.13.0", "cuda": None, "hip": None, "xpu": None, "tpu": False, "neuron": False, "mps": False,
         "cxx11_abi": True, "privateuse1": None, "cann": None, **torch}
    return {"python": "/py", "python_version": "3.11", "machine": machine, "system": system, "torch": t}


@pytest.mark.parametrize(("f", "variant", "label"), [
    (facts(), "torch213-cxx11-cpu-x86_64-linux", "torch213cpucxx11"),
    (facts(cuda="13.0", version="2.13.1+cu130"), "torch213-cxx11-cu130-x86_64-linux", "torch213cu130cxx11"),
    (facts("aarch64", cuda="12.6"), "torch213-cxx11-cu126-aarch64-linux", "torch213cu126cxx11"),
    (facts(hip="7.2.1-abc"), "torch213-cxx11-rocm72-x86_64-linux", "torch213rocm72cxx11"),
    (facts(xpu="20250101"), "torch213-cxx11-xpu20251-x86_64-linux", "torch213xpu20251cxx11"),
    (facts("arm64", "darwin", mps=True), "torch213-metal-aarch64-darwin", "torch213metal"),
    (facts("arm64", "darwin"), "torch213-cpu-aarch64-darwin", "torch213cpu"),
    (facts(version="2.12.0", cuda="12.6", cxx11_abi=False), "torch212-cxx98-cu126-x86_64-linux", "torch212cu126cxx98"),
    (facts(privateuse1="npu", cann="8.1"), "torch213-cxx11-cann81-x86_64-linux", "torch213cann81cxx11"),
])  # fmt: skip
def test_environment(f: dict[str, Any], variant: str, label: str) -> None:
    env = environment(f)
    assert (env.variant, env.label, env.root) == (variant, label, f"variants/{label}/simple/")


def test_no_torch_and_unknown_platform() -> None:
    with pytest.raises(UsageError, match="cannot import torch"):
        environment({"python": "/py", "machine": "x86_64", "system": "linux", "torch": None, "torch_error": "x"})
    with pytest.raises(UnknownVariant):
        environment(facts("ppc64le"))


def test_parse_label() -> None:
    assert parse_label("torch213cu130cxx11") == LabelParts("torch", "2.13", "cu130", "cuda", "cxx11")
    assert parse_label("torch213metal") == LabelParts("torch", "2.13", "metal", "metal", None)
    assert parse_label("torch29xpu20251cxx11") == LabelParts("torch", "2.9", "xpu20251", "xpu", "cxx11")
    assert parse_label("cuda") is None and parse_label(None) is None and parse_label("torch213foo") is None


def wheel(filename: str) -> Wheel:
    _, version, _, tags = parse_wheel_filename(filename)
    return Wheel(filename, filename, version, tags, False)


def test_fits_platform_and_nearest() -> None:
    env = environment(facts(cuda="13.0"))
    w = [wheel(f"k-1.0+{label}-cp39-abi3-{plat}.whl") for label, plat in (
        ("torch213cpucxx11", "manylinux_2_28_x86_64"), ("torch212cu130cxx11", "manylinux_2_28_x86_64"),
        ("torch213cu130cxx11", "manylinux_2_28_aarch64"), ("torch213cu126cxx11", "manylinux_2_28_x86_64"),
        ("torch29cu130cxx11", "manylinux_2_28_x86_64"), ("torch213metal", "macosx_11_0_arm64"))]
    assert [fits_platform(x, env) for x in w] == [True, True, False, True, True, False]
    order = [(b["label"], b["platform"]) for b in nearest(w, env)]
    assert order == [
        ("torch213cu130cxx11", "manylinux_2_28_aarch64"),  # this very label, another platform
        ("torch212cu130cxx11", "manylinux_2_28_x86_64"),
        ("torch29cu130cxx11", "manylinux_2_28_x86_64"),
        ("torch213cu126cxx11", "manylinux_2_28_x86_64"),
        ("torch213cpucxx11", "manylinux_2_28_x86_64"),
        ("torch213metal", "macosx_11_0_arm64"),
    ]


def test_choose_from_pep691_json_files(tmp_path: Path) -> None:
    store = tmp_path / "public"
    cu130 = "torch213-cxx11-cu130-x86_64-linux"
    for version, variant in (("1.0.0", cu130), ("1.1.0", cu130), ("1.2.0", "torch213-cxx11-cu130-aarch64-linux"),
                             ("1.3.0", "torch-universal")):
        add_kernel(store, "relu", version, variant)
    index_with_adoption(str(store), store, None, "http://127.0.0.1")
    env = environment(facts(cuda="13.0"))
    choice = candidates(store.as_uri(), "relu", env)[0][0]  # the first: the best
    assert choice is not None  # the universal 1.3.0 is in the variant root too, and newest
    assert (str(choice.wheel.version), choice.root) == ("1.3.0", f"{store.as_uri()}/variants/torch213cu130cxx11/simple")
    choice = candidates(store.as_uri(), "relu", environment(facts("aarch64", cuda="13.0", version="2.12.0")))[0][0]
    assert choice is not None and choice.root == f"{store.as_uri()}/simple"  # no torch212 root: universal
    pip, uv = commands("relu", choice, "/my env/python")
    assert pip == f"'/my env/python' -m pip install relu==1.3.0 --index-url {store.as_uri()}/simple"
    assert uv == f"uv pip install --python '/my env/python' relu==1.3.0 --index-url {store.as_uri()}/simple"
