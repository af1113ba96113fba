#!/usr/bin/env python3
"""Build the example kernel repositories that kernel-factory's tests and demo use.

Each fixture is a git repository laid out like a Hugging Face Kernel Hub
repository (README.md plus ``build/<variant>/``), with one commit per version,
``vX.Y.Z`` tags and ``v<N>`` branches, written to ``OUT/<name>/``:

    img2grey     flat layout, x86_64 + aarch64 CPU variants and a cu130 variant;
                 tags v1.1.0, v1.1.2; branch v1 (2 commits)
    relu-nested  nested layout, x86_64 CPU; tag v0.1.0; branch v1 (2 commits)
    glibc-new    flat, x86_64 CPU, needs GLIBC_2.32 (fails a manylinux_2_28 audit)
    pyonly       noarch torch-universal, pure Python
    not-abi3     flat, x86_64 CPU, a *.abi3.so that uses a non-limited-API symbol

Modes:

    --from-prebuilt  assemble the repositories from the committed binaries in
                     examples/prebuilt/ (no compiler, no torch; what the tests
                     and ``make demo`` use)
    (default)        compile the binaries from examples/src/ with g++, the
                     aarch64 cross compiler and nvcc against the installed torch,
                     refresh examples/prebuilt/, then assemble
    --check          compile into a temporary folder and verify that the fresh
                     build succeeds, passes the symbol checks and yields the same
                     repository layout as the committed prebuilt binaries;
                     writes nothing in the project

Everything but the compiled bytes is deterministic: fixed commit dates and
author, so the same prebuilt binaries give the same commit ids on every run.
This script never imports torch or the kernels it builds.
"""

import argparse
import base64
import concurrent.futures
import dataclasses
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "examples" / "src"
PREBUILT = ROOT / "examples" / "prebuilt"
DEFAULT_OUT = ROOT / "examples" / "repos"

AUTHOR_NAME = "Fixture"
AUTHOR_EMAIL = "fixture@example.com"
UPSTREAM = "https://github.com/example/{name}"

# manylinux_2_28 caps on versioned symbols (auditwheel's policy).
MANYLINUX_2_28 = {"GLIBC": (2, 28), "GLIBCXX": (3, 4, 24), "CXXABI": (1, 3, 11)}
TORCH_SONAMES = ("libc10.so", "libtorch.so", "libtorch_cpu.so")
CUDA_ARCHS = ("8.0", "9.0")

# Variant kinds: how a variant is compiled.
CPU_X86 = "cpu-x86_64"
CPU_AARCH64 = "cpu-aarch64"
CUDA_X86 = "cuda-x86_64"
NOARCH = "noarch"


# --------------------------------------------------------------------------
# The fixtures
# --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Variant:
    name: str
    kind: str

    @property
    def backend(self) -> dict[str, object]:
        if self.kind == CUDA_X86:
            return {"type": "cuda", "archs": list(CUDA_ARCHS)}
        # kernels' metadata has no "universal" backend type; a pure-torch
        # kernel runs wherever torch runs, so it says cpu.
        return {"type": "cpu"}

    @property
    def compiled(self) -> bool:
        return self.kind != NOARCH


@dataclasses.dataclass(frozen=True)
class Commit:
    label: str  # the version this commit represents; names the overlay folder v<label>
    major: int  # metadata.json "version"
    date: str  # GIT_AUTHOR_DATE / GIT_COMMITTER_DATE
    tag: str | None = None


