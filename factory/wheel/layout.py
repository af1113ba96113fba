"""Where a build variant's files go in its wheel, and how a consumer maps the wheel's files back.

A wheel holds the variant folder ``build/<variant>/`` byte for byte under one folder, the *variant root*, which
the provenance names (``VARIANT_ROOT``), so a consumer maps ``<root>/<rel>`` back without guessing. The root of
each layout (flat, nested, zip) and why: docs/convert.md, "What a wheel holds and why". Wheels made before the
root was recorded held the package folder: ``legacy_map`` maps them back where their files are the variant's."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from ..errors import BadKernel
from ..record import VARIANT_ROOT, read_provenance
from ..verify.digest import TOP_META

LAYOUT = "layout"  #: provenance key: "flat", "nested" or "zip"
REBUILD = "rebuild it with this kernel-factory (to-wheel or build), which keeps the variant byte for byte"


@dataclass(frozen=True)
class FileEntry:
    rel: str  # path inside the variant folder, with '/'
    path: Path  # where to read it (a symlink's target inside the folder)
    executable: bool


@dataclass(frozen=True)
class Layout:
    kind: str  # "flat", "nested" or "zip"
    package: str  # the import package name
    root: str  # the wheel folder that holds the variant folder
    files: tuple[FileEntry, ...]  # rel = the wheel entry name, "<root>/<rel in the variant>"
    path_file: tuple[str, bytes] | None = None  # (name, bytes) of the .pth that puts the root on sys.path


def root_name(dist: str) -> str:
    """The variant root of a nested or zip build: ``_<dist>_kernel`` (an identifier, private by its underscore,
    one per distribution, so two kernels never share it)."""
    return f"_{canonicalize_name(dist).replace('-', '_')}_kernel"


def find_layout(files: list[FileEntry], raw_meta: bytes | None, name: str | None, repo_name: str, dist: str,
                where: str) -> Layout:
    """The layout of a variant folder's ``files`` (every file, metadata.json included) and where each goes."""
    rels = {f.rel for f in files}
    packages = sorted({r.split("/", 1)[0] for r in rels if r.count("/") == 1 and r.endswith("/__init__.py")})
    wanted = (name or repo_name).replace("-", "_")
    named = wanted if wanted in packages else (packages[0] if len(packages) == 1 else "")  # the package folder meant
    fields = read_provenance(raw_meta)[0] or {}  # metadata.json's object, already checked by verify.metadata.parse
    build_layout = fields.get("build-layout", "files")
    if build_layout == "zip":
        kernel_id = fields.get("id")
        if not isinstance(kernel_id, str) or f"{kernel_id}.zip" not in rels:
            archive = f"{kernel_id}.zip" if isinstance(kernel_id, str) else "<id>.zip"
            raise BadKernel(f"{where}: metadata.json says build-layout \"zip\" but the folder has no {archive}; "
                            "rebuild it with kernel-builder")
        kind, package, root = "zip", wanted, root_name(dist)
    elif build_layout != "files":
        raise BadKernel(f"{where}: metadata.json build-layout {str(build_layout)[:40]!r} is not \"files\" or \"zip\"; "
                        "upgrade kernel-factory or rebuild the kernel")
    elif "__init__.py" in rels:
        compat = named and _reexports(next(f for f in files if f.rel == f"{named}/__init__.py"))
        kind, package = "flat", named if compat else wanted
        root = package
    elif packages:
        if not named:
            raise BadKernel(f"{where}: several packages ({', '.join(packages)}) and none named {wanted!r}; "
                            "set metadata.json 'name' to the package's name")
        kind, package, root = "nested", named, root_name(dist)
        _no_startup_hook(rels, where)
    else:
        raise BadKernel(f"{where}: no __init__.py at the top or in a package folder; "
                        "this is not a kernel build (rebuild it with kernel-builder)")
    if not package.isidentifier():
        raise BadKernel(f"{where}: {package!r} is not a valid Python package name; set metadata.json 'name'")
    moved = tuple(FileEntry(f"{root}/{f.rel}", f.path, f.executable) for f in files)
    path_file = (f"{root}.pth", f"{root}\n".encode()) if kind == "nested" else None
    return Layout(kind, package, root, moved, path_file)


_STARTUP = ("sitecustomize", "usercustomize")  # what Python imports from sys.path at every start


def _no_startup_hook(rels: set[str], where: str) -> None:
    """A nested build's root goes on sys.path (its .pth): nothing at its top may be a module Python imports at every
    start (``sitecustomize``, ``usercustomize``, as a file or a folder). BadKernel otherwise."""
    for rel in sorted(rels):
        top = rel.split("/", 1)[0]
        if top.split(".", 1)[0] in _STARTUP:
            raise BadKernel(f"{where}: {top!r} at the top of a nested build would run at every Python start once its "
                            "folder is on sys.path; remove it from the build")


