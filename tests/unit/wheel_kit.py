"""Synthetic kernel variant folders for the wheel, audit and convert tests (no processes, no network)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import syslibs
from kernel_factory import variants
from kernel_factory.verify import digest
from kernel_factory.wheel.convert import WheelInput

LIBZ = syslibs.LIBZ or Path("/nonexistent/libz.so.1")  # a real ELF from the system, found at run time
COMMIT_TIME = 1_767_225_600  # 2026-01-01T00:00:00Z
README = "# img2grey\n\nConvert RGB images to greyscale. The op takes a tensor.\n"


def make_variant(
    root: Path,
    variant: str = "torch27-cxx11-cpu-x86_64-linux",
    *,
    layout: str = "flat",
    package: str = "img2grey",
    name: str | None = "img2grey",
    elf: Path | None = LIBZ,
    meta: dict[str, Any] | None = None,
    files: dict[str, bytes] | None = None,
    with_digest: bool = True,
) -> Path:
    """build/<variant>/ of a kernel repository, digest included."""
    vdir = root / "build" / variant
    pkg = vdir if layout == "flat" else vdir / package
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("from ._ops import ops\n")
    (pkg / "_ops.py").write_text("ops = None\n")
    if layout == "flat":
        (vdir / package).mkdir()
        (vdir / package / "__init__.py").write_text("from .. import *  # noqa: F401,F403\n")
    if elf is not None:
        dest = pkg / f"_{package}_abc123.abi3.so"
        shutil.copyfile(elf, dest)
        dest.chmod(0o755)
    for rel, data in (files or {}).items():
        (vdir / rel).parent.mkdir(parents=True, exist_ok=True)
        (vdir / rel).write_bytes(data)
    metadata: dict[str, Any] = {
        "version": 1,
        "license": "Apache-2.0",
        "upstream": "https://github.com/example/img2grey",
        "python-depends": [],
        "backend": {"type": "cpu", "archs": []},
    }
    if name is not None:
        metadata["name"] = name
        metadata["id"] = f"_{name.replace('-', '_')}_abc123"
    metadata.update(meta or {})
    if with_digest:
        metadata["digest"] = {"algorithm": "sha256", "files": digest.compute(vdir)}
    (vdir / "metadata.json").write_text(json.dumps(metadata, indent=2))
    return vdir


def wheel_input(vdir: Path, **changes: Any) -> WheelInput:
    values: dict[str, Any] = {
        "variant_dir": vdir,
        "target": variants.parse(vdir.name),
        "kernel_version": "1.1.2",
        "repo_name": "img2grey",
        "repo_id": "example/img2grey",
        "source": "example/img2grey",
        "revision": "0123456789abcdef0123456789abcdef01234567",
        "ref": "v1.1.2",
        "commit_time": COMMIT_TIME,
        "readme": README,
    }
    values.update(changes)
    return WheelInput(**values)


def make_zip_variant(root: Path, variant: str = "torch-universal", *, name: str = "relu",
                     meta: dict[str, Any] | None = None) -> Path:
    """build/<variant>/ of a kernel in kernel-builder's zip layout: metadata.json (``build-layout: "zip"``) and the
    package in ``<id>.zip`` (``__init__.py`` at the archive's top), digest included."""
    import io
    import zipfile

    vdir = root / "build" / variant
    vdir.mkdir(parents=True)
    kernel_id = f"_{name.replace('-', '_')}_abc123"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for arcname, text in (("__init__.py", "from ._ops import ops\n"), ("_ops.py", "ops = 'zip'\n")):
            info = zipfile.ZipInfo(arcname, (2026, 1, 1, 0, 0, 0))
            zf.writestr(info, text)
    (vdir / f"{kernel_id}.zip").write_bytes(buf.getvalue())
    metadata: dict[str, Any] = {
        "name": name, "id": kernel_id, "version": 1, "license": "Apache-2.0", "python-depends": [],
        "backend": {"type": "cpu", "archs": []}, "build-layout": "zip", "kernels-minver": "0.19.0",
    }
    metadata.update(meta or {})
    metadata["digest"] = {"algorithm": "sha256", "files": digest.compute(vdir)}
    (vdir / "metadata.json").write_text(json.dumps(metadata, indent=2))
    return vdir