@dataclasses.dataclass(frozen=True)
class Kernel:
    name: str  # repository and metadata name (kebab-case)
    layout: str  # "flat" or "nested"
    variants: tuple[Variant, ...]
    commits: tuple[Commit, ...]
    branches: tuple[str, ...] = ()  # branches at the last commit, besides main
    cpp_sources: tuple[str, ...] = ()  # relative to examples/src/<name>/
    cuda_cpp_sources: tuple[str, ...] = ()  # extra C++ for the CUDA variant
    cu_sources: tuple[str, ...] = ()  # nvcc, CUDA variant only
    pyinit: str = "../common/pyinit.c"
    shim: bool = True  # compile C++ with the sys/single_threaded.h shim
    needs_glibc_2_32: bool = False
    not_abi3: bool = False
    license: str = "Apache-2.0"

    @property
    def pkg(self) -> str:
        return self.name.replace("-", "_")

    @property
    def compiled(self) -> bool:
        return bool(self.cpp_sources)

    def compiled_inputs(self) -> list[Path]:
        """Every file whose content goes into the binaries (names the build id)."""
        base = SRC / self.name
        files = [base / s for s in (*self.cpp_sources, *self.cuda_cpp_sources, *self.cu_sources)]
        files += sorted((base / "csrc").glob("*.h"))
        files.append((base / self.pyinit).resolve())
        if self.shim:
            files.append(SRC / "common" / "shim" / "sys" / "single_threaded.h")
        return files

    def ops_id(self) -> str:
        """The build's unique op namespace and extension module name: _<pkg>_<hash>."""
        if not self.compiled:
            return f"_{self.pkg}_{hashlib.sha256(self.name.encode()).hexdigest()[:7]}"
        h = hashlib.sha256(self.name.encode() + b"\0")
        for path in self.compiled_inputs():
            h.update(path.relative_to(SRC).as_posix().encode() + b"\0")
            h.update(path.read_bytes() + b"\0")
        return f"_{self.pkg}_{h.hexdigest()[:7]}"

    def so_name(self) -> str:
        return f"{self.ops_id()}.abi3.so"


X86 = Variant("torch213-cxx11-cpu-x86_64-linux", CPU_X86)
AARCH64 = Variant("torch213-cxx11-cpu-aarch64-linux", CPU_AARCH64)
CU130 = Variant("torch213-cxx11-cu130-x86_64-linux", CUDA_X86)
UNIVERSAL = Variant("torch-universal", NOARCH)

KERNELS: dict[str, Kernel] = {
    k.name: k
    for k in (
        Kernel(
            name="img2grey",
            layout="flat",
            variants=(X86, AARCH64, CU130),
            commits=(
                Commit("1.1.0", 1, "2025-03-03T10:00:00+00:00", tag="v1.1.0"),
                Commit("1.1.2", 1, "2025-04-07T10:00:00+00:00", tag="v1.1.2"),
            ),
            branches=("v1",),
            cpp_sources=("csrc/img2grey_cpu.cpp",),
            cuda_cpp_sources=("csrc/img2grey_cuda.cpp",),
            cu_sources=("csrc/img2grey_kernel.cu",),
        ),
        Kernel(
            name="relu-nested",
            layout="nested",
            variants=(X86,),
            commits=(
                Commit("0.1.0", 0, "2025-01-13T09:30:00+00:00", tag="v0.1.0"),
                Commit("1.0.2", 1, "2025-02-10T09:30:00+00:00"),
            ),
            branches=("v1",),
            cpp_sources=("csrc/relu.cpp",),
        ),
        Kernel(
            name="glibc-new",
            layout="flat",
            variants=(X86,),
            commits=(Commit("0.1.0", 0, "2025-05-05T08:00:00+00:00", tag="v0.1.0"),),
            cpp_sources=("csrc/glibc_new.cpp",),
            shim=False,
            needs_glibc_2_32=True,
        ),
        Kernel(
            name="pyonly",
            layout="nested",
            variants=(UNIVERSAL,),
            commits=(Commit("0.2.0", 0, "2025-06-02T12:00:00+00:00", tag="v0.2.0"),),
        ),
        Kernel(
            name="not-abi3",
            layout="flat",
            variants=(X86,),
            commits=(Commit("0.1.0", 0, "2025-07-07T07:00:00+00:00", tag="v0.1.0"),),
            cpp_sources=("csrc/negate.cpp",),
            pyinit="csrc/pyinit_full_api.c",
            not_abi3=True,
        ),
    )
}


def selected_variants(kernel: Kernel, skip_cuda: bool) -> list[Variant]:
    return [v for v in kernel.variants if not (skip_cuda and v.kind == CUDA_X86)]


# --------------------------------------------------------------------------
# Digest (the kernels project's metadata.json digest; kept here on purpose,
# independent of factory/digest.py)
# --------------------------------------------------------------------------

DIGEST_EXCLUDED_TOP = frozenset({"metadata.json", "metadata.json.sigstore"})


