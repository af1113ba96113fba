"""``local-kernels --check``: would an installed kernel wheel load in this interpreter, and if not, why not
(its variant's platform, torch, C++ ABI, backend and tvm-ffi, its other requirements and kernel-depends).
"""

from __future__ import annotations

import importlib.metadata as im
import platform
from contextlib import suppress

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ...errors import UnknownVariant
from ...variants import Target, parse
from ..probe.environment import Environment, from_facts, label_or_none, machine
from ..probe.facts import collect
from ..probe.run import run_probe
from .installed import InstalledKernel

# Requirements the variant check covers with a better message.
FRAMEWORK_DISTS = ("torch", "apache-tvm-ffi")


def installed_version(name: str, path: list[str] | None) -> str | None:
    """Version of the first distribution called ``name`` on ``path`` (sys.path by default)."""
    want = canonicalize_name(name)
    dists = im.distributions(path=path) if path is not None else im.distributions()
    return next((d.version for d in dists if canonicalize_name(d.metadata["Name"] or "") == want), None)


def detect_environment(python: str | None = None, path: list[str] | None = None) -> Environment:
    """The torch of ``python`` (its packages on ``path``), asked in its own process; None: this machine and its
    torch (facts.py's facts, collected in this interpreter: torch is imported only where it is installed)."""
    torch_version, tvm = installed_version("torch", path), installed_version("apache-tvm-ffi", path)
    if python:
        return from_facts(run_probe(python), torch_version=torch_version, tvm_ffi=tvm)
    if torch_version is None:
        arch, os_name = machine(platform.machine(), platform.system())
        return Environment(os=os_name, arch=arch, torch=None, tvm_ffi=tvm)
    return from_facts(collect(), torch_version=torch_version, tvm_ffi=tvm)


def _fix(k: InstalledKernel, env: Environment) -> str:
    public = k.version  # as installed, where it is no PEP 440 version
    with suppress(InvalidVersion):
        public = Version(k.version).public
    label = label_or_none(env)
    where = f"the variants/{label}/simple index" if label else "the variant index that matches your torch"
    return f"pip install --force-reinstall '{k.dist}=={public}' from {where}"


def _mm(version: str | None) -> tuple[int, int] | None:
    try:
        v = Version(version or "")
    except InvalidVersion:
        return None
    return v.major, v.minor


def _framework_reasons(t: Target, env: Environment, fix: str) -> list[str]:
    want = t.framework_version or ""
    if t.framework in ("torch", "torch-stable-abi"):
        if env.torch is None:
            return [f"built for torch {want} but torch is not installed: pip install 'torch=={want}.*'"]
        have = _mm(env.torch)
        if t.framework == "torch" and have != _mm(want):
            return [f"built for torch {want} but torch {env.torch} is installed: {fix}"]
        if t.framework == "torch-stable-abi" and (have is None or have < (_mm(want) or (0, 0))):
            return [f"built for torch >= {want} (stable ABI) but torch {env.torch} is installed: {fix}"]
        if env.torch_error:
            return [f"torch {env.torch} is installed but does not import ({env.torch_error}): repair torch"]
        abi = "cxx11" if (t.label or "").endswith("cxx11") else "cxx98" if (t.label or "").endswith("cxx98") else None
        if abi and env.cxx11_abi is not None and (abi == "cxx11") != env.cxx11_abi:
            mine = "cxx11" if env.cxx11_abi else "pre-cxx11 (cxx98)"
            return [f"built for the {abi} C++ ABI but the installed torch uses the {mine} ABI: {fix}"]
    elif t.framework == "tvm-ffi" and (env.tvm_ffi is None or _mm(env.tvm_ffi) != _mm(want)):
        what = f"apache-tvm-ffi {env.tvm_ffi} is installed" if env.tvm_ffi else "apache-tvm-ffi is not installed"
        return [f"built for apache-tvm-ffi {want} but {what}: pip install 'apache-tvm-ffi=={want}.*'"]
    return []


def _backend_reasons(t: Target, env: Environment, fix: str) -> list[str]:
    if env.torch is None or env.torch_error or t.framework == "tvm-ffi":
        return []
    torch = f"torch {env.torch}"
    if t.backend == "cuda":
        if not env.cuda:
            return [f"a CUDA build but {torch} has no CUDA: {fix}, or install a CUDA build of torch"]
        have, want = _mm(env.cuda), _mm(t.backend_version or "")
        if have and want and (have[0] != want[0] or want[1] > have[1]):
            return [f"built for CUDA {t.backend_version} but {torch} uses CUDA {env.cuda}: {fix}"]
    elif t.backend == "rocm" and not env.hip:
        return [f"a ROCm build but {torch} has no ROCm: {fix}, or install a ROCm build of torch"]
    elif t.backend == "xpu" and not env.xpu:
        return [f"an XPU build but {torch} has no XPU support: {fix}"]
    elif t.backend == "metal" and not env.mps:
        return [f"a Metal build but {torch} cannot use Metal (MPS) here: {fix}"]
    return []  # cpu and universal load anywhere; neuron, tpu, cann: kernels decides at load time


def _platform_reasons(t: Target, env: Environment, fix: str) -> list[str]:
    if t.os is None or (t.os, t.arch) == (env.os, env.arch):
        return []
    return [f"built for {t.arch}-{t.os} but this machine is {env.arch}-{env.os}: {fix}"]


def _requirement_reasons(k: InstalledKernel, skip: tuple[str, ...], path: list[str] | None) -> list[str]:
    reasons = []
    for line in k.requires:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if canonicalize_name(req.name) in skip or (req.marker and not req.marker.evaluate({"extra": ""})):
            continue
        have = installed_version(req.name, path)
        if have is None:
            reasons.append(f"needs {req} which is not installed: pip install '{req}'")
        elif req.specifier and not req.specifier.contains(have, prereleases=True):
            reasons.append(f"needs {req} but {req.name} {have} is installed: pip install '{req}'")
    return reasons


def _dependency_reasons(k: InstalledKernel, provided: set[str]) -> list[str]:
    deps = k.metadata.get("kernel-depends") or []
    repos = [dep.get("repo-id") for dep in (deps if isinstance(deps, list) else []) if isinstance(dep, dict)]
    return [f"depends on kernel {repo}, which is not installed as a wheel here (offline, get_kernel cannot fetch it): "
            "pip install its wheel too" for repo in repos if isinstance(repo, str) and repo not in provided]


def check_kernel(k: InstalledKernel, env: Environment, provided: set[str], path: list[str] | None = None) -> list[str]:
    """Why ``get_kernel`` would not load this installed kernel here; empty if it would."""
    reasons = list(k.problems)
    target: Target | None = None
    try:
        target = parse(k.variant) if k.variant is not None else None
    except UnknownVariant as exc:
        reasons.append(str(exc))
    except ImportError:  # the kernels library is missing; the caller says so once
        pass
    skip: tuple[str, ...] = ()
    if target is not None:
        fix = _fix(k, env)
        for reasons_of in (_platform_reasons, _framework_reasons, _backend_reasons):
            reasons += reasons_of(target, env, fix)
        skip = FRAMEWORK_DISTS
    reasons += _requirement_reasons(k, skip, path)
    reasons += _dependency_reasons(k, provided)
    return reasons
