"""The in-place audit: manylinux policy from symbol versions, arch check, grafting decision, Mach-O minos."""

from __future__ import annotations

import struct
import sys
from pathlib import Path

import macho_kit
import pytest
import syslibs
from kernel_factory import variants
from kernel_factory.audit import audit, check_abi3, elf, macho
from kernel_factory.errors import AuditFailed

# Real system ELF files, found on the dynamic linker's search path (tests/syslibs.py); absent: the test skips.
MISSING = Path("/nonexistent")
LIBZ = syslibs.LIBZ or MISSING  # GLIBC <= 2.14
NEW_GLIBC = syslibs.find("libnss_mdns.so.2") or MISSING  # GLIBC_2.34, needs libc only
EXTERNAL = syslibs.find("libabsl_malloc_internal.so.*.*") or MISSING  # GLIBC_2.32 + absl libs
ARM = syslibs.cross("aarch64", "libatomic.so.1.*") or MISSING  # an aarch64 ELF, GLIBC_2.17

X86 = variants.parse("torch213-cxx11-cpu-x86_64-linux")
ARM_TARGET = variants.parse("torch213-cxx11-cpu-aarch64-linux")
WHERE = "build/torch213-cxx11-cpu-x86_64-linux"


def need(*paths: Path) -> None:
    for p in paths:
        if not p.exists():
            pytest.skip(f"a system ELF this test needs is not installed here ({p})")


def test_certified_manylinux_2_28() -> None:
    need(LIBZ)
    result = audit([("_k.so", LIBZ)], X86, "2_28", False, WHERE)
    assert result.platform == "manylinux_2_28_x86_64" and result.graft == ()
    assert result.policy is not None and result.policy.startswith("manylinux_2_")


def test_too_new_glibc_names_symbol_and_policy() -> None:
    need(NEW_GLIBC)
    with pytest.raises(AuditFailed) as err:
        audit([("_glibc_new.abi3.so", NEW_GLIBC)], X86, "2_28", False, WHERE)
    msg = str(err.value)
    assert msg.startswith(f"{WHERE}/_glibc_new.abi3.so needs ") and "@GLIBC_2.34 (manylinux_2_34)" in msg
    assert msg.endswith("--accept-higher-policy to publish it as manylinux_2_34")
    assert "a symbol@" not in msg  # the real symbol name was found
    accepted = audit([("_glibc_new.abi3.so", NEW_GLIBC)], X86, "2_28", True, WHERE)
    assert accepted.platform == "manylinux_2_34_x86_64"


def test_external_libraries_to_graft() -> None:
    need(EXTERNAL)
    result = audit([("_k.so", EXTERNAL)], X86, "2_28", True, WHERE)
    assert result.graft and all(lib.startswith("libabsl_") for lib in result.graft)
    assert "libstdc++.so.6" not in result.graft  # whitelisted by the policy


def test_runtime_libraries_are_not_external() -> None:
    assert elf.is_runtime_lib("libc10.so") and elf.is_runtime_lib("libcudart.so.12")
    assert elf.is_runtime_lib("libtorch_cpu.so") and not elf.is_runtime_lib("libssl.so.3")


def test_wrong_arch() -> None:
    need(ARM, LIBZ)
    with pytest.raises(AuditFailed, match="is built for EM_AARCH64, not x86_64"):
        audit([("_k.so", ARM)], X86, "2_28", False, WHERE)
    assert audit([("_k.so", ARM)], ARM_TARGET, "2_28", False, WHERE).platform == "manylinux_2_28_aarch64"


def test_unknown_policy() -> None:
    need(LIBZ)
    with pytest.raises(AuditFailed, match="manylinux_9_99 is not a known policy"):
        audit([("_k.so", LIBZ)], X86, "9_99", False, WHERE)


def test_noarch_and_windows_skip_elf_checks(tmp_path: Path) -> None:
    f = tmp_path / "x.py"
    f.write_text("")
    assert audit([("x.py", f)], variants.parse("torch-universal"), "2_28", False, "w").platform == "any"
    win = variants.parse("torch210-cu128-x86_64-windows")
    assert audit([("x.py", f)], win, "2_28", False, "w").platform == "win_amd64"


def _macho(path: Path, minos: tuple[int, int], cmd: int = 0x32) -> None:
    body = struct.pack("<IIIIII", cmd, 24, 1, minos[0] << 16 | minos[1] << 8, 0, 0)
    header = struct.pack("<IiiIIIII", 0xFEEDFACF, 0x0100000C, 0, 6, 1, len(body), 0, 0)
    path.write_bytes(header + body)