def variant_digest(variant_dir: Path, algorithm: str = "sha256") -> dict[str, str]:
    """{relpath: padded base64 hash} over a variant folder.

    Follows symlinks, files only; leaves out metadata.json and
    metadata.json.sigstore at the top level only, anything under __pycache__,
    and *.pyc.
    """
    files: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(variant_dir, followlinks=True):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        rel_dir = Path(dirpath).relative_to(variant_dir)
        for filename in sorted(filenames):
            path = Path(dirpath) / filename
            rel = (rel_dir / filename).as_posix()
            if rel_dir == Path(".") and filename in DIGEST_EXCLUDED_TOP:
                continue
            if filename.endswith(".pyc") or not path.is_file():
                continue
            h = hashlib.new(algorithm)
            with path.open("rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
            files[rel] = base64.b64encode(h.digest()).decode("ascii")
    return dict(sorted(files.items()))


def _digest_self_test() -> None:
    expected = "uU0nuZNNPgilLlLX2n2r+sSE7+N6U4DukIj3rOLvzek="
    got = base64.b64encode(hashlib.sha256(b"hello world").digest()).decode("ascii")
    assert got == expected, got


# --------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------


class FixtureError(Exception):
    pass


def log(msg: str) -> None:
    print(msg, flush=True)


def run(cmd: Sequence[str | os.PathLike[str]], cwd: Path | None = None, env: Mapping[str, str] | None = None) -> str:
    proc = subprocess.run(
        [str(c) for c in cmd], cwd=cwd, env=None if env is None else dict(env), capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise FixtureError(
            f"command failed ({proc.returncode}): {' '.join(str(c) for c in cmd)}\n{proc.stdout}{proc.stderr}"
        )
    return proc.stdout


def write_file(path: Path, data: bytes, executable: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    path.chmod(0o755 if executable else 0o644)


def which(name: str, *fallbacks: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for fb in fallbacks:
        if Path(fb).is_file() and os.access(fb, os.X_OK):
            return fb
    return None


# --------------------------------------------------------------------------
# Compiling
# --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Toolchain:
    torch_dir: Path
    python_include: Path
    cxx: str
    cc: str
    strip: str
    objdump: str
    aarch64_cxx: str | None
    aarch64_cc: str | None
    aarch64_strip: str | None
    aarch64_objdump: str | None
    nvcc: str | None
    cuda_lib: Path | None

    @staticmethod
    def find(need_aarch64: bool, need_cuda: bool) -> "Toolchain":
        spec = importlib.util.find_spec("torch")  # locates torch without importing it
        if spec is None or not spec.submodule_search_locations:
            raise FixtureError("torch is not installed in this Python; run `pip install torch==2.13.0`")
        torch_dir = Path(next(iter(spec.submodule_search_locations)))
        if not (torch_dir / "include" / "torch" / "library.h").is_file():
            raise FixtureError(f"no torch C++ headers under {torch_dir / 'include'}")
        python_include = Path(sysconfig.get_paths()["include"])
        if not (python_include / "Python.h").is_file():
            raise FixtureError(f"Python.h not found in {python_include}")
        tools = {n: which(n) for n in ("g++", "gcc", "strip", "objdump")}
        missing = [n for n, p in tools.items() if p is None]
        if missing:
            raise FixtureError(f"missing tools: {', '.join(missing)}")
        a_cxx = which("aarch64-linux-gnu-g++")
        a_cc = which("aarch64-linux-gnu-gcc")
        a_strip = which("aarch64-linux-gnu-strip")
        if need_aarch64 and not (a_cxx and a_cc and a_strip):
            raise FixtureError(
                "the aarch64 cross compiler is missing: apt-get update && apt-get install -y g++-aarch64-linux-gnu"
            )
        nvcc = which("nvcc", "/usr/local/cuda/bin/nvcc")
        cuda_lib: Path | None = None
        if nvcc:
            for cand in (Path(os.path.realpath(nvcc)).parent.parent, Path("/usr/local/cuda")):
                for sub in ("lib64", "lib", "targets/x86_64-linux/lib"):
                    if (cand / sub / "libcudart.so").exists():
                        cuda_lib = cand / sub
                        break
                if cuda_lib:
                    break
        if need_cuda and not (nvcc and cuda_lib):
            raise FixtureError("nvcc or libcudart.so not found; install the CUDA toolkit or pass --skip-cuda")
        return Toolchain(
            torch_dir=torch_dir,
            python_include=python_include,
            cxx=str(tools["g++"]),
            cc=str(tools["gcc"]),
            strip=str(tools["strip"]),
            objdump=str(tools["objdump"]),
            aarch64_cxx=a_cxx,
            aarch64_cc=a_cc,
            aarch64_strip=a_strip,
            aarch64_objdump=which("aarch64-linux-gnu-objdump"),
            nvcc=nvcc,
            cuda_lib=cuda_lib,
        )


def _prefix_maps(tc: Toolchain) -> list[str]:
    # No -g, so only __FILE__ (TORCH_CHECK messages) can carry paths: make them
    # independent of where the checkout and the venv live.
    return [
        f"-ffile-prefix-map={SRC}=examples/src",
        f"-ffile-prefix-map={tc.torch_dir}=torch",
        f"-ffile-prefix-map={tc.python_include}=python",
    ]


def compile_variant(kernel: Kernel, variant: Variant, tc: Toolchain, work: Path) -> Path:
    """Compile one variant's extension; return the stripped .so (in work)."""
    ops_id = kernel.ops_id()
    base = SRC / kernel.name
    wdir = work / kernel.name / variant.name
    if wdir.exists():
        shutil.rmtree(wdir)
    wdir.mkdir(parents=True)
    aarch64 = variant.kind == CPU_AARCH64
    cxx = tc.aarch64_cxx if aarch64 else tc.cxx
    cc = tc.aarch64_cc if aarch64 else tc.cc
    strip = tc.aarch64_strip if aarch64 else tc.strip
    assert cxx and cc and strip
    common = ["-O2", "-fPIC", f"-DKERNEL_NS={ops_id}", *_prefix_maps(tc)]
    cxx_flags = ["-std=c++17", *common, "-D_GLIBCXX_USE_CXX11_ABI=1"]
    if kernel.shim:
        cxx_flags += ["-isystem", str(SRC / "common" / "shim")]
    cxx_flags += ["-isystem", str(tc.torch_dir / "include")]
    cpp = list(kernel.cpp_sources) + (list(kernel.cuda_cpp_sources) if variant.kind == CUDA_X86 else [])
    objects: list[Path] = []
    for i, src in enumerate(cpp):
        obj = wdir / f"{i:02d}-{Path(src).stem}.o"
        run([cxx, *cxx_flags, "-c", src, "-o", obj], cwd=base)
        objects.append(obj)
    pyinit_obj = wdir / "pyinit.o"
    run([cc, *common, "-I", tc.python_include, "-c", kernel.pyinit, "-o", pyinit_obj], cwd=base)
    objects.append(pyinit_obj)
    libs: list[str] = []
    if variant.kind == CUDA_X86:
        assert tc.nvcc and tc.cuda_lib
        for i, src in enumerate(kernel.cu_sources):
            obj = wdir / f"cu{i:02d}-{Path(src).stem}.o"
            gencode = [f"-gencode=arch=compute_{a.replace('.', '')},code=sm_{a.replace('.', '')}" for a in CUDA_ARCHS]
            run([tc.nvcc, "-O2", "-Xcompiler", "-fPIC", "-std=c++17", *gencode, "-c", src, "-o", obj], cwd=base)
            objects.append(obj)
        libs += ["-L", str(tc.cuda_lib), "-lcudart"]
    if aarch64:
        stubs = wdir / "stubs"
        stubs.mkdir()
        for soname in TORCH_SONAMES:
            run([cc, "-shared", "-fPIC", f"-Wl,-soname,{soname}", "-o", stubs / soname, SRC / "common" / "stub.c"])
        torch_lib = stubs
    else:
        torch_lib = tc.torch_dir / "lib"
    so = wdir / kernel.so_name()
    # --no-as-needed: keep every torch library as NEEDED, as real kernels do.
    # No rpath: torch is loaded (by `import torch`) before the extension.
    run(
        [
            cxx,
            "-shared",
            "-o",
            so,
            *objects,
            "-Wl,--no-as-needed",
            "-L",
            torch_lib,
            "-lc10",
            "-ltorch",
            "-ltorch_cpu",
            *libs,
            "-Wl,--as-needed",
        ]
    )
    run([strip, "--strip-unneeded", so])
    so.chmod(0o755)
    return so


# --------------------------------------------------------------------------
# ELF checks (objdump / readelf output; no kernel code is loaded)
# --------------------------------------------------------------------------

_ELF_MACHINES = {62: "x86_64", 183: "aarch64"}
_VERSION_RE = re.compile(r"\b(GLIBCXX|GLIBC|CXXABI)_([0-9]+(?:\.[0-9]+)*)\b")


@dataclasses.dataclass
class ElfReport:
    machine: str
    needed: list[str]
    rpath: list[str]
    max_versions: dict[str, tuple[int, ...]]
    undefined: set[str]


def elf_report(path: Path, objdump: str) -> ElfReport:
    with path.open("rb") as f:
        ident = f.read(20)
    if ident[:4] != b"\x7fELF" or ident[4] != 2 or ident[5] != 1:
        raise FixtureError(f"{path}: not a 64-bit little-endian ELF file")
    machine = _ELF_MACHINES.get(int.from_bytes(ident[18:20], "little"), "unknown")
    dyn = run([objdump, "-p", path])
    needed = re.findall(r"^\s*NEEDED\s+(\S+)", dyn, re.M)
    rpath = re.findall(r"^\s*(?:RPATH|RUNPATH)\s+(\S+)", dyn, re.M)
    symbols = run([objdump, "-T", path])
    max_versions: dict[str, tuple[int, ...]] = {}
    undefined: set[str] = set()
    for line in symbols.splitlines():
        if "*UND*" not in line:
            continue
        parts = line.split()
        if parts:
            undefined.add(parts[-1])
        for fam, ver in _VERSION_RE.findall(line):
            v = tuple(int(x) for x in ver.split("."))
            if v > max_versions.get(fam, ()):
                max_versions[fam] = v
    return ElfReport(machine, needed, rpath, max_versions, undefined)


def fmt_versions(r: ElfReport) -> str:
    return ", ".join(f"{k}_{'.'.join(map(str, v))}" for k, v in sorted(r.max_versions.items()))


def check_binary(kernel: Kernel, variant: Variant, so: Path, objdump: str) -> str:
    """Verify what each fixture is for; return a one-line summary."""
    r = elf_report(so, objdump)
    problems: list[str] = []
    want_machine = "aarch64" if variant.kind == CPU_AARCH64 else "x86_64"
    if r.machine != want_machine:
        problems.append(f"machine {r.machine}, want {want_machine}")
    for soname in TORCH_SONAMES:
        if soname not in r.needed:
            problems.append(f"{soname} not NEEDED")
    if variant.kind == CUDA_X86 and not any(n.startswith("libcudart.so.") for n in r.needed):
        problems.append("libcudart.so.* not NEEDED")
    if any(p.startswith("/") or "/" in p.replace("$ORIGIN", "") for p in r.rpath):
        problems.append(f"rpath {r.rpath}")
    too_new = [
        f"{fam}_{'.'.join(map(str, v))}"
        for fam, v in r.max_versions.items()
        if fam in MANYLINUX_2_28 and v > MANYLINUX_2_28[fam]
    ]
    if kernel.needs_glibc_2_32:
        if r.max_versions.get("GLIBC", ()) < (2, 32) or "__libc_single_threaded" not in r.undefined:
            problems.append("expected __libc_single_threaded@GLIBC_2.32")
    elif too_new:
        problems.append(f"too new for manylinux_2_28: {', '.join(too_new)}")
    if kernel.not_abi3 and "PyUnicode_AsUTF8" not in r.undefined:
        problems.append("expected an undefined PyUnicode_AsUTF8")
    if not kernel.not_abi3 and "PyUnicode_AsUTF8" in r.undefined:
        problems.append("unexpected PyUnicode_AsUTF8 (not abi3)")
    if problems:
        raise FixtureError(f"{kernel.name}/{variant.name}/{so.name}: " + "; ".join(problems))
    return f"{kernel.name}/{variant.name}: {so.stat().st_size} bytes, {r.machine}, {fmt_versions(r)}"


def compile_all(kernels: Iterable[Kernel], skip_cuda: bool, prebuilt: Path, work: Path) -> None:
    """Compile every selected compiled variant and put it under prebuilt/."""
    jobs = [(k, v) for k in kernels if k.compiled for v in selected_variants(k, skip_cuda)]
    tc = Toolchain.find(
        need_aarch64=any(v.kind == CPU_AARCH64 for _, v in jobs),
        need_cuda=any(v.kind == CUDA_X86 for _, v in jobs),
    )
    log(f"compiling {len(jobs)} variants against {tc.torch_dir} ...")
    results: dict[tuple[str, str], Path] = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1)) as pool:
        futures = {pool.submit(compile_variant, k, v, tc, work): (k, v) for k, v in jobs}
        for fut in concurrent.futures.as_completed(futures):
            k, v = futures[fut]
            results[(k.name, v.name)] = fut.result()
    for k, v in jobs:
        so = results[(k.name, v.name)]
        objdump = tc.aarch64_objdump if v.kind == CPU_AARCH64 and tc.aarch64_objdump else tc.objdump
        log("  " + check_binary(k, v, so, objdump))
        dest_dir = prebuilt / k.name / v.name
        if dest_dir.exists():
            shutil.rmtree(dest_dir)
        write_file(dest_dir / so.name, so.read_bytes(), executable=True)


# --------------------------------------------------------------------------
# Assembling repositories
# --------------------------------------------------------------------------


def _source_file(kernel: Kernel, commit: Commit, rel: str) -> Path:
    overlay = SRC / kernel.name / f"v{commit.label}" / rel
    return overlay if overlay.is_file() else SRC / kernel.name / rel


def prebuilt_binary(kernel: Kernel, variant: Variant, prebuilt: Path) -> Path:
    """The committed (or freshly compiled) .so of a variant; an error names a stale one."""
    so = prebuilt / kernel.name / variant.name / kernel.so_name()
    if not so.is_file():
        present = sorted(p.name for p in so.parent.glob("*.so")) if so.parent.is_dir() else []
        shown = so.relative_to(ROOT) if so.is_relative_to(ROOT) else so
        raise FixtureError(
            f"prebuilt binary missing: {shown}"
            + (f" (found {', '.join(present)}: the sources changed since it was built)" if present else "")
            + "; run `python scripts/build_fixtures.py` (compile mode) to refresh examples/prebuilt/"
        )
    return so


def variant_files(kernel: Kernel, variant: Variant, commit: Commit, prebuilt: Path) -> dict[str, tuple[bytes, bool]]:
    """{path relative to the variant folder: (bytes, executable)}, metadata.json aside."""
    files: dict[str, tuple[bytes, bool]] = {}
    pkg_prefix = "" if kernel.layout == "flat" else f"{kernel.pkg}/"
    ext = SRC / kernel.name / "torch-ext"
    for src in sorted(ext.rglob("*")):
        if src.is_file() and "__pycache__" not in src.parts and src.suffix != ".pyc":
            rel = src.relative_to(ext).as_posix()
            files[pkg_prefix + rel] = (_source_file(kernel, commit, f"torch-ext/{rel}").read_bytes(), False)
    if variant.compiled:
        ops_id = kernel.ops_id()
        ops_py = (SRC / "common" / "_ops.py.in").read_text().replace("@OPS_NAME@", ops_id)
        files[pkg_prefix + "_ops.py"] = (ops_py.encode(), False)
        so = prebuilt_binary(kernel, variant, prebuilt)
        files[pkg_prefix + so.name] = (so.read_bytes(), True)
    if kernel.layout == "flat":
        files[f"{kernel.pkg}/__init__.py"] = ((SRC / "common" / "compat_init.py").read_bytes(), False)
    return dict(sorted(files.items()))


def metadata_json(kernel: Kernel, variant: Variant, commit: Commit, digest: dict[str, str]) -> bytes:
    upstream = UPSTREAM.format(name=kernel.name)
    meta = {
        "name": kernel.name,
        "id": kernel.ops_id(),
        "version": commit.major,
        "license": kernel.license,
        "upstream": upstream,
        "source": f"{upstream}/tree/v{commit.label}",
        "python-depends": [],
        "kernel-depends": [],
        "backend": variant.backend,
        "digest": {"algorithm": "sha256", "files": digest},
    }
    return (json.dumps(meta, indent=2) + "\n").encode()


def _git_env(date: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_AUTHOR_NAME=AUTHOR_NAME,
        GIT_AUTHOR_EMAIL=AUTHOR_EMAIL,
        GIT_COMMITTER_NAME=AUTHOR_NAME,
        GIT_COMMITTER_EMAIL=AUTHOR_EMAIL,
        LC_ALL="C",
        TZ="UTC",
    )
    if date:
        env.update(GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date)
    return env


_GIT_CONFIG = [
    "-c",
    "commit.gpgsign=false",
    "-c",
    "tag.gpgSign=false",
    "-c",
    "core.autocrlf=false",
    "-c",
    "core.fileMode=true",
    "-c",
    "init.defaultBranch=main",
    "-c",
    "gc.auto=0",
]


def git(repo: Path, *args: str, date: str | None = None) -> str:
    return run(["git", *_GIT_CONFIG, *args], cwd=repo, env=_git_env(date)).strip()


def _clear_worktree(repo: Path) -> None:
    for child in repo.iterdir():
        if child.name == ".git":
            continue
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


def assemble(kernel: Kernel, out: Path, prebuilt: Path, skip_cuda: bool) -> dict[str, object]:
    """(Re)create OUT/<name> as a git repository; return its manifest entry."""
    repo = out / kernel.name
    if repo.exists():
        shutil.rmtree(repo)
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    variants = selected_variants(kernel, skip_cuda)
    commits: list[dict[str, object]] = []
    for commit in kernel.commits:
        _clear_worktree(repo)
        write_file(repo / "README.md", _source_file(kernel, commit, "README.md").read_bytes())
        for variant in variants:
            vdir = repo / "build" / variant.name
            for rel, (data, executable) in variant_files(kernel, variant, commit, prebuilt).items():
                write_file(vdir / rel, data, executable)
            write_file(vdir / "metadata.json", metadata_json(kernel, variant, commit, variant_digest(vdir)))
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", f"{kernel.name} {commit.label}", date=commit.date)
        sha = git(repo, "rev-parse", "HEAD")
        if commit.tag:
            git(repo, "tag", commit.tag, sha)
        commits.append({"label": commit.label, "sha": sha, "date": commit.date, "tag": commit.tag})
    head = git(repo, "rev-parse", "HEAD")
    for branch in kernel.branches:
        git(repo, "branch", "-f", branch, head)
    tags = {c["tag"]: c["sha"] for c in commits if c["tag"]}
    branches = {b: head for b in ("main", *kernel.branches)}
    return {
        "layout": kernel.layout,
        "package": kernel.pkg,
        "id": kernel.ops_id(),
        "variants": [v.name for v in variants],
        "commits": commits,
        "tags": tags,
        "branches": branches,
        "commit-count": {ref: len(kernel.commits) for ref in branches},
    }


def assemble_all(
    kernels: Sequence[Kernel], out: Path, prebuilt: Path, skip_cuda: bool, verbose: bool = True
) -> dict[str, object]:
    # Every binary must be there before any repository is touched.
    for kernel in kernels:
        for variant in selected_variants(kernel, skip_cuda):
            if variant.compiled:
                prebuilt_binary(kernel, variant, prebuilt)
    out.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, object] = {}
    for kernel in kernels:
        manifest[kernel.name] = assemble(kernel, out, prebuilt, skip_cuda)
        entry = manifest[kernel.name]
        assert isinstance(entry, dict)
        refs = ", ".join([*entry["tags"], *(b for b in entry["branches"] if b != "main")])
        if verbose:
            log(f"  {out / kernel.name}: {', '.join(entry['variants'])}; {refs}")
    # Merge with what is already there (a run with --only keeps the others).
    manifest_path = out / "fixtures.json"
    previous: dict[str, object] = {}
    if manifest_path.is_file():
        try:
            loaded = json.loads(manifest_path.read_text())
            previous = {k: v for k, v in loaded.items() if (out / k).is_dir()}
        except (ValueError, AttributeError):
            previous = {}
    previous.update(manifest)
    manifest_path.write_text(json.dumps(dict(sorted(previous.items())), indent=2) + "\n")
    return manifest


# --------------------------------------------------------------------------
# --check: compare a fresh build's repositories with the committed ones
# --------------------------------------------------------------------------


def repo_shape(repo: Path) -> dict[str, object]:
    """Refs, commit counts and per-ref file trees; binary bytes and their digests masked."""
    refs = git(repo, "for-each-ref", "--format=%(refname)").splitlines()
    shape: dict[str, object] = {}
    for ref in sorted(refs):
        count = git(repo, "rev-list", "--count", ref)
        entries = git(repo, "ls-tree", "-r", ref).splitlines()
        tree: dict[str, str] = {}
        for entry in entries:
            info, path = entry.split("\t", 1)
            mode, _kind, blob = info.split()
            if path.endswith(".so"):
                tree[path] = mode
            elif path.endswith("metadata.json"):
                meta = json.loads(git(repo, "cat-file", "blob", blob))
                files = meta["digest"]["files"]
                meta["digest"]["files"] = {p: ("<binary>" if p.endswith(".so") else h) for p, h in files.items()}
                tree[path] = mode + " " + json.dumps(meta, sort_keys=True)
            else:
                tree[path] = mode + " " + blob
        shape[ref] = {"commits": count, "tree": tree}
    return shape


def check(kernels: Sequence[Kernel], skip_cuda: bool, prebuilt: Path = PREBUILT) -> int:
    with tempfile.TemporaryDirectory(prefix="kf-fixtures-check-") as tmp_s:
        tmp = Path(tmp_s)
        fresh_prebuilt = tmp / "prebuilt"
        compile_all(kernels, skip_cuda, fresh_prebuilt, tmp / "work")
        for k in kernels:  # noarch kernels need no binaries
            (fresh_prebuilt / k.name).mkdir(parents=True, exist_ok=True)
        log("assembling from the fresh build and from examples/prebuilt ...")
        assemble_all(kernels, tmp / "fresh", fresh_prebuilt, skip_cuda, verbose=False)
        try:
            assemble_all(kernels, tmp / "committed", prebuilt, skip_cuda, verbose=False)
        except FixtureError as exc:
            log(f"FAIL: {exc}")
            return 1
        same = differ = 0
        for k in kernels:
            for v in selected_variants(k, skip_cuda):
                if v.compiled:
                    fresh_so = prebuilt_binary(k, v, fresh_prebuilt).read_bytes()
                    committed_so = prebuilt_binary(k, v, prebuilt).read_bytes()
                    same, differ = (same + 1, differ) if fresh_so == committed_so else (same, differ + 1)
        log(f"binaries: {same} byte-identical to examples/prebuilt, {differ} differ (allowed)")
        failures = 0
        for k in kernels:
            a = repo_shape(tmp / "fresh" / k.name)
            b = repo_shape(tmp / "committed" / k.name)
            if a != b:
                failures += 1
                log(f"FAIL: {k.name}: the fresh build's layout differs from examples/prebuilt")
                for line in _diff_shapes(b, a):
                    log("    " + line)
        if failures:
            return 1
        log(f"OK: {len(kernels)} fixtures compile and match examples/prebuilt")
        return 0


def _diff_shapes(old: Mapping[str, object], new: Mapping[str, object]) -> list[str]:
    lines: list[str] = []
    for ref in sorted(set(old) | set(new)):
        if ref not in old or ref not in new:
            lines.append(f"{ref}: only in {'fresh' if ref in new else 'committed'}")
            continue
        o, n = old[ref], new[ref]
        assert isinstance(o, dict) and isinstance(n, dict)
        if o["commits"] != n["commits"]:
            lines.append(f"{ref}: {o['commits']} commits committed, {n['commits']} fresh")
        for path in sorted(set(o["tree"]) | set(n["tree"])):
            if o["tree"].get(path) != n["tree"].get(path):
                lines.append(f"{ref}: {path} differs")
    return lines[:40]


# --------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="build_fixtures.py",
        description="Build the example kernel repositories (git, Hub layout) used by tests and the demo.",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        help="folder for the repositories, one per kernel (default: examples/repos)",
    )
    p.add_argument(
        "--only",
        nargs="+",
        metavar="NAME",
        choices=sorted(KERNELS),
        help=f"build only these fixtures ({', '.join(KERNELS)})",
    )
    p.add_argument("--skip-cuda", action="store_true", help="leave out the CUDA variant (no nvcc needed)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument(
        "--from-prebuilt",
        action="store_true",
        help="assemble from examples/prebuilt without compiling (fast; needs only git)",
    )
    mode.add_argument(
        "--check",
        action="store_true",
        help="compile into a temporary folder and verify it matches examples/prebuilt; writes nothing",
    )
    p.add_argument("--prebuilt", type=Path, default=PREBUILT, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    _digest_self_test()
    kernels = [KERNELS[n] for n in (args.only or KERNELS)]
    start = time.monotonic()
    try:
        if args.check:
            rc = check(kernels, args.skip_cuda, args.prebuilt)
        else:
            if not args.from_prebuilt:
                with tempfile.TemporaryDirectory(prefix="kf-fixtures-") as work:
                    compile_all(kernels, args.skip_cuda, args.prebuilt, Path(work))
            log(f"assembling {len(kernels)} repositories in {args.out} ...")
            assemble_all(kernels, args.out.resolve(), args.prebuilt, args.skip_cuda)
            rc = 0
    except FixtureError as exc:
        print(f"build_fixtures: {exc}", file=sys.stderr)
        return 1
    log(f"done in {time.monotonic() - start:.1f} s")
    return rc


if __name__ == "__main__":
    sys.exit(main())
