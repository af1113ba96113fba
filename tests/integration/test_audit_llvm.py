"""Mach-O objects assembled by a real LLVM (llvm-mc, a process: not a unit test) read as the audit expects."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from kernel_factory import variants
from kernel_factory.audit import audit
from kernel_factory.errors import AuditFailed

pytestmark = pytest.mark.integration

X86_MAC = variants.parse("torch210-cpu-x86_64-darwin")
ARM_MAC = variants.parse("torch210-cpu-aarch64-darwin")
MAC_WHERE = "build/torch210-cpu-x86_64-darwin"


@pytest.mark.skipif(shutil.which("llvm-mc") is None, reason="llvm-mc (Debian llvm) is not installed")
def test_macos_objects_from_llvm(tmp_path: Path) -> None:
    """Mach-O objects assembled by LLVM for x86_64 and arm64 macOS read as their architecture and minimum OS."""
    src = tmp_path / "k.s"
    for triple, version, target, platform in (("x86_64-apple-macos", "10, 14", X86_MAC, "macosx_10_14_x86_64"),
                                              ("arm64-apple-macos", "12, 1", ARM_MAC, "macosx_12_0_arm64")):
        src.write_text(f".build_version macos, {version}\n.globl _PyInit__k\n_PyInit__k:\nret\n")
        obj = tmp_path / "_k.abi3.so"
        subprocess.run(["llvm-mc", f"-triple={triple}", "-filetype=obj", str(src), "-o", str(obj)], check=True)
        assert audit([("_k.abi3.so", obj)], target, "2_28", False, MAC_WHERE).platform == platform
        other = ARM_MAC if target is X86_MAC else X86_MAC
        with pytest.raises(AuditFailed, match="as the variant name says"):
            audit([("_k.abi3.so", obj)], other, "2_28", False, MAC_WHERE)
