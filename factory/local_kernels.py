"""``kernel-factory local-kernels``: LOCAL_KERNELS for the kernel wheels installed here.

The kernels library reads ``LOCAL_KERNELS=org/name=PATH:org2/name2=PATH2``
and, for a PATH that holds ``metadata.json`` (and no build variant folders),
imports ``PATH/__init__.py`` without further checks and whatever ``version=``
or ``revision=`` was asked for. A kernel wheel made by kernel-factory installs
exactly such a folder, so PATH is the installed package folder.

Needs only the standard library and ``packaging``; ``--check`` imports torch
(guarded) to learn its backend and C++ ABI, and parses variant names with the
kernels library when it is installed.
"""

from __future__ import annotations

import argparse
import importlib.metadata as im
import json
import platform
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from factory.errors import EXIT_OK, EXIT_REFUSED, UnknownVariant
from factory.variants import Target, parse

PROVENANCE = "kernel_factory.json"
# metadata.json fields that kernels 0.17 refuses to load without.
REQUIRED_FIELDS = ("name", "id", "version", "license", "python-depends", "backend")
# Requirements the variant check covers with a better message.
FRAMEWORK_DISTS = ("torch", "apache-tvm-ffi")


@dataclass(frozen=True)
class InstalledKernel:
    """One installed kernel wheel, as LOCAL_KERNELS would name it."""

    dist: str  # distribution name as installed
    version: str  # installed version, local label included
    key: str  # LOCAL_KERNELS key: the Hub repository id, else the kernel's name
    repo_id: str | None
    name: str
    variant: str | None
    folder: Path  # the installed package folder: LOCAL_KERNELS' PATH
    metadata: dict[str, Any] = field(default_factory=dict)
    requires: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()  # why LOCAL_KERNELS cannot point at it at all

    @property
    def title(self) -> str:
        who = f" ({self.repo_id})" if self.repo_id else ""
        return f"{self.name}{who} {self.version}"


@dataclass(frozen=True)
class Environment:
    """What this interpreter offers a kernel."""

    os: str  # linux, darwin, windows
    arch: str  # x86_64, aarch64
    torch: str | None = None  # installed torch version
    cuda: str | None = None  # torch.version.cuda
    hip: str | None = None  # torch.version.hip
    xpu: bool = False
    mps: bool = False
    cxx11_abi: bool | None = None
    torch_error: str | None = None  # torch is installed but does not import
    tvm_ffi: str | None = None  # installed apache-tvm-ffi version


def _machine() -> tuple[str, str]:
    os_name = platform.system().lower()
    arch = platform.machine().lower()
    arch = {"amd64": "x86_64", "arm64": "aarch64"}.get(arch, arch)
    return os_name, arch


def _installed(name: str, path: list[str] | None) -> str | None:
    """Version of the first distribution called ``name`` on ``path`` (sys.path by default)."""
    want = canonicalize_name(name)
    for dist in im.distributions(path=path) if path is not None else im.distributions():
        if canonicalize_name(dist.metadata["Name"] or "") == want:
            return dist.version
    return None


def detect_environment(path: list[str] | None = None, *, import_torch: bool = True) -> Environment:
    """This machine and the torch on ``path``; imports torch only when ``import_torch``."""
    os_name, arch = _machine()
    torch_version = _installed("torch", path)
    tvm = _installed("apache-tvm-ffi", path)
    if torch_version is None or not import_torch:
        return Environment(os=os_name, arch=arch, torch=torch_version, tvm_ffi=tvm)
    try:
        import torch
    except Exception as exc:  # a broken install raises anything
        first = (str(exc).splitlines() or [""])[0]
        return Environment(os_name, arch, torch_version, torch_error=f"{type(exc).__name__}: {first}", tvm_ffi=tvm)
    xpu = getattr(torch.version, "xpu", None)
    mps = bool(getattr(torch.backends, "mps", None) and torch.backends.mps.is_available())
    abi = bool(torch.compiled_with_cxx11_abi()) if os_name == "linux" else None
    return Environment(
        os_name, arch, torch_version, torch.version.cuda, torch.version.hip, xpu is not None, mps, abi, tvm_ffi=tvm
    )


def _read_json(text: str | None) -> tuple[dict[str, Any] | None, str | None]:
    if text is None:
        return None, None
    try:
        data = json.loads(text)
    except ValueError as exc:
        return None, str(exc)
    return (data, None) if isinstance(data, dict) else (None, "not a JSON object")


def _package(dist: im.Distribution, prov: dict[str, Any]) -> str | None:
    pkg = prov.get("package")
    if isinstance(pkg, str) and pkg:
        return pkg
    for f in dist.files or ():
        if len(f.parts) == 2 and f.parts[1] == "metadata.json":
            return f.parts[0]
    return None