def test_macos_minos(tmp_path: Path) -> None:
    so = tmp_path / "_k.abi3.so"
    _macho(so, (14, 2))
    assert macho.slices(so, "w") == [macho.Slice("aarch64", (14, 2))]
    cpu = variants.parse("torch212-cpu-aarch64-darwin")
    metal = variants.parse("torch212-metal-aarch64-darwin")
    assert macho.platform_tag([("_k.abi3.so", so)], cpu, "w") == "macosx_14_0_arm64"
    assert macho.platform_tag([("_k.abi3.so", so)], metal, "w") == "macosx_26_0_arm64"
    _macho(so, (26, 1))
    assert macho.platform_tag([("_k.abi3.so", so)], metal, "w") == "macosx_26_0_arm64"
    fat = tmp_path / "fat.so"
    thin = so.read_bytes()
    fat.write_bytes(struct.pack(">IIiiIII", 0xCAFEBABE, 1, 0x0100000C, 0, 64, len(thin), 0).ljust(64, b"\0") + thin)
    assert macho.slices(fat, "w") == [macho.Slice("aarch64", (26, 1), universal=True)]
    assert macho.slices(Path(sys.executable).resolve(), "w") is None  # an ELF file: not Mach-O


X86_MAC = variants.parse("torch210-cpu-x86_64-darwin")
ARM_MAC = variants.parse("torch210-cpu-aarch64-darwin")
MAC_WHERE = "build/torch210-cpu-x86_64-darwin"


def _mac_platform(tmp_path: Path, data: bytes, target: variants.Target) -> str:
    so = tmp_path / "_k.abi3.so"
    so.write_bytes(data)
    return audit([("_k.abi3.so", so)], target, "2_28", False, MAC_WHERE).platform


@pytest.mark.parametrize(("data", "platform"), [
    (macho_kit.thin("x86_64", (10, 15)), "macosx_10_15_x86_64"),
    (macho_kit.thin("x86_64", (10, 13), old_command=True), "macosx_10_13_x86_64"),
    (macho_kit.thin("x86_64", (13, 3)), "macosx_13_0_x86_64"),
    (macho_kit.thin("x86_64", None), "macosx_11_0_x86_64"),  # nothing says: the variant's default
])
def test_macos_x86_64_tagged_by_the_binary(tmp_path: Path, data: bytes, platform: str) -> None:
    assert _mac_platform(tmp_path, data, X86_MAC) == platform


def test_macos_arch_contradicting_the_variant_is_refused(tmp_path: Path) -> None:
    with pytest.raises(AuditFailed) as err:
        _mac_platform(tmp_path, macho_kit.thin("arm64", (11, 0)), X86_MAC)
    assert str(err.value) == (f"{MAC_WHERE}/_k.abi3.so is built for aarch64, not x86_64 as the variant name says; "
                              "rebuild it for x86_64, or publish it under a darwin variant of its own arch")
    with pytest.raises(AuditFailed, match="is built for x86_64, not aarch64 as the variant name says"):
        _mac_platform(tmp_path, macho_kit.thin("x86_64", (10, 15)), ARM_MAC)
    with pytest.raises(AuditFailed, match="a 32-bit Mach-O file \\(i386\\); rebuild it as a 64-bit binary"):
        _mac_platform(tmp_path, macho_kit.thin("i386", (10, 6), bits=32), X86_MAC)


def test_macos_universal_binaries(tmp_path: Path) -> None:
    both = macho_kit.fat(("x86_64", macho_kit.thin("x86_64", (10, 13), old_command=True)),
                         ("arm64", macho_kit.thin("arm64", (12, 0))))
    assert _mac_platform(tmp_path, both, X86_MAC) == "macosx_10_13_x86_64"  # the variant's own slice decides
    assert _mac_platform(tmp_path, both, ARM_MAC) == "macosx_12_0_arm64"
    arm_only = macho_kit.fat(("arm64", macho_kit.thin("arm64", (11, 0))))
    with pytest.raises(AuditFailed, match="_k.abi3.so is a universal binary of aarch64, not x86_64 as the variant"):
        _mac_platform(tmp_path, arm_only, X86_MAC)


def test_abi3_check_skips_non_extensions() -> None:
    need(LIBZ)
    check_abi3([("_k.abi3.so", LIBZ)], WHERE)  # no PyInit_: not an extension, nothing to check
