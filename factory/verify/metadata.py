"""Read and validate a variant's metadata.json (kebab-case keys, as kernel-builder writes them), safe against
hostile input: a size cap, no NaN/Infinity, deep nesting is BadKernel rather than RecursionError."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import BadKernel
from ..record import read_provenance
from ..store.check import depth

MAX_BYTES = 32 << 20  # a digest of tens of thousands of files stays far below this
MAX_DEPTH = 16  # metadata.json nests 3-4 levels deep
# The kernels whose Metadata reads backend type "agnostic" (0.18.3 refuses it; no 0.19.0 is served).
AGNOSTIC_SINCE = (0, 19, 1)
_MINVER = re.compile(r"[0-9]{1,9}(?:\.[0-9]{1,9}){0,3}")
# kernels' python-depends table, what a name in ``python-depends`` means as pip requirements: python_depends.json, a
# byte copy of the table PYDEPENDS_SOURCE names (private in kernels, absent from kernels-data), shipped as package
# data so the wheels written do not depend on the kernels installed beside the factory (docs/architecture.md).
PYDEPENDS_SOURCE = "kernels 0.19.1, kernels/_internals/python_depends.json"
PYDEPENDS_SHA256 = "3e412c32521bdcc6bd3379e2dfc7c3cf45c725419580d8852760183a6612a914"


@dataclass(frozen=True)
class KernelMeta:
    """The fields of metadata.json the factory uses; ``raw`` is the original bytes."""

    raw: bytes | None = None
    name: str | None = None
    version: int | None = None
    license: str | None = None
    upstream: str | None = None
    python_depends: tuple[str, ...] = ()
    python_depends_backends: dict[str, tuple[str, ...]] = field(default_factory=dict)
    kernel_depends: tuple[Any, ...] = ()
    backend_type: str | None = None
    archs: tuple[str, ...] = ()
    digest: dict[str, Any] | None = None
    kernels_minver: str | None = None  # "0.19.0": the oldest kernels that loads this variant (kernels 0.19+)
    source: str | None = None

    @property
    def digest_hash(self) -> str | None:
        """"sha256:<hex>" of the canonical JSON of the digest object, or None without one."""
        if self.digest is None:
            return None
        canonical = json.dumps(self.digest, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def parse(raw: bytes, where: str) -> KernelMeta:
    """Validate metadata.json bytes; BadKernel names the bad key and the fix."""
    fix = "fix metadata.json or rebuild the kernel with kernel-builder"
    if len(raw) > MAX_BYTES:
        raise BadKernel(f"{where}: metadata.json is {len(raw)} bytes (limit {MAX_BYTES}); {fix}")
    try:
        data = json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
    except RecursionError:
        raise BadKernel(f"{where}: metadata.json nests too deeply; {fix}") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise BadKernel(f"{where}: metadata.json is not valid UTF-8 JSON ({exc}); {fix}") from None
    if not isinstance(data, dict):
        raise BadKernel(f"{where}: metadata.json must hold a JSON object, not {type(data).__name__}; {fix}")
    if depth(data, MAX_DEPTH) > MAX_DEPTH:
        raise BadKernel(f"{where}: metadata.json nests more than {MAX_DEPTH} levels deep; {fix}")

    def typed(key: str, kind: type | tuple[type, ...], label: str) -> Any:
        value = data.get(key)
        if value is None:
            return None
        if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
            raise BadKernel(f"{where}: metadata.json '{key}' must be {label}, not {type(value).__name__}; {fix}")
        return value

    def strings(value: Any, key: str) -> tuple[str, ...]:
        if value is None:
            return ()
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise BadKernel(f"{where}: metadata.json '{key}' must be a list of strings; {fix}")
        return tuple(value)

    name = typed("name", str, "a string")
    if name is not None and not name.strip():
        raise BadKernel(f"{where}: metadata.json 'name' is empty; {fix}")
    backends_raw = typed("python-depends-backends", dict, "an object of backend -> list of strings") or {}
    backends = {k: strings(v, f"python-depends-backends.{k}") for k, v in backends_raw.items()}
    kernel_depends = typed("kernel-depends", list, "a list") or []
    backend = typed("backend", dict, "an object with 'type' and 'archs'") or {}
    backend_type = backend.get("type")
    if backend_type is not None and not isinstance(backend_type, str):
        raise BadKernel(f"{where}: metadata.json 'backend.type' must be a string; {fix}")
    minver = typed("kernels-minver", str, "a version such as \"0.19.0\"")
    if minver is not None and not _MINVER.fullmatch(minver):
        raise BadKernel(f"{where}: metadata.json 'kernels-minver' {minver[:40]!r} is not a version such as "
                        f"\"0.19.0\"; {fix}")
    digest = typed("digest", dict, "an object with 'algorithm' and 'files'")
    if digest is not None:
        files = digest.get("files")
        if not isinstance(digest.get("algorithm"), str) or not isinstance(files, dict):
            raise BadKernel(f"{where}: metadata.json 'digest' must have 'algorithm' and 'files'; {fix}")
        if not all(isinstance(v, str) for v in files.values()):
            raise BadKernel(f"{where}: metadata.json 'digest.files' values must be base64 strings; {fix}")
    return KernelMeta(
        raw=raw, name=name, version=typed("version", int, "an integer"), license=typed("license", str, "a string"),
        upstream=typed("upstream", str, "a string"),
        python_depends=strings(data.get("python-depends"), "python-depends"), python_depends_backends=backends,
        kernel_depends=tuple(kernel_depends), backend_type=backend_type,
        archs=strings(backend.get("archs"), "backend.archs"), digest=digest, kernels_minver=minver,
        source=typed("source", str, "a string"),
    )


def kernels_refusal(raw: bytes) -> str | None:
    """The kernels library's own message, on one line, when ``get_kernel`` would refuse this metadata.json: the
    rules of ``kernels.Metadata`` (public in kernels 0.17 to 0.19), its parser. ImportError without kernels."""
    from kernels import Metadata

    try:
        Metadata.from_bytes(raw)
    except ValueError as exc:
        return " ".join(line.strip() for line in str(exc).splitlines() if line.strip())
    return None


def _installed_kernels() -> tuple[int, ...] | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return _numbers(version("kernels"))
    except PackageNotFoundError:
        return None


def _numbers(text: str) -> tuple[int, ...] | None:
    m = re.match(r"[0-9]+(?:\.[0-9]+)*", text)
    return tuple(int(n) for n in m[0].split(".")) if m else None


def newer_kernels_hint(raw: bytes) -> str:
    """"" or, when the installed kernels is older than this build (its kernels-minver, or backend type agnostic,
    which kernels 0.19 introduced), what to upgrade: ``"; it needs kernels >= 0.19.1 and 0.17.2 is installed
    ..."``."""
    installed = _installed_kernels()
    data = read_provenance(raw)[0]  # the JSON object, read as a provenance file is; None where there is none
    if installed is None or data is None:
        return ""
    minver = data.get("kernels-minver")
    needed = _numbers(minver) if isinstance(minver, str) else None
    backend = data.get("backend")
    if isinstance(backend, dict) and backend.get("type") == "agnostic" and (needed or ()) < AGNOSTIC_SINCE:
        needed = AGNOSTIC_SINCE
    if needed is None or installed >= needed:
        return ""
    return (f"; it needs kernels >= {'.'.join(map(str, needed))} and kernels {'.'.join(map(str, installed))} is "
            "installed beside kernel-factory: pip install -U kernels")


