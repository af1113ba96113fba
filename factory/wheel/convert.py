"""One fetched build-variant folder -> one audited wheel, its METADATA bytes and its store Record (``convert``, a
pure function of its inputs, safe in a worker process)."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from .. import __version__
from ..audit import audit
from ..audit.elf import repair
from ..errors import BadKernel, UnsafePath
from ..nofollow import TMP_PREFIX, file_digest
from ..record import PROVENANCE, VARIANT_ROOT, Record
from ..safe_text import has_control
from ..variants import Target
from ..verify import digest
from ..verify import metadata as kernelmeta
from . import distinfo as wheel
from . import stages
from .layout import LAYOUT, FileEntry, find_layout

SMALL = 1 << 20  # files up to this size are digest-checked before anything reads them (layout, audit)


@dataclass(frozen=True)
class WheelInput:
    variant_dir: Path  # folder whose content is build/<variant>/ of the repository
    target: Target  # factory.variants.parse(variant_name)
    kernel_version: str  # "1.1.2" (no local label)
    repo_name: str  # repository name, distribution-name fallback
    repo_id: str | None  # Hub id "org/name" or None
    source: str  # where it came from (Hub id or path)
    revision: str  # commit sha (or "worktree")
    ref: str | None  # branch/tag that selected it
    commit_time: int  # Unix time of the revision
    readme: str | None  # README.md or CARD.md text
    manylinux: str = "2_28"
    accept_higher_policy: bool = False
    allow_no_digest: bool = False


def scan(root: Path, where: str) -> list[FileEntry]:
    """Every file of the variant folder, sorted; UnsafePath for escaping symlinks and bad names."""
    real_root = root.resolve()
    found: list[FileEntry] = []
    stack: list[tuple[Path, str, frozenset[Path]]] = [(root, "", frozenset({real_root}))]
    while stack:
        folder, prefix, ancestors = stack.pop()
        with os.scandir(folder) as it:
            entries = sorted(it, key=lambda e: e.name)
        for entry in entries:
            name = _entry_name(entry.name, prefix, where)
            rel = prefix + name
            path = Path(entry.path)
            if entry.is_symlink():
                target = path.resolve()
                if target != real_root and real_root not in target.parents:
                    raise UnsafePath(f"{where}/{rel} is a symlink that leaves the variant folder; replace it with "
                                     "the file itself")
                if not target.exists():
                    raise UnsafePath(f"{where}/{rel} is a dangling symlink; remove it or add its target")
            st = path.stat()
            if stat.S_ISDIR(st.st_mode):
                if digest.left_out(name, True):
                    continue
                real = path.resolve()
                if real in ancestors:
                    raise UnsafePath(f"{where}/{rel} is a symlink loop; remove the link")
                stack.append((path, rel + "/", ancestors | {real}))
            elif stat.S_ISREG(st.st_mode):
                if not digest.left_out(name, False):
                    found.append(FileEntry(rel, path, bool(st.st_mode & 0o111)))
            else:
                raise UnsafePath(f"{where}/{rel} is not a regular file or folder; remove it")
    return sorted(found, key=lambda f: f.rel)


def _entry_name(name: str, prefix: str, where: str) -> str:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        shown = name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
        raise UnsafePath(f"{where}/{prefix}{shown!r} is not a UTF-8 file name; rename it") from None
    if name in (".", "..") or "\\" in name or has_control(name):
        raise UnsafePath(f"{where}/{prefix}{name!r} cannot be a wheel entry (control character or backslash); "
                         "rename it")
    return name


def convert(inp: WheelInput, out_dir: Path) -> tuple[Path, bytes, Record]:
    """-> (wheel path inside out_dir, the METADATA bytes, the Record). Refused subclasses for bad input. The order
    of the checks and why: docs/convert.md, steps 2 and 3."""
    target = inp.target
    where = f"build/{target.variant}"
    files = scan(inp.variant_dir, where)
    meta = kernelmeta.load(inp.variant_dir, where)
    if meta.digest is None and not inp.allow_no_digest:
        raise BadKernel(f"{where}: metadata.json has no digest; rebuild the kernel, or pass --allow-no-digest")
    check = None if meta.digest is None else \
        digest.Check(meta.digest, (f.rel for f in files if f.rel not in digest.TOP_META), where)
    digest_rel = {f.path: f.rel for f in files if check is not None and f.rel in check.expected}
    if check is not None:
        with stages.timed("verify"):
            for f in files:
                if f.rel in check.expected and f.path.stat().st_size <= SMALL:
                    check.check_file(f.rel, f.path)
    name = wheel.dist_name(meta.name or inp.repo_name, where)
    layout = find_layout(files, meta.raw, meta.name, inp.repo_name, name, where)
    version = wheel.full_version(target.local_version(inp.kernel_version), where)
    # target.requires + python-depends (kernels' names mapped to packages) + the backend's extra ones
    names = list(meta.python_depends) + list(meta.python_depends_backends.get(target.backend, ()))
    requires = wheel.check_requirements([*target.requires, *kernelmeta.python_packages(names, target.backend)], where)
    metadata = wheel.metadata_bytes(
        name=name, version=version, summary=wheel.summary_of(inp.readme, name), readme=inp.readme,
        license_text=meta.license, upstream=meta.upstream, repo_id=inp.repo_id, requires_dist=requires,
    )
    dist_info = wheel.dist_info_dir(name, version)
    with wheel.WheelWriter(out_dir, inp.commit_time) as ww:
        for f in sorted(layout.files, key=lambda f: f.rel):
            rel = digest_rel.get(f.path)  # every written byte is checked, small files a second time
            also = hashlib.new(check.algorithm) if check and rel and check.algorithm != "sha256" else None
            raw = ww.add_file(f.rel, f.path, f.executable, also)
            if check and rel:
                check.check(rel, also.digest() if also is not None else raw)
        if layout.path_file is not None:  # puts the root on sys.path: `import <package>` after pip install
            ww.add(*layout.path_file)
        if check is not None:
            with stages.timed("verify"):
                for f in files:  # every file is in the wheel: this finds none (kept as the guard it is)
                    if f.rel in check.unchecked:
                        check.check_file(f.rel, f.path)
        with stages.timed("audit"):
            result = audit([(f.rel, f.path) for f in files], target, inp.manylinux, inp.accept_higher_policy,
                           where)
        tag = f"{target.python_tag}-{target.abi_tag}-{result.platform}"
        base_tag = tag if not result.graft else target.tag
        filename = wheel.wheel_filename(name, version, tag)
        provenance: dict[str, object] = {
            "repo_id": inp.repo_id, "revision": inp.revision, "ref": inp.ref, "variant": target.variant,
            "digest": {"algorithm": (meta.digest or {}).get("algorithm"), "hash": meta.digest_hash},
            "factory_version": __version__, "package": layout.package, "name": meta.name,
            "kernel_version": inp.kernel_version, "kernel-depends": list(meta.kernel_depends),
            VARIANT_ROOT: layout.root, LAYOUT: layout.kind,
        }
        if inp.repo_id is None or inp.source != inp.repo_id:
            provenance["source"] = inp.source
        ww.add(f"{dist_info}/METADATA", metadata)
        ww.add(f"{dist_info}/WHEEL", wheel.wheel_bytes(base_tag))
        ww.add(f"{dist_info}/{PROVENANCE}", wheel.provenance_bytes(provenance))
        dest = out_dir / filename
        if not result.graft:
            ww.finish(dist_info, dest)
            sha = ww.sha256  # hashed as it was written
        else:
            staging = Path(tempfile.mkdtemp(prefix=TMP_PREFIX, dir=out_dir))
            try:
                plain = staging / wheel.wheel_filename(name, version, base_tag)
                ww.finish(dist_info, plain)
                os.replace(repair(plain, staging, result.platform, where), dest)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
            sha = file_digest(dest)  # auditwheel wrote this one
    size = dest.stat().st_size
    record = Record(
        filename=filename, name=name, version=version, sha256=sha, size=size,
        metadata_sha256=hashlib.sha256(metadata).hexdigest(), requires_python=wheel.REQUIRES_PYTHON,
        upload_time=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(inp.commit_time)),
        summary=wheel.summary_of(inp.readme, name), requires_dist=requires, kernel_version=inp.kernel_version,
        label=target.label, variant=target.variant, repo_id=inp.repo_id, source=inp.source,
        revision=inp.revision, ref=inp.ref, backend=target.backend, backend_version=target.backend_version,
        framework=target.framework, framework_version=target.framework_version, os=target.os, arch=target.arch,
        platform_tag=result.platform, archs=meta.archs, license=meta.license, upstream=meta.upstream,
        import_name=layout.package if layout.kind != "zip" else None, digest=meta.digest_hash,
        factory_version=__version__, extra={VARIANT_ROOT: layout.root},
    )
    return dest, metadata, record