def _reexports(init: FileEntry) -> bool:
    """A compat ``__init__.py`` only imports from its parent package."""
    if init.path.stat().st_size > 4096:
        return False
    code = [ln.strip() for ln in init.path.read_text("utf-8", "replace").splitlines()]
    code = [ln for ln in code if ln and not ln.startswith("#")]
    return bool(code) and all(ln.startswith(("from ..", "import ", '"""', "__all__")) for ln in code)


# -- consumers: wheel members -> build/<variant>/ ----------------------------------------------------------------


class NotMappable(ValueError):
    """The wheel's files cannot be laid out as the variant's digest describes (the message says why and the fix)."""


def recorded_root(prov: Mapping[str, Any]) -> str | None:
    """The variant root the provenance names, None for a wheel made before it was recorded; NotMappable for a
    value that is not one plain folder name."""
    root = prov.get(VARIANT_ROOT)
    if root is None:
        return None
    if not isinstance(root, str) or not root or "/" in root or "\\" in root or root in (".", "..") or \
            root.endswith(".dist-info") or root.endswith(".data") or not root.isprintable():
        raise NotMappable(f"its provenance names the variant root {str(root)[:80]!r}, which is not one folder of the "
                          "wheel; rebuild it")
    return root


def root_of(prov: Mapping[str, Any]) -> str | None:
    """The wheel folder whose files are mapped: the recorded root, else (an older wheel) its package folder."""
    root = recorded_root(prov)
    if root is not None:
        return root
    package = prov.get("package")
    return package if isinstance(package, str) and package.isidentifier() else None


def legacy_map(package: str, rels: Iterable[str], metadata: bytes | None) -> dict[str, str]:
    """For a wheel without a recorded root: its package folder's files (``rels``, relative to ``<package>/``) ->
    their paths in build/<variant>/. Such a wheel held a flat build's package folder without the compat
    subfolder, or a nested build's package folder with metadata.json moved into it. The one mapping whose
    files are the digest's is taken; NotMappable where none is (a file the digest lists is not in the wheel).
    Without a digest, the files go where they are (as before)."""
    rels = sorted(rels)
    # metadata.json read as a provenance file is: where it is not a JSON object, there is no digest to map by
    digest = (read_provenance(metadata)[0] or {}).get("digest")
    listed = digest.get("files") if isinstance(digest, dict) else None
    if not isinstance(listed, dict):
        return {rel: rel for rel in rels}
    want = set(listed)
    flat = {rel: rel for rel in rels}
    nested = {rel: rel if rel in TOP_META else f"{package}/{rel}" for rel in rels}
    mapping = flat if "__init__.py" in want else nested  # the digest says which the variant was
    have = {v for v in mapping.values() if v not in TOP_META}
    if have == want:
        return mapping
    missing, extra = sorted(want - have), sorted(have - want)
    what = f"left {missing[0]} (listed in the variant's digest) out of the wheel" if missing else \
        f"put {extra[0]} (not in the variant's digest) in the wheel"
    raise NotMappable(f"it was made by an older kernel-factory that {what}, so kernels 0.18+ refuse it; {REBUILD}")


def entry_files(fields: Mapping[str, Any]) -> tuple[str, ...]:
    """The files, relative to the variant folder, one of which kernels imports the kernel from (its importer:
    ``__init__.py``, else ``<python name>/__init__.py``; ``<id>.zip`` for the zip layout)."""
    if fields.get("build-layout") == "zip":
        return (f"{fields.get('id')}.zip",)
    name = fields.get("name")
    return ("__init__.py",) + ((f"{name.replace('-', '_')}/__init__.py",) if isinstance(name, str) else ())


def member_map(prov: Mapping[str, Any], names: Iterable[str], metadata: bytes | None) -> dict[str, str]:
    """Wheel member name -> path in build/<variant>/, for the members below the root (``root_of``).
    ``metadata``: the bytes of ``<root>/metadata.json`` (read for an older wheel's digest). NotMappable."""
    root = root_of(prov)
    if root is None:
        raise NotMappable("its provenance names neither a variant root nor a package; rebuild it")
    below = {n: n[len(root) + 1:] for n in names if n.startswith(root + "/") and not n.endswith("/")}
    if recorded_root(prov) is not None:
        return below
    legacy = legacy_map(root, below.values(), metadata)
    return {n: legacy[rel] for n, rel in below.items()}