def _kernel(dist: im.Distribution, prov: dict[str, Any] | None, prov_error: str | None) -> InstalledKernel:
    dist_name = dist.metadata["Name"] or "?"
    prov = prov or {}
    repo_id = prov.get("repo_id") if isinstance(prov.get("repo_id"), str) else None
    problems: list[str] = []
    if prov_error:
        problems.append(f"its {PROVENANCE} is not valid JSON ({prov_error}): reinstall the wheel")
    pkg = _package(dist, prov)
    folder = Path(str(dist.locate_file(pkg or dist_name))).absolute()
    meta: dict[str, Any] = {}
    if pkg is None:
        problems.append(f"its {PROVENANCE} names no package: rebuild the wheel with kernel-factory to-wheel")
    elif not folder.is_dir():
        problems.append(f"its package folder {folder} is missing: pip install --force-reinstall '{dist_name}'")
    else:
        meta_file = folder / "metadata.json"
        if not meta_file.is_file():
            problems.append(
                f"{pkg}/metadata.json, which the kernels library reads, is missing: "
                "rebuild the wheel with kernel-factory to-wheel and reinstall it"
            )
        else:
            data, err = _read_json(meta_file.read_text(encoding="utf-8", errors="replace"))
            missing = [k for k in REQUIRED_FIELDS if data is not None and k not in data]
            if data is None:
                problems.append(f"{meta_file} is not valid JSON ({err}): reinstall the wheel")
            elif missing:
                problems.append(
                    f"{meta_file} lacks {', '.join(missing)}, which the kernels library requires: "
                    "rebuild the wheel from a kernel-builder build"
                )
            meta = data or {}
        if not (folder / "__init__.py").is_file():
            problems.append(f"{pkg}/__init__.py is missing: pip install --force-reinstall '{dist_name}'")
    name = str(prov.get("name") or meta.get("name") or dist_name)
    key = repo_id or name
    if ":" in str(folder):
        problems.append(
            f"its folder {folder} contains ':', which LOCAL_KERNELS cannot express (':' separates "
            "entries): use an environment whose path has no ':'"
        )
    if ":" in key or "=" in key:
        problems.append(
            f"its name {key!r} contains ':' or '=', which LOCAL_KERNELS cannot express: "
            "rebuild the wheel with a repo-id without them"
        )
    variant = prov.get("variant") if isinstance(prov.get("variant"), str) else None
    return InstalledKernel(
        dist_name, dist.version, key, repo_id, name, variant, folder, meta, tuple(dist.requires or ()), tuple(problems)
    )


def find_kernels(path: list[str] | None = None) -> list[InstalledKernel]:
    """Installed distributions that carry kernel-factory's provenance file, first of each name, sorted by key."""
    seen: set[str] = set()
    found: list[InstalledKernel] = []
    for dist in im.distributions(path=path) if path is not None else im.distributions():
        canon = canonicalize_name(dist.metadata["Name"] or "")
        if canon in seen:
            continue  # shadowed by an earlier entry of sys.path, as importlib sees it
        seen.add(canon)
        text = dist.read_text(PROVENANCE)
        if text is None:
            continue
        prov, err = _read_json(text)
        found.append(_kernel(dist, prov, err))
    return sorted(found, key=lambda k: (k.key, k.dist))


def usable(kernels: list[InstalledKernel]) -> tuple[list[InstalledKernel], list[tuple[InstalledKernel, str]]]:
    """Split into the kernels LOCAL_KERNELS can name and those left out (with the reason)."""
    keep: dict[str, InstalledKernel] = {}
    left: list[tuple[InstalledKernel, str]] = []
    for k in kernels:
        if k.problems:
            left.append((k, "; ".join(k.problems)))
        elif k.key in keep:
            left.append(
                (
                    k,
                    f"{keep[k.key].dist} {keep[k.key].version} also provides {k.key}: "
                    f"pip uninstall one of '{keep[k.key].dist}' and '{k.dist}'",
                )
            )
        else:
            keep[k.key] = k
    return list(keep.values()), left


def local_kernels_value(kernels: list[InstalledKernel]) -> str:
    """``key=PATH:key2=PATH2`` for kernels that have no structural problem (empty if none)."""
    return ":".join(f"{k.key}={k.folder}" for k in kernels)


def shell_line(value: str) -> str:
    """A line for ``eval``: export the value, or unset the variable when it is empty."""
    if not value:
        return "unset LOCAL_KERNELS"  # an empty LOCAL_KERNELS makes kernels raise
    return f"export LOCAL_KERNELS={shlex.quote(value)}"


def main_label(env: Environment) -> str | None:
    """The local label of the variant index that fits this torch (``torch213cpucxx11``), if known."""
    if env.torch is None:
        return None
    try:
        v = Version(env.torch)
    except InvalidVersion:
        return None
    if env.cuda:
        cv = Version(env.cuda)
        backend = f"cu{cv.major}{cv.minor}"
    elif env.hip:
        hv = Version(env.hip.split("-")[0])
        backend = f"rocm{hv.major}{hv.minor}"
    elif env.xpu:
        return None
    else:
        backend = "metal" if env.mps else "cpu"
    abi = "" if env.os != "linux" else ("-cxx11" if env.cxx11_abi in (True, None) else "-cxx98")
    try:
        return parse(f"torch{v.major}{v.minor}{abi}-{backend}-{env.arch}-{env.os}").label
    except Exception:  # kernels missing, or a combination kernels does not define
        return None