def load(variant_dir: Path, where: str) -> KernelMeta:
    """metadata.json of a variant folder, checked by kernels' own rules; an empty KernelMeta when there is none."""
    path = variant_dir / "metadata.json"
    if not path.exists():
        return KernelMeta()
    if not path.is_file():
        raise BadKernel(f"{where}: metadata.json is not a regular file; rebuild the kernel")
    with open(path, "rb") as f:
        raw = f.read(MAX_BYTES + 1)
    meta = parse(raw, where)
    try:
        message = kernels_refusal(raw)
    except ImportError:
        raise BadKernel(f"{where}: checking metadata.json needs the kernels library; pip install kernels") from None
    if message:
        raise BadKernel(f"{where}: kernels.get_kernel would refuse this metadata.json: {message}; "
                        "fix metadata.json or rebuild the kernel with kernel-builder" + newer_kernels_hint(raw))
    return meta


@lru_cache(maxsize=1)
def pydepends_table() -> dict[str, Any]:
    """The parsed table: ``{"general": {name: info}, "backends": {backend: {name: info}}}``."""
    data = json.loads(resources.files(__package__).joinpath("python_depends.json").read_bytes())
    assert isinstance(data, dict)
    return data


def python_packages(names: Iterable[str], backend: str) -> list[str]:
    """pip requirements for python-depends ``names`` on ``backend``: a name the table knows gives its
    packages (``tvm-ffi`` -> ``apache-tvm-ffi``); any other name is kept as it is, a requirement itself."""
    general: dict[str, Any] = pydepends_table().get("general", {})
    backend_table: dict[str, Any] = pydepends_table().get("backends", {}).get(backend, {})
    reqs: list[str] = []
    for dep in names:
        info = general.get(dep) or backend_table.get(dep)
        if isinstance(info, dict):
            reqs.extend(str(p["pkg"]) for p in info.get("python", []) if isinstance(p, dict) and "pkg" in p)
        else:
            reqs.append(dep)
    return reqs
