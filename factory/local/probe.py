"""Probe an interpreter's torch build without importing kernel-factory into it.

``PROBE`` is a self-contained script (standard library and torch only) that
``which`` runs with the interpreter it inspects: it prints one line,
``KF-PROBE <json>``, with the facts kernels' own backend selection reads
(``kernels.backends._backend``): the torch version, ``torch.version.cuda``,
``hip`` and ``xpu``, MPS, Neuron, TPU, the privateuse1 backend (Ascend NPU),
the C++ ABI, the machine and the OS. ``environment`` turns those facts into a
build variant name with kernels' classes, so the name is spelled the way
kernel-builder spells it.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from ..errors import Refused, UsageError

MARK = "KF-PROBE "
PROBE = r"""
import json, platform, sys
out = {"python": sys.executable, "python_version": "%d.%d" % sys.version_info[:2], "torch": None}
try:
    import torch
except Exception as exc:
    out["torch_error"] = "%s: %s" % (type(exc).__name__, exc)
else:
    def attempt(fn, default=None):
        try:
            return fn()
        except Exception:
            return default
    v = getattr(torch, "version", None)
    b = getattr(torch, "backends", None)
    C = getattr(torch, "_C", None)
    t = {"version": str(getattr(torch, "__version__", "")),
         "cuda": getattr(v, "cuda", None), "hip": getattr(v, "hip", None), "xpu": getattr(v, "xpu", None),
         "tpu": hasattr(b, "tpu"), "neuron": hasattr(torch, "neuron"),
         "mps": bool(attempt(lambda: b.mps.is_available(), False)),
         "cxx11_abi": attempt(lambda: bool(C._GLIBCXX_USE_CXX11_ABI)),
         "privateuse1": attempt(lambda: C._get_privateuse1_backend_name()), "cann": None}
    if t["privateuse1"] == "npu":
        def cann():
            from torch_npu.utils.collect_env import get_cann_version
            c = get_cann_version()
            return "%s.%s" % (c[0], c[2])
        t["cann"] = attempt(cann)
    out["torch"] = t
out.update(machine=platform.machine(), system=platform.system().lower())
sys.stdout.write("\n" + "KF-PROBE " + json.dumps(out) + "\n")
"""


@dataclass(frozen=True)
class Environment:
    """What one interpreter's torch build needs: its variant name and label, and the facts behind them."""

    python: str
    python_version: str
    torch: str
    backend: str  # cuda, rocm, xpu, cpu, metal, neuron, tpu, cann
    backend_version: str | None
    cxx11_abi: bool | None
    arch: str  # x86_64, aarch64
    os: str  # linux, darwin, windows
    variant: str
    label: str

    @property
    def torch_minor(self) -> str:
        v = Version(self.torch)
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


def run_probe(python: str) -> dict[str, Any]:
    """Run PROBE with ``python`` (in an empty folder, so nothing there shadows torch); its facts."""
    try:
        with tempfile.TemporaryDirectory(prefix="kernel-factory-probe-") as tmp:
            proc = subprocess.run([python, "-c", PROBE], cwd=tmp, capture_output=True, text=True, timeout=300,
                                  env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    except FileNotFoundError:
        raise UsageError(f"--python {python}: no such interpreter; give the path of a python executable") from None
    except PermissionError:
        raise UsageError(f"--python {python}: not executable; give the path of a python executable") from None
    except subprocess.TimeoutExpired:
        raise UsageError(f"--python {python}: the probe did not finish within 300 s") from None
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(MARK):
            facts: dict[str, Any] = json.loads(line[len(MARK):])
            return facts
    tail = (proc.stderr.strip().splitlines() or ["no output"])[-1][:200]
    raise UsageError(f"--python {python}: the probe failed ({tail}); is it a Python 3 interpreter?")


def _platform(facts: dict[str, Any]) -> tuple[str, str]:
    machine, system = str(facts["machine"]), str(facts["system"])
    if system == "darwin" and machine == "arm64":
        machine = "aarch64"
    elif system == "windows" and machine in ("AMD64", "amd64"):
        machine = "x86_64"
    elif system == "windows" and machine in ("ARM64", "arm64"):
        machine = "aarch64"
    return machine, system


def _backend(t: dict[str, Any]) -> Any:
    """The kernels Backend for these torch facts, in the order kernels.backends._backend checks them."""
    from kernels import backends as kb

    def version(text: str) -> Version:
        try:
            return Version(text)
        except InvalidVersion:
            raise Refused(f"torch reports an unreadable backend version {text!r}") from None

    if t.get("tpu"):
        return kb.TPU()
    if t.get("neuron"):
        return kb.Neuron()
    if t.get("cuda"):
        return kb.CUDA(version=version(str(t["cuda"])))
    if t.get("hip"):
        return kb.ROCm(version=version(str(t["hip"]).split("-")[0]))
    if t.get("mps"):
        return kb.Metal()
    if t.get("xpu"):
        xpu = str(t["xpu"])
        return kb.XPU(version=version(f"{xpu[0:4]}.{xpu[5:6]}"))
    if t.get("privateuse1") == "npu" and t.get("cann"):
        return kb.CANN(version=version(str(t["cann"])))
    return kb.CPU()


def environment(facts: dict[str, Any]) -> Environment:
    """Probe facts -> the build variant kernel-builder makes for this environment, and its label."""
    from kernels.variants import Arch, ArchVariant, Torch

    from ..variants import parse

    python = str(facts.get("python") or "python")
    t = facts.get("torch")
    if not isinstance(t, dict):
        why = facts.get("torch_error") or "not installed"
        raise UsageError(f"{python} cannot import torch ({why}); install torch there first, or pass --python")
    try:
        tv = Version(str(t["version"]))
    except InvalidVersion:
        raise Refused(f"{python}: torch reports an unreadable version {t['version']!r}") from None
    arch, os_name = _platform(facts)
    backend = _backend(t)
    abi = t.get("cxx11_abi") if os_name == "linux" else None
    framework = Torch(version=Version(f"{tv.major}.{tv.minor}"), cxx11_abi=abi if abi is None else bool(abi))
    name = ArchVariant(framework=framework, arch=Arch(backend=backend, platform=arch, os=os_name)).variant_str
    target = parse(name)  # UnknownVariant (exit 3) for a platform kernels does not build for
    assert target.label is not None
    return Environment(
        python=python,
        python_version=str(facts.get("python_version", "")),
        torch=str(tv),
        backend=backend.name,
        backend_version=target.backend_version,
        cxx11_abi=framework.cxx11_abi,
        arch=arch,
        os=os_name,
        variant=name,
        label=target.label,
    )


def probe(python: str | None) -> Environment:
    import sys

    return environment(run_probe(python or sys.executable))


def resolve_python(python: str | None) -> str | None:
    """``--python`` as given (a relative path made absolute: the probe runs in another folder), or a folder's
    (a venv's) bin/python; a bare name is looked up on PATH."""
    if python and Path(python).is_dir():
        for candidate in (Path(python) / "bin" / "python", Path(python) / "Scripts" / "python.exe"):
            if candidate.exists():
                return str(candidate.absolute())
        raise UsageError(f"--python {python}: a folder without bin/python; give an interpreter or a venv folder")
    if python and os.sep in python and not os.path.isabs(python):
        return os.path.abspath(python)
    return python
