import pytest
from kernel_factory.errors import EXIT_REFUSED, UnknownVariant
from kernel_factory.variants import parse

TABLE = [
    # variant, label, tag, requires
    ("torch27-cxx11-cu128-x86_64-linux", "torch27cu128cxx11", "cp39-abi3-linux_x86_64", ("torch>=2.7,<2.8",)),
    ("torch29-cu130-aarch64-linux", "torch29cu130", "cp39-abi3-linux_aarch64", ("torch>=2.9,<2.10",)),
    ("torch210-cxx11-rocm70-x86_64-linux", "torch210rocm70cxx11", "cp39-abi3-linux_x86_64", ("torch>=2.10,<2.11",)),
    ("torch212-cxx11-cpu-x86_64-linux", "torch212cpucxx11", "cp39-abi3-linux_x86_64", ("torch>=2.12,<2.13",)),
    ("torch29-cxx11-xpu20252-x86_64-linux", "torch29xpu20252cxx11", "cp39-abi3-linux_x86_64", ("torch>=2.9,<2.10",)),
    ("torch212-metal-aarch64-darwin", "torch212metal", "cp39-abi3-macosx_11_0_arm64", ("torch>=2.12,<2.13",)),
    ("torch210-cu128-x86_64-windows", "torch210cu128", "cp39-abi3-win_amd64", ("torch>=2.10,<2.11",)),
    ("torch-stable-abi211-cu128-x86_64-linux", "torchabi211cu128", "cp39-abi3-linux_x86_64", ("torch>=2.11",)),
    ("tvm-ffi01-cu128-x86_64-linux", "tvmffi01cu128", "cp39-abi3-linux_x86_64", ("apache-tvm-ffi>=0.1,<0.2",)),
    ("torch-cuda", "cuda", "py3-none-any", ("torch",)),
    ("torch-universal", None, "py3-none-any", ("torch",)),
    ("torch26-cxx98-cu118-x86_64-linux", "torch26cu118cxx98", "cp39-abi3-linux_x86_64", ("torch>=2.6,<2.7",)),
    # What kernel-builder builds today (FACTS.md): torch 2.12 / 2.13, 13 variants each.
    ("torch213-cxx11-cpu-aarch64-linux", "torch213cpucxx11", "cp39-abi3-linux_aarch64", ("torch>=2.13,<2.14",)),
    ("torch213-cxx11-cu126-x86_64-linux", "torch213cu126cxx11", "cp39-abi3-linux_x86_64", ("torch>=2.13,<2.14",)),
    ("torch213-cxx11-cu132-aarch64-linux", "torch213cu132cxx11", "cp39-abi3-linux_aarch64", ("torch>=2.13,<2.14",)),
    ("torch213-cxx11-rocm71-x86_64-linux", "torch213rocm71cxx11", "cp39-abi3-linux_x86_64", ("torch>=2.13,<2.14",)),
    ("torch213-cxx11-rocm72-x86_64-linux", "torch213rocm72cxx11", "cp39-abi3-linux_x86_64", ("torch>=2.13,<2.14",)),
    ("torch213-metal-aarch64-darwin", "torch213metal", "cp39-abi3-macosx_11_0_arm64", ("torch>=2.13,<2.14",)),
    ("torch213-cpu-aarch64-darwin", "torch213cpu", "cp39-abi3-macosx_11_0_arm64", ("torch>=2.13,<2.14",)),
    ("torch29-cxx11-cann81-aarch64-linux", "torch29cann81cxx11", "cp39-abi3-linux_aarch64", ("torch>=2.9,<2.10",)),
    ("torch212-cxx11-neuron-x86_64-linux", "torch212neuroncxx11", "cp39-abi3-linux_x86_64", ("torch>=2.12,<2.13",)),
    ("torch212-cxx11-tpu-x86_64-linux", "torch212tpucxx11", "cp39-abi3-linux_x86_64", ("torch>=2.12,<2.13",)),
    ("torch-rocm", "rocm", "py3-none-any", ("torch",)),
    ("torch-xpu", "xpu", "py3-none-any", ("torch",)),
    ("torch-cpu", "cpu", "py3-none-any", ("torch",)),
]


@pytest.mark.parametrize(("name", "label", "tag", "requires"), TABLE)
def test_variant_table(name: str, label: str | None, tag: str, requires: tuple[str, ...]) -> None:
    target = parse(name)
    assert target.label == label
    assert target.tag == tag
    assert target.requires == requires
    assert target.variant == name


def test_torch_210_and_later_is_not_21() -> None:
    for minor in (10, 11, 12, 13):
        (req,) = parse(f"torch2{minor}-cxx11-cu128-x86_64-linux").requires
        assert req == f"torch>=2.{minor},<2.{minor + 1}"


def test_local_version() -> None:
    assert parse("torch27-cxx11-cu128-x86_64-linux").local_version("1.1.2") == "1.1.2+torch27cu128cxx11"
    assert parse("torch-universal").local_version("1.1.2") == "1.1.2"


def test_backend_fields() -> None:
    t = parse("torch27-cxx11-cu128-x86_64-linux")
    fields = (t.backend, t.backend_version, t.os, t.arch, t.framework_version)
    assert fields == ("cuda", "12.8", "linux", "x86_64", "2.7")
    assert parse("torch-universal").noarch


@pytest.mark.parametrize(
    "name",
    [
        "foo",
        "torch27-cxx11-cu128-x86_64-foo",
        "torch27-cxx11-cu128-riscv64-linux",
        "torch-bogus",
        "torch27-cxx11-cu128-x86_64-linux-extra",
        "<script>alert(1)</script>",
        "torch27-cxx11-cuda-x86_64-linux",
        "",
        "../../etc",
    ],
)
def test_unknown_variants_are_refused(name: str) -> None:
    with pytest.raises(UnknownVariant) as info:
        parse(name)
    assert info.value.exit_code == EXIT_REFUSED
    assert "\n" not in str(info.value)
