"""The variant grammar the factory owns and the local labels of its names (variants.py).

kernels' own parsers judge the same names in tests/integration/test_variant_grammar.py.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kernel_factory.errors import EXIT_REFUSED, UnknownVariant
from kernel_factory.variants import for_label, is_label, parse, parse_label, parse_name
from variant_corpus import LEGACY, NEW, NOARCH, REFUSED, SDK

NEW_TABLE = [
    # variant, label, wheel tag, backend, framework, requires
    ("torch-2.13-cxx11-cpu-cpython-3.9-abi3-x86_64-linux", "torch213cpucxx11cp39", "cp39-abi3-linux_x86_64", "cpu",
     "torch", ("torch>=2.13,<2.14",)),
    ("torch-2.13-cuda-13.0-cpython-3.12-abi3-aarch64-linux", "torch213cu130cp312", "cp312-abi3-linux_aarch64", "cuda",
     "torch", ("torch>=2.13,<2.14",)),
    ("torch-2.13-metal-cpython-3.9-abi3-aarch64-darwin", "torch213metalcp39", "cp39-abi3-macosx_11_0_arm64", "metal",
     "torch", ("torch>=2.13,<2.14",)),
    ("torch-2.13-rocm-7.14-cpython-3.15-abi3t-x86_64-linux", "torch213rocm714cp315t", "cp315-abi3t-linux_x86_64",
     "rocm", "torch", ("torch>=2.13,<2.14",)),
    ("torch-2.13-cuda-12.10-cpython-3.9-abi3-x86_64-linux", "torch213cu12p10cp39", "cp39-abi3-linux_x86_64", "cuda",
     "torch", ("torch>=2.13,<2.14",)),
    ("torch-10.0-cpu-cpython-3.9-abi3-x86_64-windows", "torch10p0cpucp39", "cp39-abi3-win_amd64", "cpu", "torch",
     ("torch>=10.0,<10.1",)),
    ("torch-stable-abi-2.11-cuda-12.8-cpython-3.10-abi3-x86_64-linux", "torchabi211cu128cp310",
     "cp310-abi3-linux_x86_64", "cuda", "torch-stable-abi", ("torch>=2.11",)),
    ("tvm-ffi-0.1-xpu-2025.1-cpython-3.9-abi3-x86_64-linux", "tvmffi01xpu20251cp39", "cp39-abi3-linux_x86_64", "xpu",
     "tvm-ffi", ("apache-tvm-ffi>=0.1,<0.2",)),
    ("mlx-metal", "mlxmetal", "py3-none-any", "metal", "mlx-noarch", ("mlx",)),
    ("mlx-universal", "mlx", "py3-none-any", "universal", "mlx-noarch", ("mlx",)),
    ("sdk", "sdk", "py3-none-any", "agnostic", "sdk", ()),
    ("sdk-cuda", "sdkcuda", "py3-none-any", "cuda", "sdk", ()),
    ("sdk-cpython-3.12-abi3-x86_64-linux", "sdkcp312", "cp312-abi3-linux_x86_64", "agnostic", "sdk", ()),
    ("sdk-cuda-12.8-cpython-3.12-abi3-x86_64-linux", "sdkcu128cp312", "cp312-abi3-linux_x86_64", "cuda", "sdk", ()),
]


@pytest.mark.parametrize(("name", "label", "tag", "backend", "framework", "requires"), NEW_TABLE)
def test_new_names(name: str, label: str, tag: str, backend: str, framework: str, requires: tuple[str, ...]) -> None:
    t = parse(name)
    assert (t.variant, t.label, t.tag, t.backend, t.framework, t.requires) == (
        name, label, tag, backend, framework, requires)
    assert for_label(label, [t.platform]) == t and is_label(label)


def test_a_legacy_name_and_its_new_spelling_are_two_labels() -> None:
    """kernels 0.19 holds the two names for one build; their wheels must still not share a file name."""
    old = parse("torch213-cxx11-cpu-x86_64-linux")
    new = parse("torch-2.13-cxx11-cpu-cpython-3.9-abi3-x86_64-linux")
    assert (old.label, new.label) == ("torch213cpucxx11", "torch213cpucxx11cp39")
    assert old.tag == new.tag and old.requires == new.requires


@pytest.mark.parametrize("name", LEGACY + NEW + NOARCH + SDK)
def test_every_form_reads_back_as_itself(name: str) -> None:
    assert parse_name(name).text == name
    t = parse(name)
    assert t.variant == name
    if t.label is not None:
        assert for_label(t.label, [t.platform]) == t


def test_labels_are_unique_per_platform() -> None:
    seen: dict[tuple[str | None, str], str] = {}
    for name in LEGACY + NEW + NOARCH + SDK:
        t = parse(name)
        key = (t.label, t.platform)
        assert key not in seen, f"{name} and {seen[key]} share label {t.label} on {t.platform}"
        seen[key] = name


@pytest.mark.parametrize("name", REFUSED)
def test_refused_with_one_line(name: str) -> None:
    with pytest.raises(UnknownVariant) as info:
        parse(name)
    message = str(info.value)
    assert info.value.exit_code == EXIT_REFUSED and "\n" not in message
    assert message.startswith(f"unknown build variant {name!r}: ")
    assert message.endswith("; rename the folder or leave it out with `variants = [...]`")


@pytest.mark.parametrize(("name", "why"), [
    ("torch-2.13-cpu-x86_64-linux", "missing the Python part (cpython-X.Y-abi3)"),
    ("torch-2.13-cpu-cpython-3.9-abi3t-x86_64-linux", "abi3t needs Python 3.15 or later, not 3.9"),
    ("torch-2.013-cpu-cpython-3.9-abi3-x86_64-linux",
     "it reads back as 'torch-2.13-cpu-cpython-3.9-abi3-x86_64-linux'"),
    ("torch-2.13-cu128-cpython-3.9-abi3-x86_64-linux", "unknown backend 'cu128'"),
    ("sdk-cuda-metal", "an SDK name without compiled parts is sdk or sdk-<backend>"),
    ("sdk-bogus", "noarch backend 'bogus' is not one of"),
    ("mlx-bogus", "noarch backend 'bogus' is not one of"),
    ("torch-2.13-cpu-cpython-3.9-abi3-riscv64-linux", "platform riscv64-linux is not one of"),
])
def test_refusals_say_why(name: str, why: str) -> None:
    with pytest.raises(UnknownVariant) as info:
        parse(name)
    assert why in str(info.value)


def test_parse_label_of_new_labels() -> None:
    parts = parse_label("torch213cu130cxx11cp39")
    assert parts is not None
    assert (parts.framework, parts.torch, parts.backend, parts.backend_name, parts.abi, parts.python) == (
        "torch", "2.13", "cu130", "cuda", "cxx11", "cp39")
    old = parse_label("torch213cu130cxx11")
    assert old is not None and old.python is None and old.backend_name == "cuda"
    assert parse_label("sdkcu128cp312") is None and parse_label("mlxmetal") is None


NUMBERS = st.tuples(st.integers(0, 30), st.integers(0, 30))


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["torch", "torch-stable-abi", "tvm-ffi"]), NUMBERS,
       st.sampled_from(["", "-cxx11", "-cxx98"]),
       st.one_of(st.sampled_from(["cpu", "metal", "neuron", "tpu"]),
                 st.tuples(st.sampled_from(["cuda", "rocm", "xpu", "cann"]), NUMBERS).map(
                     lambda b: f"{b[0]}-{b[1][0]}.{b[1][1]}")),
       st.tuples(st.integers(3, 12), st.integers(0, 30)), st.booleans(),
       st.sampled_from(["x86_64-linux", "aarch64-linux", "aarch64-darwin", "x86_64-windows"]))
def test_new_labels_read_back(fw: str, fwv: tuple[int, int], cxx: str, backend: str, py: tuple[int, int],
                              free: bool, system: str) -> None:
    """Any version numbers (torch 10.0, CUDA 12.10, Python 3.15 abi3t): the label gives the one name back."""
    if fw != "torch":
        cxx = ""
    abi = "abi3t" if free and py >= (3, 15) else "abi3"
    name = f"{fw}-{fwv[0]}.{fwv[1]}{cxx}-{backend}-cpython-{py[0]}.{py[1]}-{abi}-{system}"
    t = parse(name)
    assert t.label is not None and t.label.isalnum() and t.label == t.label.lower()
    assert for_label(t.label, [t.platform]) == t
