"""Build-variant name -> target: local version label, wheel tags, requirements.

Names are parsed with ``kernels.variants.parse_variant`` (no second grammar);
this module only maps the parsed variant to what the wheel needs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from .errors import UnknownVariant

# Platforms and operating systems the kernels project builds for.
ARCHES = ("x86_64", "aarch64")
OSES = ("linux", "darwin", "windows")
# Noarch backends (torch-<backend>); torch-universal has no label.
NOARCH_BACKENDS = ("universal", "cuda", "rocm", "xpu", "cpu", "metal", "neuron", "tpu", "cann", "npu")

_BASE_PLATFORM = {
    ("linux", "x86_64"): "linux_x86_64",
    ("linux", "aarch64"): "linux_aarch64",
    ("darwin", "aarch64"): "macosx_11_0_arm64",
    ("darwin", "x86_64"): "macosx_11_0_x86_64",
    ("windows", "x86_64"): "win_amd64",
    ("windows", "aarch64"): "win_arm64",
}


@dataclass(frozen=True)
class Target:
    """What one build variant becomes as a wheel.

    ``platform`` is the base platform tag; for Linux the audit replaces it with
    the manylinux policy it certifies, for macOS with the binaries' minimum OS.
    """

    variant: str
    label: str | None  # local version label without '+', None for torch-universal
    python_tag: str  # "cp39" for arch variants, "py3" for noarch
    abi_tag: str  # "abi3" or "none"
    platform: str  # "linux_x86_64", "win_amd64", "macosx_11_0_arm64", "any"
    os: str | None  # linux, darwin, windows; None for noarch
    arch: str | None  # x86_64, aarch64; None for noarch
    backend: str  # cuda, rocm, xpu, cann, cpu, metal, neuron, tpu, universal
    backend_version: str | None  # "12.8" for cu128, None where unversioned
    framework: str  # "torch", "torch-stable-abi", "tvm-ffi", "torch-noarch"
    framework_version: str | None  # "2.7", None for noarch
    requires: tuple[str, ...]  # Requires-Dist entries from the variant itself

    @property
    def noarch(self) -> bool:
        return self.os is None

    @property
    def tag(self) -> str:
        return f"{self.python_tag}-{self.abi_tag}-{self.platform}"

    def local_version(self, version: str) -> str:
        return f"{version}+{self.label}" if self.label else version


def _upper_bound(version: str) -> str:
    major, minor = version.split(".")[:2]
    return f"{major}.{int(minor) + 1}"


@lru_cache(maxsize=4096)
def parse(name: str) -> Target:
    """Map a build-variant folder name to its target; UnknownVariant if not a kernels variant."""
    from kernels.variants import ArchVariant, Torch, TorchStableAbi, TvmFfi, parse_variant

    try:
        parsed = parse_variant(name)
    except Exception as exc:  # kernels raises ValueError, and others on odd input
        raise UnknownVariant(
            f"unknown build variant {name!r}: not a variant name the kernels project defines ({exc}); "
            "rename the folder or leave it out with `variants = [...]`"
        ) from None
    if parsed.variant_str != name:
        raise UnknownVariant(f"unknown build variant {name!r}: it does not round-trip as {parsed.variant_str!r}")

    if not isinstance(parsed, ArchVariant):
        backend = parsed.arch.backend_name
        if backend not in NOARCH_BACKENDS:
            raise UnknownVariant(
                f"unknown build variant {name!r}: noarch backend {backend!r} is not one of {', '.join(NOARCH_BACKENDS)}"
            )
        return Target(
            variant=name,
            label=None if backend == "universal" else backend,
            python_tag="py3",
            abi_tag="none",
            platform="any",
            os=None,
            arch=None,
            backend=backend,
            backend_version=None,
            framework="torch-noarch",
            framework_version=None,
            requires=("torch",),
        )

    arch = parsed.arch
    if arch.platform not in ARCHES or arch.os not in OSES or (arch.os, arch.platform) not in _BASE_PLATFORM:
        raise UnknownVariant(
            f"unknown build variant {name!r}: platform {arch.platform}-{arch.os} is not one of "
            + ", ".join(f"{a}-{o}" for o, a in _BASE_PLATFORM)
        )
    backend = arch.backend
    backend_str = backend.variant_str
    backend_version = str(backend.version) if hasattr(backend, "version") else None
    fw = parsed.framework
    fw_version = f"{fw.version.major}.{fw.version.minor}"
    if isinstance(fw, Torch):
        major_minor = f"{fw.version.major}{fw.version.minor}"
        abi = "" if fw.cxx11_abi is None else ("cxx11" if fw.cxx11_abi else "cxx98")
        label = f"torch{major_minor}{backend_str}{abi}"
        framework = "torch"
        requires: tuple[str, ...] = (f"torch>={fw_version},<{_upper_bound(fw_version)}",)
    elif isinstance(fw, TorchStableAbi):
        label = f"torchabi{fw.version.major}{fw.version.minor}{backend_str}"
        framework = "torch-stable-abi"
        requires = (f"torch>={fw_version}",)
    elif isinstance(fw, TvmFfi):
        label = f"tvmffi{fw.version.major}{fw.version.minor}{backend_str}"
        framework = "tvm-ffi"
        requires = (f"apache-tvm-ffi>={fw_version},<{_upper_bound(fw_version)}",)
    else:  # pragma: no cover - kernels grew a framework we do not know
        raise UnknownVariant(f"unknown build variant {name!r}: framework {type(fw).__name__} is not supported")
    return Target(
        variant=name,
        label=label,
        python_tag="cp39",
        abi_tag="abi3",
        platform=_BASE_PLATFORM[(arch.os, arch.platform)],
        os=arch.os,
        arch=arch.platform,
        backend=backend.name,
        backend_version=backend_version,
        framework=framework,
        framework_version=fw_version,
        requires=requires,
    )


_LABEL = re.compile(r"(?P<fw>torchabi|torch|tvmffi)(?P<major>[0-9])(?P<minor>[0-9]+)(?P<backend>[a-z]+?[0-9]*)"
                    r"(?P<abi>cxx11|cxx98)?")
_FW_PREFIX = {"torch": "torch", "torchabi": "torch-stable-abi", "tvmffi": "tvm-ffi"}


_MAC_ARCHES = {"arm64": ("aarch64",), "x86_64": ("x86_64",), "intel": ("x86_64",), "universal2": ("x86_64", "aarch64")}
_WIN_ARCHES = {"win_amd64": "x86_64", "win_arm64": "aarch64"}


def tag_platforms(tag: str) -> tuple[tuple[str, str], ...]:
    """The (arch, os) pairs a wheel platform tag runs on (``manylinux_2_28_x86_64`` -> x86_64, linux;
    ``macosx_11_0_universal2`` -> both Mac arches); empty for ``any`` and for platforms kernels do not build for.
    The one mapping of platform tags: the wheel's audit, adoption and ``which`` all use it."""
    if tag.startswith(("manylinux", "musllinux", "linux_")):
        return tuple((arch, "linux") for arch in ARCHES if tag.endswith("_" + arch))
    if tag.startswith("macosx_"):
        return tuple((arch, "darwin") for arch in _MAC_ARCHES.get(tag.rsplit("_", 1)[-1], ()))
    if tag in _WIN_ARCHES:
        return ((_WIN_ARCHES[tag], "windows"),)
    return ()