def _target(variant: str | None) -> tuple[Target | None, str | None]:
    """(Target or None, reason) for a variant name; (None, None) when it cannot be judged here."""
    if variant is None:
        return None, None
    try:
        return parse(variant), None
    except UnknownVariant as exc:
        return None, str(exc)
    except ImportError:  # the kernels library is missing; the caller says so once
        return None, None


def _fix(k: InstalledKernel, env: Environment) -> str:
    try:
        public = Version(k.version).public
    except InvalidVersion:
        public = k.version
    label = main_label(env)
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
        have = _installed(req.name, path)
        if have is None:
            reasons.append(f"needs {req} which is not installed: pip install '{req}'")
        elif req.specifier and not req.specifier.contains(have, prereleases=True):
            reasons.append(f"needs {req} but {req.name} {have} is installed: pip install '{req}'")
    return reasons


def _dependency_reasons(k: InstalledKernel, provided: set[str]) -> list[str]:
    reasons = []
    deps = k.metadata.get("kernel-depends") or []
    for dep in deps if isinstance(deps, list) else []:
        repo = dep.get("repo-id") if isinstance(dep, dict) else None
        if isinstance(repo, str) and repo not in provided:
            reasons.append(
                f"depends on kernel {repo}, which is not installed as a wheel here "
                "(offline, get_kernel cannot fetch it): pip install its wheel too"
            )
    return reasons


def check_kernel(k: InstalledKernel, env: Environment, provided: set[str], path: list[str] | None = None) -> list[str]:
    """Why ``get_kernel`` would not load this installed kernel here; empty if it would."""
    reasons = list(k.problems)
    target, unknown = _target(k.variant)
    if unknown:
        reasons.append(unknown)
    skip: tuple[str, ...] = ()
    if target is not None:
        fix = _fix(k, env)
        reasons += _platform_reasons(target, env, fix)
        reasons += _framework_reasons(target, env, fix)
        reasons += _backend_reasons(target, env, fix)
        skip = FRAMEWORK_DISTS
    reasons += _requirement_reasons(k, skip, path)
    reasons += _dependency_reasons(k, provided)
    return reasons


def report(
    kernels: list[InstalledKernel],
    *,
    shell: bool,
    check: bool,
    env: Environment | None = None,
    has_kernels_lib: bool = True,
    path: list[str] | None = None,
) -> tuple[list[str], list[str], int]:
    """(stdout lines, stderr lines, exit code) of the command; ``check`` needs ``env``."""
    keep, left = usable(kernels)
    value = local_kernels_value(keep)
    out: list[str] = [shell_line(value)] if shell else [value] if value and not check else []
    err: list[str] = []
    if not kernels:
        err.append(f"no kernel wheels are installed here (none has .dist-info/{PROVENANCE})")
    if not check:
        err += [f"left out {k.title}: {why}" for k, why in left]
        return out, err, EXIT_REFUSED if left else EXIT_OK
    if env is None and kernels:
        raise ValueError("report(check=True) needs the environment")
    lines: list[str] = []
    if not has_kernels_lib:
        lines.append("the kernels library is not installed, so get_kernel cannot run: pip install kernels")
    provided = {k.key for k in keep}
    shadowed = {id(k): why for k, why in left if not k.problems}
    loading = 0
    for k in kernels:
        reasons = [shadowed[id(k)]] if id(k) in shadowed else []
        reasons += check_kernel(k, env, provided, path) if env else []
        if reasons:
            lines.append(f"{k.title}: " + "; ".join(reasons))
        else:
            loading += 1
            lines.append(f"{k.title}: would load from {k.folder}")
    if kernels:
        lines.append(f"{loading if has_kernels_lib else 0} of {len(kernels)} installed kernels would load")
    (err if shell else out).extend(lines)
    ok = has_kernels_lib and loading == len(kernels)
    return out, err, EXIT_OK if ok else EXIT_REFUSED


def run_local_kernels(ns: argparse.Namespace) -> int:
    """Print LOCAL_KERNELS (``--shell``: an export line) or, with ``--check``, what would load and why not."""
    kernels = find_kernels()
    env = detect_environment() if ns.check and kernels else None  # imports torch: only when needed
    has_lib = _installed("kernels", None) is not None
    out, err, code = report(kernels, shell=ns.shell, check=ns.check, env=env, has_kernels_lib=has_lib)
    for line in out:
        print(line)
    for line in err:
        print(line, file=sys.stderr)
    return code
