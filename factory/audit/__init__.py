"""Audit a variant's binaries in place, before the wheel is written: ``audit`` picks the checks of a target (Linux:
elf.py; macOS: macho.py; abi3 wheels: ``check_abi3`` too; Windows: abi3 alone)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..errors import AuditFailed
from ..variants import Target
from . import macho
from .elf import ELF_MAGIC, AuditResult, audit_linux, read_magic


def audit(files: Sequence[tuple[str, Path]], target: Target, manylinux: str, accept_higher_policy: bool,
          where: str) -> AuditResult:
    """``files``: (path inside the variant folder, real path). Raises AuditFailed; returns the platform tag."""
    result = AuditResult(platform=target.platform)
    if target.noarch:
        return result
    if target.os == "linux":
        result = audit_linux(files, target, manylinux, accept_higher_policy, where)
    elif target.os == "darwin":
        result = AuditResult(platform=macho.platform_tag(files, target, where))
    if target.abi_tag == "abi3":
        check_abi3(files, where, target.python or (3, 9))
    return result


def check_abi3(files: Sequence[tuple[str, Path]], where: str, python: tuple[int, int] = (3, 9)) -> None:
    """Every Python extension of an abi3 wheel uses the stable ABI of the wheel's Python tag (cp39 for legacy variant
    names, cp312 for ``cpython-3.12-abi3``) and nothing above it; else AuditFailed naming the first non-abi3 symbol
    (abi3audit's tables)."""
    for rel, path in files:
        if not rel.endswith((".so", ".pyd")) or not _is_extension(path):
            continue
        # Imported only for an extension: abi3audit pulls in requests_cache and boto3 (about a second).
        from abi3audit._audit import audit as abi3_audit
        from abi3audit._extract import SharedObjectExtractor, SharedObjectSpec
        from abi3info.models import PyVersion

        baseline = PyVersion(*python)
        limited = f"Py_LIMITED_API=0x{python[0]:02X}{python[1]:02X}0000"
        try:
            for so in SharedObjectExtractor(SharedObjectSpec(str(path))):
                result = abi3_audit(so, assume_minimum_abi3=baseline)
                if result.non_abi3_symbols:
                    symbol = sorted(s.name for s in result.non_abi3_symbols)[0]
                    raise AuditFailed(
                        f"{where}/{rel} uses {symbol}, which is not in the stable ABI (abi3); "
                        f"build it with {limited}"
                    )
                if result.computed > baseline:
                    raise AuditFailed(
                        f"{where}/{rel} uses the Python {result.computed} stable ABI, above the wheel's "
                        f"cp{python[0]}{python[1]}; build it with {limited}"
                    )
        except AuditFailed:
            raise
        except Exception as exc:  # abi3audit (its AuditError) and its parsers raise many kinds on broken files
            raise AuditFailed(f"{where}/{rel}: abi3 check failed ({exc}); rebuild the kernel") from None


def _is_extension(path: Path) -> bool:
    """A Python extension module: exports PyInit_* (ELF), or is a Mach-O/PE file named .so/.pyd."""
    magic = read_magic(path)
    if magic != ELF_MAGIC:
        return macho.is_macho(magic) or magic[:2] == b"MZ"
    from elftools.elf.elffile import ELFFile

    with open(path, "rb") as f:
        elf = ELFFile(f)
        dynsym = elf.get_section_by_name(".dynsym")
        if dynsym is None:
            return False
        # The symbols' names are in the string table it links to: without "PyInit_" there, no symbol to walk.
        if b"PyInit_" not in elf.get_section(dynsym["sh_link"]).data():
            return False
        return any(
            s.name.startswith("PyInit_") and s.entry.st_shndx != "SHN_UNDEF"
            for s in dynsym.iter_symbols()  # type: ignore[attr-defined]
        )