def _platforms(tags: Iterable[str]) -> list[tuple[str, str]]:
    """(arch, os) pairs named by wheel platform tags, in tag order, each once."""
    found: list[tuple[str, str]] = []
    for tag in tags:
        for pair in tag_platforms(tag):
            if pair not in found:
                found.append(pair)
    return found


@lru_cache(maxsize=4096)
def _for_label(label: str, platforms: tuple[str, ...]) -> Target | None:
    if platforms == ("any",):
        if label in NOARCH_BACKENDS and label != "universal":
            return parse(f"torch-{label}")
        return None
    m = _LABEL.fullmatch(label)
    if m is None:
        return None
    fw = _FW_PREFIX[m["fw"]] + m["major"] + m["minor"]
    if m["abi"]:
        if m["fw"] != "torch":
            return None
        fw += f"-{m['abi']}"
    for arch, os_ in _platforms(platforms):
        try:
            target = parse(f"{fw}-{m['backend']}-{arch}-{os_}")
        except UnknownVariant:
            continue
        if target.label == label:
            return target
    return None


def is_label(label: str) -> bool:
    """Whether ``label`` is shaped like a build variant's label (``torch27cu128cxx11``, ``torchabi29cpu``,
    ``tvmffi01cu128``, a noarch backend such as ``cuda``), whatever the platform."""
    return _LABEL.fullmatch(label) is not None or (label in NOARCH_BACKENDS and label != "universal")


def for_label(label: str, platforms: Iterable[str]) -> Target | None:
    """The build variant whose local label is ``label``, for a wheel of these platform tags; None if none is.

    The inverse of ``parse(name).label``, checked by parsing the name it gives with the same rules
    (``torch27cu128cxx11`` on ``manylinux_2_28_x86_64`` -> ``torch27-cxx11-cu128-x86_64-linux``).
    """
    return _for_label(label, tuple(sorted(set(platforms))))


#: The characters of a local label (``torch27cu128cxx11``): what a record's label may hold at all.
LABEL_CHARS = re.compile(r"[a-z0-9]{1,64}")


@dataclass(frozen=True)
class LabelParts:
    """A torch label's parts: ``torch213cu130cxx11`` -> torch, 2.13, cu130, cuda, cxx11."""

    framework: str  # the label's prefix: torch, torchabi, tvmffi
    torch: str  # "2.13"
    backend: str  # "cu130"
    backend_name: str  # "cuda"
    abi: str | None


def parse_label(label: str | None) -> LabelParts | None:
    """A local label the factory writes -> its parts; None for noarch and unknown labels."""
    m = _LABEL.fullmatch(label or "")
    if m is None:
        return None
    from kernels.backends import parse_backend

    try:
        name = parse_backend(m["backend"]).name
    except ValueError:
        return None
    return LabelParts(m["fw"], f"{m['major']}.{m['minor']}", m["backend"], name, m["abi"])
