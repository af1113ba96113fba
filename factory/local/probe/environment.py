"""One interpreter's torch build, as kernels sees it: the single Environment of local/, from the facts
``facts.py`` collects; its build variant and label are spelled the way kernel-builder spells them, with no kernels
import.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from packaging.version import InvalidVersion, Version

from ...errors import FactoryError, Refused, UsageError

_ARCH = {"amd64": "x86_64", "arm64": "aarch64"}


def machine(machine_name: str, system: str) -> tuple[str, str]:
    """(arch, os) as kernel-builder names them: ``AMD64`` -> ``x86_64``, ``arm64`` -> ``aarch64``; os lower-case."""
    arch = machine_name.lower()
    return _ARCH.get(arch, arch), system.lower()


@dataclass(frozen=True)
class Environment:
    """What one interpreter's torch build offers a kernel; ``variant`` and ``label`` are derived from it."""

    os: str  # linux, darwin, windows
    arch: str  # x86_64, aarch64
    torch: str | None = None  # torch version; None: not installed
    cuda: str | None = None  # torch.version.cuda
    hip: str | None = None  # torch.version.hip
    xpu: str | None = None  # torch.version.xpu
    mps: bool = False
    cxx11_abi: bool | None = None
    torch_error: str | None = None  # torch is installed but does not import
    tvm_ffi: str | None = None  # installed apache-tvm-ffi version
    tpu: bool = False
    neuron: bool = False
    cann: str | None = None  # CANN version of an Ascend NPU build (privateuse1 "npu")
    python: str = ""
    python_version: str = ""

    @property
    def backend(self) -> str:
        """kernels' backend name, checked in the order kernels' backend selection checks them."""
        order = (("tpu", self.tpu), ("neuron", self.neuron), ("cuda", self.cuda), ("rocm", self.hip),
                 ("metal", self.mps), ("xpu", self.xpu), ("cann", self.cann))
        return next((name for name, present in order if present), "cpu")

    @functools.cached_property
    def _target(self) -> Any:
        """(variant name, factory.variants.Target); raises Refused/UnknownVariant/UsageError."""
        from ...variants import parse

        if self.torch is None:
            raise UsageError(f"{self.python or 'python'} has no torch ({self.torch_error or 'not installed'})")
        name = variant_name(self)
        return name, parse(name)  # UnknownVariant (exit 3) for a platform kernels does not build for

    @property
    def variant(self) -> str:
        """The build variant kernel-builder makes for this torch (``torch213-cxx11-cu130-x86_64-linux``)."""
        return str(self._target[0])

    @property
    def label(self) -> str:
        """Its local version label (``torch213cu130cxx11``): the variant index this torch installs from."""
        return str(self._target[1].label)

    @property
    def backend_version(self) -> str | None:
        version = self._target[1].backend_version
        return None if version is None else str(version)

    @property
    def torch_minor(self) -> str:
        v = _version(self.torch or "", "torch")
        return f"{v.major}.{v.minor}"

    @property
    def root(self) -> str:
        return f"variants/{self.label}/simple/"

    def to_json(self) -> dict[str, Any]:
        return {
            "python": self.python, "python_version": self.python_version, "torch": self.torch,
            "backend": self.backend, "backend_version": self.backend_version, "cxx11_abi": self.cxx11_abi,
            "arch": self.arch, "os": self.os, "variant": self.variant, "label": self.label, "root": self.root,
        }  # fmt: skip


def label_or_none(env: Environment) -> str | None:
    """``env.label``, or None where it cannot be derived (no torch, a platform kernels does not build for)."""
    try:
        return env.label
    except (FactoryError, ImportError):
        return None


def _version(text: str, what: str) -> Version:
    try:
        return Version(text)
    except InvalidVersion:
        raise Refused(f"{what} reports an unreadable version {text!r}") from None


def backend_part(env: Environment) -> str:
    """The backend part of kernel-builder's variant name for this torch (``cu130``, ``rocm71``, ``xpu20251``,
    ``cann82``, ``cpu``), spelled as kernels' backends spell it (major and minor run together)."""
    xpu = str(env.xpu)
    versioned = {"cuda": ("cu", str(env.cuda), "CUDA"), "rocm": ("rocm", str(env.hip).split("-")[0], "ROCm"),
                 "xpu": ("xpu", f"{xpu[0:4]}.{xpu[5:6]}", "XPU"), "cann": ("cann", str(env.cann), "CANN")}
    if env.backend not in versioned:
        return env.backend  # tpu, neuron, metal, cpu
    prefix, version, name = versioned[env.backend]
    v = _version(version, f"torch's {name}")
    return f"{prefix}{v.major}{v.minor}"


def variant_name(env: Environment) -> str:
    """The build variant kernel-builder makes for this torch, in the names every kernels release reads
    (``torch213-cxx11-cu130-x86_64-linux``): ``torch<major><minor>``, the C++ ABI on Linux only, the backend,
    the machine and the OS. Spelled here rather than with kernels' classes, whose names and fields changed
    between releases (0.19 has no ``Arch``) and are not public."""
    tv = _version(env.torch or "", "torch")
    abi = env.cxx11_abi if env.os == "linux" else None
    torch = f"torch{tv.major}{tv.minor}" + ("" if abi is None else "-cxx11" if abi else "-cxx98")
    return f"{torch}-{backend_part(env)}-{env.arch}-{env.os}"


def from_facts(facts: dict[str, Any], *, torch_version: str | None = None, tvm_ffi: str | None = None) -> Environment:
    """The facts ``facts.collect()`` returns -> an Environment (``torch_version``: the installed distribution's
    version, where the caller read it)."""
    arch, os_name = machine(str(facts.get("machine", "")), str(facts.get("system", "")))
    python, python_version = str(facts.get("python") or ""), str(facts.get("python_version") or "")
    t = facts.get("torch")
    if not isinstance(t, dict):
        error = facts.get("torch_error")
        return Environment(os_name, arch, torch_version, torch_error=None if error is None else str(error),
                           tvm_ffi=tvm_ffi, python=python, python_version=python_version)

    def text(key: str) -> str | None:
        value = t.get(key)
        return str(value) if value else None

    return Environment(
        os_name, arch, torch_version or str(t.get("version", "")), cuda=text("cuda"), hip=text("hip"),
        xpu=text("xpu"), mps=bool(t.get("mps")), cxx11_abi=None if t.get("cxx11_abi") is None else bool(t["cxx11_abi"]),
        tvm_ffi=tvm_ffi, tpu=bool(t.get("tpu")), neuron=bool(t.get("neuron")),
        cann=text("cann") if t.get("privateuse1") == "npu" else None, python=python, python_version=python_version,
    )
