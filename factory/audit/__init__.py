"""Audit a variant's binaries in place, before the wheel is written: ``audit`` picks the checks of a target (Linux:
elf.py; macOS: macho.py; abi3 wheels: abi3.py too; Windows: abi3 alone)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..variants import Target
from . import macho
from .abi3 import check_abi3
from .elf import AuditResult, audit_linux


def audit(files: Sequence[tuple[str, Path]], target: Target, manylinux: str, accept_higher_policy: bool,
          where: str) -> AuditResult:
    """``files``: (path inside the variant folder, real path). Raises AuditFailed; returns the platform tag."""
    if target.noarch:
        return AuditResult(platform=target.platform)
    result = AuditResult(platform=target.platform)
    if target.os == "linux":
        result = audit_linux(files, target, manylinux, accept_higher_policy, where)
    elif target.os == "darwin":
        result = AuditResult(platform=macho.platform_tag(files, target, where))
    if target.abi_tag == "abi3":
        check_abi3(files, where, target.python or (3, 9))
    return result
